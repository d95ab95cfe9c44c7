"""The CP-SAT optimiser on fixed cases: the plate's published layout, infeasibility cores,
priced knobs, fixed degrees and placement, determinism. Expected layouts come from Llama 3's
published setting or from the exhaustive enumerator, never from the solver itself."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from pydantic import ValidationError

from models.layout import Recompute
from optimizer import OptimizeResult, Request
from optimizer import explain as explaining
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.search import enumerator
from optimizer.search.problem import resolve_space
from optimizer.search.solve import SolveSettings, best_layout
from optimizer.search.space import SearchSpace
from optimizer.search.terms import LN_MFU_SCALE
from optimizer.searches import optimize as search_optimize
from optimizer.searches import pareto as search_pareto
from tests.helpers import plate_job

# These cases pin the workshop profile's optimum (searches default to standard).


def optimize(request: Request, budget: SolveSettings | None = None) -> OptimizeResult:
    """The search under the workshop profile."""
    return search_optimize(replace(request, profile="workshop"), budget)


@pytest.fixture(scope="module")
def plate_result():
    return optimize(Request(plate_job(), engine=None))


def enumerated_mfu(job, space: SearchSpace) -> float | None:
    problem = resolve_space(job, space, "workshop")
    layout = enumerator.best_layout(problem, CostAssumptions())
    return None if layout is None else evaluate(job, layout).mfu


def test_plate_gets_llama3_published_layout_proved(plate_result) -> None:
    # Llama 3 405B pre-training: tp 8 (one node), pp 16, interleaved 4, ZeRO-2 (FSDP-like
    # sharding of grads and optimiser), no recompute: the plate's 42.55% at 78.56 GB.
    best = plate_result.best
    layout = best.layout
    assert plate_result.status == "optimal" and plate_result.solver.proved_optimal
    assert (layout.tp, layout.pp, layout.cp, layout.data_parallel_size) == (8, 16, 1, 128)
    assert (layout.vpp, layout.zero, layout.recompute) == (4, 2, Recompute.NONE)
    assert layout.placement[0] == "tp"  # tensor innermost came out of the solver
    assert best.mfu == pytest.approx(0.4255, abs=5e-5)
    assert best.memory.total / 1e9 == pytest.approx(78.56, abs=0.01)


def test_plate_says_memory_binds(plate_result) -> None:
    memory = next(b for b in plate_result.binding if b.name == "memory_limit")
    assert memory.description.startswith("memory binds: 78.6 of 80 GB")
    # without the limit the best layout needs more than 80 GB and beats 42.55%
    assert memory.relaxed.memory.total > 80e9 and memory.relaxed_mfu > 0.4256
    slack = {s.name: s for s in plate_result.slack}
    assert slack["memory_limit"].slack == pytest.approx(80 - 78.5618, abs=1e-3)


def test_solver_objective_agrees_with_cost_model() -> None:
    job = plate_job()
    problem = resolve_space(job, SearchSpace(), "workshop")
    found = best_layout(problem, CostAssumptions(), SolveSettings())
    mfu = evaluate(job, found.layout).mfu
    # two rounded table terms: at most one unit of LN_MFU_SCALE apart
    assert abs(found.ln_mfu - LN_MFU_SCALE * math.log(mfu)) <= 1.0
    assert abs(found.memory_bytes - evaluate(job, found.layout).memory.total) <= 2


def test_405b_on_64_gpus_conflict_is_memory_alone() -> None:
    result = optimize(Request(plate_job(gpus=64), engine=None))
    assert result.status == "infeasible" and result.best is None
    assert [c.name for c in result.conflict] == ["memory_limit"]
    # the least memory any layout with tp dividing the 8 KV heads needs, by enumeration
    problem = resolve_space(plate_job(gpus=64), SearchSpace(), "workshop")
    space = enumerator.price_space(problem, CostAssumptions())
    kv_ok = enumerator.restriction_masks(problem, space)["kv_heads"]
    least_gb = space.memory_bytes[kv_ok].min() / 1e9
    assert f"needs {least_gb:.1f} GB > 80 GB" in result.conflict[0].description
    assert "ZeRO-2, recompute full" in result.conflict[0].description
    assert enumerated_mfu(plate_job(gpus=64), SearchSpace()) is None


def test_70b_on_16_gpus_without_recompute_conflict_names_both() -> None:
    job = plate_job(gpus=16, model="llama3-70b")
    result = optimize(Request(job, space=SearchSpace(recompute=[Recompute.NONE]), engine=None))
    assert result.status == "infeasible"
    assert sorted(c.name for c in result.conflict) == ["memory_limit", "recompute_allowed"]
    # with full recompute allowed it fits: the conflict is real and minimal
    assert optimize(Request(job, engine=None, explain=False)).status == "optimal"


def test_fixed_tp_against_kv_rule_conflict() -> None:
    result = optimize(Request(plate_job(), space=SearchSpace(tp=16), engine=None))
    assert sorted(c.name for c in result.conflict) == ["fixed_tp", "kv_heads"]
    relaxed = optimize(
        Request(
            plate_job(), space=SearchSpace(tp=16, require_tp_divides_kv_heads=False), engine=None
        )
    )
    assert relaxed.best.layout.tp == 16
    assert relaxed.best.mfu == pytest.approx(
        enumerated_mfu(plate_job(), SearchSpace(tp=16, require_tp_divides_kv_heads=False)),
        rel=1e-6,
    )


def test_unpriced_knobs_warn_and_stay_priced() -> None:
    result = optimize(
        Request(
            plate_job(),
            space=SearchSpace(
                cp=4, zero_stages=[2, 3], recompute=[Recompute.SELECTIVE, Recompute.FULL]
            ),
            engine=None,
            explain=False,
        )
    )
    text = " ".join(result.warnings)
    assert "cp(4)" in text and "ZeRO stages ['3']" in text and "recompute ['selective']" in text
    layout = result.best.layout
    assert layout.cp == 1 and layout.zero == 2 and layout.recompute == Recompute.FULL


@pytest.mark.parametrize(
    "space",
    [
        SearchSpace(tp=4),
        SearchSpace(pp=8, vpp=2),
        SearchSpace(zero_stages=[0, 1], memory_limit_gb=120),
        SearchSpace(max_vpp=1, memory_limit_gb=60),
    ],
)
def test_restricted_spaces_match_enumerator(space: SearchSpace) -> None:
    result = optimize(Request(plate_job(), space=space, engine=None, explain=False))
    for name in ("tp", "pp", "vpp"):
        if getattr(space, name) is not None:
            assert getattr(result.best.layout, name) == getattr(space, name)
    assert result.best.mfu == pytest.approx(enumerated_mfu(plate_job(), space), rel=1e-6)


def test_fixed_placement_is_kept_and_priced() -> None:
    placement = ("dp", "pp", "cp", "tp")
    result = optimize(
        Request(plate_job(), space=SearchSpace(placement=placement), engine=None, explain=False)
    )
    assert result.best.layout.placement == placement
    assert result.best.mfu == pytest.approx(
        enumerated_mfu(plate_job(), SearchSpace(placement=placement)), rel=1e-6
    )
    assert result.best.mfu < 0.4255  # tensor parallelism off NVLink costs


def test_same_layout_every_time_with_two_workers(plate_result) -> None:
    for _ in range(3):
        again = optimize(
            Request(plate_job(), engine=None, explain=False),
            SolveSettings(workers=2),
        )
        assert again.best.layout == plate_result.best.layout


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"vpp": 8, "max_vpp": 4}, "vpp(8) exceeds max_vpp(4)"),
        ({"zero_stages": [5]}, "less than or equal to 3"),
        ({"micro_batches": []}, "at least 1 item"),
        ({"micro_batches": list(range(1, 18))}, "at most 16 items"),
        ({"placement": ["tp", "tp", "pp", "dp"]}, "placement must order"),
        ({"colour": "red"}, "Extra inputs"),
    ],
)
def test_search_space_rejects_bad_fields(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SearchSpace.model_validate(fields)


def test_spent_budget_says_explanations_are_missing(plate_result) -> None:
    problem = resolve_space(plate_job(), SearchSpace(), "workshop")
    spent = explaining.Budget(deadline=0.0, workers=1)
    explained = explaining.explain(problem, plate_result.best, CostAssumptions(), spent)
    assert explained.binding == () and explained.warnings == (explaining.CUT_SHORT,)


def test_equal_mfu_goes_to_least_memory_then_smallest_degrees() -> None:
    # With 200 GB every ZeRO stage fits tp 8, pp 16, vpp 4 at the same MFU (ZeRO 0-2 price
    # no communication in workshop); the least memory is ZeRO-2's: 6.34 + 0.05 + 0.30 GB of
    # states against 6.34 + 6.34 + 38.0 for ZeRO-0.
    space = SearchSpace(tp=8, pp=16, vpp=4, memory_limit_gb=200, recompute=[Recompute.NONE])
    result = optimize(Request(plate_job(), space=space, engine=None, explain=False))
    assert result.best.layout.zero == 2
    # With tp fixed at 1 there is no tensor-parallel traffic, so every placement prices the
    # same: the tie goes to the first order, the plate's tensor-innermost one.
    small = optimize(
        Request(
            plate_job(gpus=8, model="llama3-8b"),
            space=SearchSpace(tp=1),
            engine=None,
            explain=False,
        )
    )
    assert small.best.layout.placement == ("tp", "cp", "pp", "dp")


def test_fixed_degree_that_costs_mfu_is_reported_binding() -> None:
    result = optimize(Request(plate_job(), space=SearchSpace(tp=4), engine=None))
    fixed = next(b for b in result.binding if b.name == "fixed_tp")
    assert fixed.relaxed.layout.tp == 8  # the free optimum
    assert fixed.relaxed_mfu == pytest.approx(0.42551, abs=1e-5)
    assert fixed.description.startswith("tp fixed at 4 binds: without it the best is tp 8")


def test_frontier_two_solves_a_point_matches_enumerator(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fallback used where the one-solve objective could overflow int64
    from optimizer.search import pareto as frontier
    from optimizer.search import solve as cpsat_solve

    def two_solves(layout_model, settings, cap):
        layout_model.frontier_in_one_solve = False
        return cpsat_solve.frontier_point(layout_model, settings, cap)

    monkeypatch.setattr(frontier, "frontier_point", two_solves)
    result = search_pareto(
        Request(plate_job(), profile="workshop", engine=None),
        SolveSettings(time_limit_s=30.0),
    )
    problem = resolve_space(plate_job(), SearchSpace(), "workshop")
    expected = enumerator.frontier_points(problem, CostAssumptions())
    assert [round(e.mfu, 9) for e in result.frontier] == [round(m, 9) for _, m, _ in expected]
