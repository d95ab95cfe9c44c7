"""MFU ceilings (optimizer/search/ceilings.py) and the optimum searched by them
(ceiling_search.py): every layout's MFU under its ceiling, the step floor the waterfall's
"after pipeline sends", and the same optimum and proof as the search over every tuple."""

from __future__ import annotations

import importlib
import math
from dataclasses import replace

import numpy as np
import pytest

from api.schemas.answers import optimize_out
from bench.report import h100_job
from models.errors import InvalidSpec
from models.job import TrainingJob
from optimizer import Request
from optimizer.costmodel import profile_named
from optimizer.costmodel.standard.breakdown import MFU_STEP_NAMES, breakdown, step_floor_s
from optimizer.costmodel.standard.profile import grid_degrees
from optimizer.engines import get_engine
from optimizer.search import (
    LN_MFU_SCALE,
    Found,
    SearchSpace,
    SolveSettings,
    best_layout,
    ceiling_search,
    narrow_to_rules,
    tuple_ceilings,
)
from optimizer.search.ceilings import floored_rows, rank_tuples, row_ceilings
from optimizer.search.placements import placement_classes
from optimizer.search.problem import KNOBS
from optimizer.search.tables import coupled_valid_rows, valid_rows, with_free_axes
from optimizer.search.terms import PLACEMENT
from optimizer.searches import optimize, prepare_search
from tests.helpers import engine_or_none

# (model, GPUs, engine, search space): dense and MoE, three engines' pricing, several
# micro-batch sizes, a memory limit that leaves few layouts
CASES = [
    ("llama3-8b", 256, "megatron", SearchSpace(micro_batches=[1, 2, 4])),
    ("llama3-70b", 1024, "megatron", SearchSpace()),
    ("llama3-70b", 512, "deepspeed", SearchSpace(memory_limit_gb=40)),
    ("llama3-8b", 128, "torchtitan", SearchSpace(micro_batches=[1, 2])),
    ("mixtral-8x7b", 256, "megatron", SearchSpace()),
]


def _problem(model: str, gpus: int, engine: str, space: SearchSpace):  # type: ignore[no-untyped-def]
    job: TrainingJob = h100_job(gpus, model)
    problem, assumptions = prepare_search(Request(job, space=space, engine=engine_or_none(engine)))
    return narrow_to_rules(problem), assumptions


@pytest.mark.parametrize(("model", "gpus", "engine", "space"), CASES)
def test_no_layout_beats_its_ceiling(
    model: str, gpus: int, engine: str, space: SearchSpace
) -> None:
    problem, assumptions = _problem(model, gpus, engine, space)
    classes = placement_classes(problem)
    grid, k, index = valid_rows(problem, classes, (*KNOBS, PLACEMENT))
    mfu = profile_named("standard").price_grid(problem.job, grid, assumptions).mfu
    ceilings = row_ceilings(problem, classes, assumptions, k, index)
    priced = np.isfinite(mfu)
    assert priced.sum() > 100
    assert np.all(mfu[priced] <= ceilings[priced] * (1 + 1e-12))
    # the tuple's ceiling is its rows' highest, so it holds every row too
    assert np.all(ceilings <= tuple_ceilings(problem, classes, assumptions)[k])
    # not a vacuous bound: the best layout of some tuple comes within a fifth of it
    assert np.max(mfu[priced] / ceilings[priced]) > 0.8
    # the probes that order the search are layouts too: under the same ceilings
    ranking = rank_tuples(problem, classes, assumptions)
    assert np.array_equal(ranking.ceilings, tuple_ceilings(problem, classes, assumptions))
    probed = ranking.probe_mfu > 0
    assert probed.any()
    assert np.all(ranking.probe_mfu[probed] <= ranking.ceilings[probed] * (1 + 1e-12))


def test_the_step_floor_is_the_waterfall_before_the_data_parallel_sync() -> None:
    problem, assumptions = _problem(*CASES[1])
    grid, _, _ = valid_rows(problem, placement_classes(problem), (*KNOBS, PLACEMENT))
    degrees = grid_degrees(grid)
    b = breakdown(problem.job, assumptions, degrees)
    floor = step_floor_s(problem.job, assumptions, degrees)
    after_pipeline_sends = b.step_times_s[MFU_STEP_NAMES.index("after pipeline sends")]
    np.testing.assert_allclose(floor, after_pipeline_sends, rtol=1e-12)
    assert np.all(b.step_time_s >= floor)
    # the data-parallel sync and the optimiser step are what the floor leaves out
    assert np.any(b.step_time_s > floor * 1.01)


@pytest.mark.parametrize("first_tuples", [1, 6, ceiling_search.FIRST_TUPLES])
@pytest.mark.parametrize(("model", "gpus", "engine", "space"), CASES)
def test_the_optimum_by_ceilings_is_the_optimum_over_every_tuple(
    model: str,
    gpus: int,
    engine: str,
    space: SearchSpace,
    first_tuples: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem, assumptions = _problem(model, gpus, engine, space)
    monkeypatch.setattr(ceiling_search, "FIRST_TUPLES", first_tuples)
    everything = best_layout(problem, assumptions, SolveSettings())
    by_ceilings = ceiling_search.best_layout_by_ceilings(problem, assumptions, SolveSettings())
    assert everything.proved and by_ceilings.proved
    assert by_ceilings.layout == everything.layout


def test_as_good_as_each_other_the_two_sets_are_solved_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a margin this wide counts every second optimum within half of the first as a tie, so
    # the union's solve decides, over the rows above a floor half the first optimum's
    problem, assumptions = _problem(*CASES[1])
    monkeypatch.setattr(ceiling_search, "FIRST_TUPLES", 4)
    monkeypatch.setattr(ceiling_search, "TIE_MARGIN", 0.5)
    solves: list[int] = []
    original = ceiling_search.best_layout

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        solves.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ceiling_search, "best_layout", counted)
    found = ceiling_search.best_layout_by_ceilings(problem, assumptions, SolveSettings())
    assert len(solves) == 3  # the first tuples, the others, both together
    assert found.layout == best_layout(problem, assumptions, SolveSettings()).layout


def test_a_floor_no_row_reaches_is_an_infeasible_search_not_an_error() -> None:
    problem, assumptions = _problem(*CASES[0])
    found = best_layout(replace(problem, mfu_floor=2.0), assumptions, SolveSettings())
    assert (found.layout, found.proved) == (None, True)


def test_optimize_without_explanations_searches_by_ceilings() -> None:
    job = h100_job(1024, "llama3-70b")
    explained = optimize(Request(job, engine=get_engine("megatron")))
    bare = optimize(Request(job, engine=get_engine("megatron"), explain=False))
    assert bare.status == explained.status == "optimal"
    assert bare.best is not None and explained.best is not None
    assert bare.best.layout == explained.best.layout
    assert bare.best.mfu == explained.best.mfu


def test_a_space_too_large_to_price_whole_is_explained_by_its_ceilings() -> None:
    # DeepSeek-V3-shaped on 16,384 GPUs with four micro-batch sizes, every placement (no
    # engine's rank order): past the 10M layouts a table may price whole, so the
    # explanations price only what reaches the optimum (ceilings up to
    # MAX_EXPLAIN_CEILING_CELLS, the widened node size's too), and every one is worked out
    job, space = h100_job(16384, "deepseek-v3-shaped"), SearchSpace(micro_batches=[1, 2, 4, 8])
    result = optimize(
        Request(job, space=space, engine=get_engine("generic")), SolveSettings(time_limit_s=60.0)
    )
    assert result.status == "optimal" and result.explained and result.explanations_complete
    assert not any("explanations skipped" in w for w in result.warnings)
    assert result.explanations_skipped == ()
    assert {r.name for r in result.relaxations} >= {"memory_limit", "node_size", "max_vpp"}


def test_a_widened_space_too_large_is_skipped_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # a relaxation whose widened space is over the size guard is said so, by name; the other
    # rules are still judged, and the answer does not claim its explanations complete
    # the module, which the package's function of the same name shadows as an attribute
    relaxing = importlib.import_module("optimizer.explain.relaxations")

    def too_large(rule: str, *args: object) -> None:
        raise InvalidSpec("search space too large: (numbers)", "search")

    monkeypatch.setattr(relaxing, "_beyond", too_large)
    result = optimize(Request(h100_job(1024, "llama3-70b"), engine=get_engine("megatron")))
    assert result.status == "optimal" and not result.explanations_complete
    skipped = [w for w in result.warnings if w.startswith("explanations skipped")]
    assert skipped == [
        f"explanations skipped: {rule} not relaxed: search space too large: (numbers)"
        for rule in ("max_vpp", "node_size")
    ]
    # the answer names them in a field of their own, for a client that reads no prose
    assert result.explanations_skipped == tuple(
        f"{rule} not relaxed: search space too large: (numbers)"
        for rule in ("max_vpp", "node_size")
    )
    assert optimize_out(result).explanations_skipped == list(result.explanations_skipped)
    names = {r.name for r in result.relaxations}
    assert "memory_limit" in names and not names & {"max_vpp", "node_size"}
    assert not any("time limit" in w for w in result.warnings)


def test_the_plates_optimum_by_ceilings() -> None:
    # 405B on 16,384 H100 under Megatron-LM's rules: the case issue 13 times
    problem, assumptions = _problem("llama3-405b", 16384, "megatron", SearchSpace())
    everything = best_layout(problem, assumptions, SolveSettings())
    by_ceilings = ceiling_search.best_layout_by_ceilings(problem, assumptions, SolveSettings())
    assert by_ceilings.proved and by_ceilings.layout == everything.layout


def _ln(mfu: float) -> int:
    return round(LN_MFU_SCALE * math.log(mfu))


def test_a_first_solve_cut_short_claims_no_more_than_the_other_tuples_could_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem, assumptions = _problem(*CASES[1])
    layout = best_layout(problem, assumptions, SolveSettings()).layout
    cut_short = Found(layout, False, 1, bound_ln_mfu=_ln(0.01))  # a bound below any layout
    monkeypatch.setattr(ceiling_search, "best_layout", lambda *_, **__: cut_short)
    found = ceiling_search.best_layout_by_ceilings(problem, assumptions, SolveSettings())
    ranking = rank_tuples(problem, placement_classes(problem), assumptions)
    ceilings, first = ranking.ceilings, ranking.order()[: ceiling_search.FIRST_TUPLES]
    others = np.setdiff1d(np.arange(len(ceilings)), first)
    assert not found.proved and found.layout == layout
    assert found.bound_ln_mfu == _ln(float(ceilings[others].max()))


def test_the_rest_cut_short_keeps_the_first_optimum_unproved_under_the_rests_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem, assumptions = _problem(*CASES[1])
    monkeypatch.setattr(ceiling_search, "FIRST_TUPLES", 1)  # so that others reach the floor
    cut_short = Found(None, False, 1, bound_ln_mfu=_ln(0.99))
    monkeypatch.setattr(ceiling_search, "best_layout", _second_call(None, cut_short))
    found = ceiling_search.best_layout_by_ceilings(problem, assumptions, SolveSettings())
    assert found.layout is not None and found.solves >= 2  # both solves counted
    assert not found.proved and found.bound_ln_mfu == _ln(0.99)


def _second_call(first: Found | None, second: Found | None):  # type: ignore[no-untyped-def]
    """best_layout with its first or second answer replaced (None: the real one)."""
    calls: list[int] = []
    original = ceiling_search.best_layout

    def answer(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        given = first if len(calls) == 1 else second
        return given if given is not None else original(*args, **kwargs)

    return answer


def test_first_tuples_without_a_layout_leave_the_optimum_to_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem, assumptions = _problem(*CASES[1])
    none_proved = Found(None, True, 1)
    monkeypatch.setattr(ceiling_search, "best_layout", _second_call(none_proved, None))
    found = ceiling_search.best_layout_by_ceilings(problem, assumptions, SolveSettings())
    ranking = rank_tuples(problem, placement_classes(problem), assumptions)
    ceilings, first = ranking.ceilings, ranking.order()[: ceiling_search.FIRST_TUPLES]
    others = np.setdiff1d(np.arange(len(ceilings)), first)
    expected = best_layout(
        replace(problem, degrees=problem.degrees[others]), assumptions, SolveSettings()
    )
    assert found.proved and found.layout == expected.layout and found.solves > 1


def test_no_other_layout_reaching_the_floor_leaves_the_first_optimum_proved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem, assumptions = _problem(*CASES[1])
    monkeypatch.setattr(ceiling_search, "FIRST_TUPLES", 1)
    monkeypatch.setattr(ceiling_search, "best_layout", _second_call(None, Found(None, True, 1)))
    found = ceiling_search.best_layout_by_ceilings(problem, assumptions, SolveSettings())
    first = rank_tuples(problem, placement_classes(problem), assumptions).order()[:1]
    expected = best_layout(
        replace(problem, degrees=problem.degrees[first]), assumptions, SolveSettings()
    )
    assert found.proved and found.layout == expected.layout


def test_no_time_for_the_ceilings_is_unknown() -> None:
    job = h100_job(1024, "llama3-70b")
    result = optimize(
        Request(job, engine=get_engine("megatron"), explain=False),
        SolveSettings(time_limit_s=1e-9),
    )
    assert result.status == "unknown" and result.best is None


def test_known_ceilings_serve_only_the_tuples_they_were_computed_for() -> None:
    problem, assumptions = _problem(*CASES[0])
    classes = placement_classes(problem)
    grid, k, index = valid_rows(problem, classes, (*KNOBS, PLACEMENT))
    fresh = row_ceilings(problem, classes, assumptions, k, index)
    ranking = rank_tuples(problem, classes, assumptions)
    assert ranking.cells is not None
    known = replace(problem, known_ceilings=(problem.degrees, ranking.cells))
    np.testing.assert_allclose(row_ceilings(known, classes, assumptions, k, index), fresh, 1e-7)
    # computed for other tuples (the first one's cells everywhere): not used
    stale = replace(problem, known_ceilings=(problem.degrees[:1], ranking.cells[[0] * len(k)]))
    assert np.array_equal(row_ceilings(stale, classes, assumptions, k, index), fresh)


@pytest.mark.parametrize(("model", "gpus", "engine", "space"), CASES[:2] + CASES[4:])
def test_floored_rows_are_the_rows_whose_ceiling_reaches_the_floor_in_order(
    model: str, gpus: int, engine: str, space: SearchSpace
) -> None:
    problem, assumptions = _problem(model, gpus, engine, space)
    classes = placement_classes(problem)
    axes = (*KNOBS, PLACEMENT)
    coupled = coupled_valid_rows(problem, classes, axes, True)
    k, index = with_free_axes(problem, classes, axes, *coupled)
    ceilings = row_ceilings(problem, classes, assumptions, k, index)
    floor = float(np.quantile(ceilings[np.isfinite(ceilings)], 0.9))
    floored = replace(problem, mfu_floor=floor)
    got_k, got_index = floored_rows(floored, classes, assumptions, *coupled)
    kept = ceilings >= floor
    assert 0 < kept.sum() < kept.size
    assert np.array_equal(got_k, k[kept])
    assert set(got_index) == set(index)
    for axis, column in index.items():
        assert np.array_equal(got_index[axis], column[kept]), axis
