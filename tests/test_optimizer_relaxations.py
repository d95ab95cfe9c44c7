"""Every relaxable rule of a request is reported, binding or not, and each verdict and relaxed
MFU agree with the exhaustive enumerator run with that rule dropped (or its bound widened)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.layout import Recompute
from optimizer import OptimizeResult, Request, SolveSettings
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.search import LayoutModel, build_tables, enumerator
from optimizer.search.problem import resolve_space
from optimizer.search.space import SearchSpace
from optimizer.searches import optimize as search_optimize
from optimizer.searches import pareto as search_pareto
from optimizer.searches import prepare_search
from tests.helpers import engine_or_none, plate_job


def optimize(request: Request, budget: SolveSettings | None = None) -> OptimizeResult:
    """The search under the workshop profile."""
    return search_optimize(replace(request, profile="workshop"), budget)


def enumerated_relaxed_mfu(job, space: SearchSpace, rule: str) -> float:
    """The enumerator's best MFU with `rule` relaxed the way the issue words it."""
    if rule == "max_vpp":  # twice the chunks; workshop's default bound is the plate's v = 4
        space = space.model_copy(update={"max_vpp": (space.max_vpp or 4) * 2})
    if rule == "node_size":  # nodes twice as large
        cluster = job.cluster.model_copy(update={"gpus_per_node": job.cluster.gpus_per_node * 2})
        job = job.model_copy(update={"cluster": cluster})
    problem = resolve_space(job, space, "workshop")
    relaxed = frozenset() if rule in ("max_vpp", "node_size") else frozenset({rule})
    layout = enumerator.best_layout(problem, CostAssumptions(), relaxed)
    assert layout is not None
    return evaluate(job, layout, "workshop").mfu


CASES = [
    # the plate: memory and max_vpp bind; the KV rule and node size do not
    (plate_job(), SearchSpace(), {"memory_limit", "kv_heads", "max_vpp", "node_size"}),
    # even stages: 126 layers refuse Llama 3's pp 16 (7.875 layers a stage)
    (
        plate_job(),
        SearchSpace(even_stages=True),
        {"memory_limit", "kv_heads", "max_vpp", "node_size", "even_stages"},
    ),
    # a fixed tp, two allowed ZeRO stages and recompute modes, a 60 GB limit: every kind of rule
    (
        plate_job(64, "llama3-70b", global_batch=256),
        SearchSpace(
            tp=2, zero_stages=[0, 1], recompute=[Recompute.FULL], memory_limit_gb=60, max_vpp=2
        ),
        {
            "memory_limit",
            "kv_heads",
            "max_vpp",
            "node_size",
            "fixed_tp",
            "zero_allowed",
            "recompute_allowed",
        },
    ),
]


@pytest.mark.parametrize(
    ("job", "space", "rules"), CASES, ids=["plate", "plate-even", "70b-restricted"]
)
def test_relaxations_cover_every_rule_and_match_enumerator(
    job, space: SearchSpace, rules: set[str]
) -> None:
    result = optimize(Request(job, space=space, engine=None))
    assert result.status == "optimal"
    best_mfu = result.best.mfu
    assert {r.name for r in result.relaxations} == rules
    for relaxation in result.relaxations:
        expected = enumerated_relaxed_mfu(job, space, relaxation.name)
        binds = expected > best_mfu * (1 + 1e-7)
        assert relaxation.binds == binds, relaxation.name
        if binds:
            assert relaxation.relaxed_mfu == pytest.approx(expected, rel=1e-6)
            assert relaxation.relaxed.mfu == pytest.approx(expected, rel=1e-6)
        else:
            assert relaxation.relaxed_mfu is None and relaxation.relaxed is None
            assert "would not raise MFU" in relaxation.description
    assert result.binding == tuple(r for r in result.relaxations if r.binds)


def test_plate_verdicts_by_name() -> None:
    result = optimize(Request(plate_job(), engine=None))
    verdicts = {r.name: r.binds for r in result.relaxations}
    # Llama 3's published layout is held back by memory (78.6 of 80 GB) and by vpp <= 4
    assert verdicts == {
        "memory_limit": True,
        "max_vpp": True,
        "kv_heads": False,
        "node_size": False,
    }
    node = next(r for r in result.relaxations if r.name == "node_size")
    assert (
        node.description
        == "relaxing the node size (8 GPUs) would not raise MFU (best stays 42.55%)"
    )


def test_no_relaxations_without_explanations() -> None:
    result = optimize(Request(plate_job(), engine=None, explain=False))
    assert result.relaxations == () and result.binding == ()


@pytest.mark.parametrize(
    ("job", "space"),
    [
        (plate_job(), SearchSpace()),
        (plate_job(64, "llama3-70b", global_batch=256), SearchSpace(memory_limit_gb=60)),
    ],
)
def test_memory_step_up_is_the_enumerators_least_memory_better_layout(job, space) -> None:
    # Over every valid layout (memory rule dropped): the least memory among those whose MFU
    # beats the optimum's is the smallest raise of the limit that buys anything.
    result = optimize(Request(job, space=space, engine=None))
    memory = next(r for r in result.relaxations if r.name == "memory_limit")
    assert memory.binds and memory.step_up is not None
    problem = resolve_space(job, space, "workshop")
    priced = enumerator.price_space(problem, CostAssumptions())
    valid = enumerator.feasible(problem, priced, frozenset({"memory_limit"}))
    better = valid & (priced.mfu > result.best.mfu * (1 + 1e-6))
    least_gb = priced.memory_bytes[better].min() / 1e9
    assert memory.step_up.memory.total / 1e9 == pytest.approx(least_gb, rel=1e-6)
    assert memory.step_up.mfu > result.best.mfu
    assert f"with {least_gb:.1f} GB the best is" in memory.description


def test_even_stages_split_every_chunk_alike_and_bind_on_the_plate() -> None:
    # 126 = 2 x 3^2 x 7 layers: pp * vpp must divide it, which Llama 3's pp 16 does not
    result = optimize(Request(plate_job(), space=SearchSpace(even_stages=True), engine=None))
    assert result.best is not None
    lay = result.best.layout
    assert 126 % (lay.pp * lay.vpp) == 0 and lay.pp != 16
    (even,) = [r for r in result.binding if r.name == "even_stages"]
    assert even.description.startswith("even pipeline stages: pp * vpp divides num_layers(126)")
    assert even.relaxed is not None and even.relaxed.layout.pp == 16  # the plate's optimum


def test_even_stages_with_a_fixed_uneven_pp_is_a_named_conflict() -> None:
    result = optimize(Request(plate_job(), space=SearchSpace(even_stages=True, pp=16), engine=None))
    assert result.status == "infeasible"
    assert {item.name for item in result.conflict} == {"even_stages", "fixed_pp"}


def test_interleaving_on_too_few_stages_is_a_named_rule() -> None:
    # Megatron-LM's assertion: pp > 2 with interleaving. Llama 3 70B on 64 GPUs, batch 256:
    # the free optimum runs pp 2 x vpp 4; the rule must move it (to the enumerator's best
    # under the same mask), bind, and give pp 2 x vpp 4 back when relaxed
    job = plate_job(64, "llama3-70b", global_batch=256)
    free = optimize(Request(job, space=SearchSpace(max_vpp=4), engine=None, explain=False))
    assert (free.best.layout.pp, free.best.layout.vpp) == (2, 4)
    space = SearchSpace(min_interleaved_pp=3, max_vpp=4)
    expected = enumerator.best_layout(resolve_space(job, space, "workshop"), CostAssumptions())
    result = optimize(Request(job, space=space, engine=None))
    assert result.best is not None and expected is not None
    lay = result.best.layout
    assert lay.vpp == 1 or lay.pp >= 3
    assert result.best.mfu == pytest.approx(evaluate(job, expected, "workshop").mfu, rel=1e-6)
    (rule,) = [r for r in result.binding if r.name == "min_interleaved_pp"]
    assert rule.description.startswith("interleaving (vpp > 1) needs pp >= 3")
    assert rule.relaxed is not None and rule.relaxed.mfu == pytest.approx(free.best.mfu)
    fixed = optimize(
        Request(job, space=SearchSpace(min_interleaved_pp=3, pp=2, vpp=2), engine=None)
    )
    assert fixed.status == "infeasible"
    assert {item.name for item in fixed.conflict} == {"min_interleaved_pp", "fixed_pp", "fixed_vpp"}


def test_knob_rules_that_rule_each_other_out_are_a_conflict_not_an_error() -> None:
    # zero-bubble runs without interleaving, so vpp 4 with only zero-bubble allowed leaves no
    # layout (the enumerator agrees); the answer names both rules
    job, space = plate_job(), SearchSpace(vpp=4, schedules=["zero-bubble"])
    assert enumerator.best_layout(resolve_space(job, space, "standard"), CostAssumptions()) is None
    result = search_optimize(Request(job, space=space, engine=None))
    assert result.status == "infeasible" and result.solver.proved_optimal
    assert {item.name for item in result.conflict} == {"fixed_vpp", "schedule_allowed"}
    assert (
        search_pareto(
            Request(job, space=space, engine=None),
            SolveSettings(time_limit_s=30.0),
        ).frontier
        == ()
    )


@pytest.mark.parametrize("engine", [None, "megatron"])
def test_standard_relaxations_over_their_own_rows_match_the_wide_model_and_enumerator(
    engine: str | None,
) -> None:
    # under standard each rule is re-solved over the rows allowed without it that no such row
    # beats (enumerator.frontier_rows with it relaxed), and the rules are named from a model
    # of a few rows: they must be the wide model's rules, each verdict the enumerator's
    job = plate_job(1024, "llama3-70b")
    problem, costs = prepare_search(Request(job, engine=engine_or_none(engine)))
    result = search_optimize(
        Request(job, engine=engine_or_none(engine)),
        SolveSettings(time_limit_s=60),
    )
    assert result.status == "optimal" and result.explanations_complete
    wide_rules = set(LayoutModel(build_tables(problem, costs)).rules)
    assert {r.name for r in result.relaxations} - {
        "max_vpp",
        "node_size",
        "memory_fit",
    } == wide_rules
    bound = 0
    for relaxation in (r for r in result.relaxations if r.name in wide_rules):
        layout = enumerator.best_layout(problem, costs, frozenset({relaxation.name}))
        assert layout is not None
        expected = evaluate(job, layout, "standard", costs).mfu
        assert relaxation.binds == (expected > result.best.mfu * (1 + 1e-7)), relaxation.name
        if relaxation.binds:
            bound += 1
            assert relaxation.relaxed_mfu == pytest.approx(expected, rel=1e-6)
    assert bound >= 1
