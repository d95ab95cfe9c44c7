"""The explanations' tables. Priced whole, by one pricing per request
(optimizer/search/pricing.py): masks of rows priced once, equal to the tables each search
would price alone, the explanations the same as when every table is built whole. As
optimize prices them, only the layouts whose MFU ceiling could change an answer
(relaxations.wide_tables, the choices by ceilings): the same explanations as priced whole."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from optimizer import Request
from optimizer import explain as explaining
from optimizer.costmodel.profiles import evaluate
from optimizer.engines import get_engine
from optimizer.explain.relaxations import BINDS_RELATIVE, wide_tables
from optimizer.search import (
    KV_HEADS,
    LayoutModel,
    Pricing,
    SearchSpace,
    SolveSettings,
    Tables,
    best_layout,
    best_layout_by_ceilings,
    build_tables,
    engine_rules_broken,
    narrow_to_rules,
    placement_classes,
    resolve_space,
    rule_names,
    solve_best,
)
from optimizer.search import placements as placements_module
from optimizer.search import tables as tables_module
from optimizer.search.dominance import without_dominated
from optimizer.search.problem import KNOBS
from optimizer.search.terms import PLACEMENT, Table, profile_terms
from optimizer.searches import optimize, prepare_search
from tests.helpers import engine_or_none, plate_job

# Requests whose explanations search every kind of derived space: rules relaxed as literals
# (engine rules, kv heads, allowed recompute, a fixed tp), max_vpp's extra chunks, node_size's
# doubled node, the choices' narrower spaces (cp, ep, ZeRO-3, interleaving, recompute), MoE.
CASES = {
    "70b on 512, megatron": (plate_job(512, "llama3-70b"), SearchSpace(), "megatron"),
    "405b on 1,024, recompute ruled": (
        plate_job(1024),
        SearchSpace(max_vpp=4, recompute=["selective", "full"]),
        "megatron",
    ),
    "8b on 256, tp and zero ruled": (
        plate_job(256, "llama3-8b"),
        SearchSpace(zero_stages=[1, 2], tp=2, max_vpp=4),
        None,
    ),
    "mixtral on 64": (plate_job(64, "mixtral-8x7b"), SearchSpace(max_vpp=2), "megatron"),
}


def request(name: str):
    job, space, engine = CASES[name]
    problem, costs = prepare_search(Request(job, space=space, engine=engine_or_none(engine)))
    return job, space, engine, problem, costs


def assert_same_tables(got: Tables, built: Tables) -> None:
    assert got.memory_unit_bytes == built.memory_unit_bytes
    assert got.classes.representative == built.classes.representative
    assert len(got.tables) == len(built.tables)
    for mine, theirs in zip(got.tables, built.tables, strict=True):
        assert mine.axes == theirs.axes
        assert np.array_equal(mine.degree_index, theirs.degree_index)
        for column in ("axis_index", "values", "breaks"):
            ours, others = getattr(mine, column), getattr(theirs, column)
            assert list(ours) == list(others)  # same columns, in the same order
            for name in ours:
                assert np.array_equal(ours[name], others[name]), (column, name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_declared_space_gets_the_table_it_would_build_alone(name: str) -> None:
    *_, problem, costs = request(name)
    spaces = explaining.searched_spaces(problem)
    pricing = Pricing(problem, costs, spaces)
    # every declared space shares the request's pricing (the relaxations' widened spaces,
    # max_vpp's and node_size's, are searched apart, by MFU ceilings)
    assert len(pricing.searches) == len(spaces)
    for space in spaces:  # in the order optimize asks: the optimum's first
        assert_same_tables(pricing.tables(space), build_tables(space, costs))


def test_tables_do_not_depend_on_which_space_is_priced_first() -> None:
    *_, problem, costs = request("405b on 1,024, recompute ruled")
    spaces = explaining.searched_spaces(problem)
    pricing = Pricing(problem, costs, spaces)
    for space in reversed(spaces):  # the wide model's rows first, the optimum's a mask of them
        assert_same_tables(pricing.tables(space), build_tables(space, costs))


def priced_layouts(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every layout the standard profile's tables price from now on (the rows each box
    pricing reads back), counted with its node size."""
    seen: Counter = Counter()
    boxed = tables_module.boxed_prices

    def counting(profile, problem, classes, k, index, assumptions, grid):
        knobs = [np.asarray(problem.knobs[n])[index[n]] for n in KNOBS]
        codes = classes.codes()[k, index[PLACEMENT]]
        rows = np.column_stack([problem.degrees[k], *knobs, codes]).tolist()
        seen.update((problem.job.cluster.gpus_per_node, *row) for row in rows)
        return boxed(profile, problem, classes, k, index, assumptions, grid)

    monkeypatch.setattr(tables_module, "boxed_prices", counting)
    return seen


@pytest.mark.parametrize("name", ["70b on 512, megatron", "mixtral on 64"])
def test_explanations_price_fewer_layouts_than_the_whole_spaces(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, space, engine, *_ = request(name)
    seen = priced_layouts(monkeypatch)
    result = optimize(Request(job, space=space, engine=engine_or_none(engine)))
    assert result.explanations_complete
    floored = sum(seen.values())
    seen.clear()
    whole = explanation(name, shared=True)  # every space priced whole, by one pricing
    assert whole.relaxations == result.relaxations and whole.choices == result.choices
    assert max(seen.values()) == 1  # one pricing: no layout priced twice
    # the request's node and, where a layout's ceiling beats the optimum, node_size's doubled
    # one, each priced in one pass
    assert 8 in {key[0] for key in seen} and {key[0] for key in seen} <= {8, 16}
    assert floored < sum(seen.values()) / 2


def explanation(name: str, shared: bool) -> explaining.Explanation:
    _, _, _, problem, costs = request(name)
    declared = explaining.searched_spaces(problem) if shared else ()
    pricing = Pricing(problem, costs, declared)  # nothing declared: every table built whole
    found = best_layout(narrow_to_rules(problem), costs, SolveSettings(60.0), pricing=pricing)
    assert found.layout is not None
    best = explaining.priced(problem, found.layout, costs)
    budget = explaining.Budget(deadline=time.perf_counter() + 120.0, workers=1)
    return explaining.explain(problem, best, costs, budget, pricing)


@pytest.mark.parametrize("name", ["405b on 1,024, recompute ruled", "8b on 256, tp and zero ruled"])
def test_explanations_from_one_pricing_equal_those_built_whole(name: str) -> None:
    shared, whole = explanation(name, shared=True), explanation(name, shared=False)
    assert shared == whole
    assert shared.relaxations and not shared.warnings


# The searches' defaults on the plate: under Megatron-LM's rules its seq_len % (2 * cp) rule
# is broken only by layouts whose ceiling falls below the optimum.
PLATE = (plate_job(16384), SearchSpace(), "megatron")


def floored_and_whole(job, space, engine) -> tuple[explaining.Explanation, ...]:
    """The explanations as optimize gives them (only the layouts whose ceiling could change
    one priced) and with every table priced whole."""
    problem, costs = prepare_search(Request(job, space=space, engine=engine_or_none(engine)))
    found = best_layout_by_ceilings(narrow_to_rules(problem), costs, SolveSettings(60.0))
    assert found.layout is not None
    best = explaining.priced(problem, found.layout, costs)
    budget = explaining.Budget(deadline=time.perf_counter() + 120.0, workers=1)
    floored = explaining.explain(problem, best, costs, budget)
    pricing = Pricing(problem, costs, explaining.searched_spaces(problem))
    return floored, explaining.explain(problem, best, costs, budget, pricing)


@pytest.mark.parametrize("name", [*sorted(CASES), "plate, megatron"])
def test_explanations_from_floored_tables_equal_those_priced_whole(name: str) -> None:
    floored, whole = floored_and_whole(*(PLATE if name == "plate, megatron" else CASES[name]))
    assert floored == whole
    assert floored.relaxations and not floored.warnings


def test_an_engine_rule_only_layouts_below_the_optimum_break_is_named_and_does_not_bind() -> None:
    job, space, engine = PLATE
    problem, costs = prepare_search(Request(job, space=space, engine=get_engine(engine)))
    found = best_layout_by_ceilings(narrow_to_rules(problem), costs, SolveSettings(60.0))
    assert found.layout is not None
    best = explaining.priced(problem, found.layout, costs)
    budget = explaining.Budget(deadline=time.perf_counter() + 120.0, workers=1)
    floored = wide_tables(problem, best, costs, budget)
    # the floored tables hold only the tuples whose ceiling reaches the optimum
    assert len(floored.problem.degrees) < len(problem.degrees)
    beneath = engine_rules_broken(problem, placement_classes(problem)) - set(rule_names(floored))
    # the sequence splits that odd cp degrees break (over 2 cp, and each cp rank's over tp)
    assert beneath == {"engine_seq_len_divisible_by_2cp", "engine_sequence_parallel_split"}
    # the floored table's literals and the rules broken beneath are the whole table's, but a
    # rule only tuples below the optimum break: the KV-head rule here (tuples whose ceiling
    # falls short are not in the floored tables), which the relaxations judge idle, as
    # test_explanations_from_floored_tables_equal_those_priced_whole checks on this plate
    whole = set(rule_names(build_tables(problem, costs)))
    assert set(rule_names(floored)) | beneath <= whole
    assert whole - set(rule_names(floored)) - beneath == {KV_HEADS}
    assert (
        len(floored.tables[0].degree_index)
        < len(build_tables(problem, costs).tables[0].degree_index) / 10
    )


def test_a_request_without_degree_tuples_is_infeasible_not_a_fault() -> None:
    # 9,999,999 = 3^2 x 239 x 4649 GPUs: no tp divides the heads with pp <= layers and a dp
    # that divides the batch, so nothing is priced (schemathesis found this)
    result = optimize(Request(plate_job(9_999_999), engine=None), SolveSettings(time_limit_s=5.0))
    assert result.status == "infeasible" and [c.name for c in result.conflict] == ["degrees"]


def test_a_conflict_from_one_pricing_equals_one_built_whole() -> None:
    # the estimate held to the 84.94 GB CUDA reports itself: under the memory interval's
    # margin (80.40 GB) even recompute would not fit, and the conflict is the limit's alone
    space = SearchSpace(recompute=["none"], memory_fit="point")
    job = plate_job(16, "llama3-70b")
    problem, costs = prepare_search(Request(job, space=space, engine=None))
    conflicts = []
    for declared in (explaining.searched_spaces(problem), ()):
        pricing = Pricing(problem, costs, declared)
        found = best_layout(narrow_to_rules(problem), costs, SolveSettings(60.0), pricing=pricing)
        assert found.layout is None and found.proved
        budget = explaining.Budget(deadline=time.perf_counter() + 120.0, workers=1)
        conflicts.append(explaining.explain(problem, None, costs, budget, pricing))
    shared, whole = conflicts
    # recompute fits in the 84.94 GB CUDA reports, so the rule that forbids it joins the set
    names = [item.name for item in shared.conflict]
    assert shared == whole and names == ["recompute_allowed", "memory_limit"]


# --- the cheaper steps beside it keep their answers ------------------------------------


def scanned_survivors(memory, ln_mfu, group, rank) -> np.ndarray:
    """Dominance as it was: per group, best MFU first, keep a row with less memory than all
    the rows before it."""
    order = np.lexsort((rank, memory, -ln_mfu, group))
    keep = np.zeros(len(order), dtype=bool)
    for g in np.unique(group):
        least = np.iinfo(np.int64).max
        for row in order[group[order] == g]:
            keep[row], least = memory[row] < least, min(least, memory[row])
    return np.flatnonzero(keep)


@pytest.mark.parametrize("seed", range(5))
def test_dominance_keeps_what_a_group_by_group_scan_keeps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = 2_000
    group, rank = rng.integers(0, 40, rows), rng.permutation(rows)
    memory, ln_mfu = rng.integers(0, 30, rows), rng.integers(-5, 0, rows)  # many ties
    problem = resolve_space(plate_job(8, "llama3-8b"), SearchSpace(), "standard")
    terms = profile_terms("standard")
    table = Table(
        ("vpp",),
        group,
        {"vpp": rank},
        {"weights_bytes": memory, "ln_pipeline_factor": ln_mfu},
    )
    kept = without_dominated(problem, table, terms)
    expected = scanned_survivors(memory, ln_mfu, group, rank)
    assert np.array_equal(kept.axis_index["vpp"], rank[expected])


def test_an_objective_copied_back_is_the_one_written() -> None:
    *_, problem, costs = request("8b on 256, tp and zero ruled")
    tables = build_tables(narrow_to_rules(problem), costs)
    fresh, reused = LayoutModel(tables), LayoutModel(tables)
    fresh.model.maximize(fresh.ln_mfu_value)
    reused.stage_most_mfu()
    reused.stage_least_memory_above(reused.ln_mfu_bounds()[0])
    reused.stage_most_mfu()  # copied back, not written again
    assert str(reused.model.proto.objective) == str(fresh.model.proto.objective)


def test_a_relaxation_settled_in_one_solve_gives_the_verdict_of_two() -> None:
    *_, problem, costs = request("405b on 1,024, recompute ruled")
    optimum = best_layout(narrow_to_rules(problem), costs, SolveSettings(60.0))
    assert optimum.layout is not None
    best_mfu = evaluate(problem.job, optimum.layout, "standard", costs).mfu
    binds_above = best_mfu * (1 + BINDS_RELATIVE)
    layout_model = LayoutModel(build_tables(problem, costs))
    shortcuts = 0
    for rule in layout_model.rules:
        relaxed = frozenset({rule})
        quick = solve_best(layout_model, SolveSettings(60.0), relaxed, None, binds_above)
        full = solve_best(layout_model, SolveSettings(60.0), relaxed)
        assert quick.proved and full.proved and quick.ln_mfu == full.ln_mfu
        if quick.solves < full.solves:  # settled early: neither layout binds
            shortcuts += 1
            for found in (quick, full):
                assert evaluate(problem.job, found.layout, "standard", costs).mfu <= binds_above
        else:
            assert quick.layout == full.layout
    assert shortcuts  # some rule here does not bind


# one more, where interleaving is held under what pays: max_vpp binds
CASES_BEYOND = {
    **CASES,
    "405b on 4,096, megatron, max_vpp 2": (plate_job(4096), SearchSpace(max_vpp=2), "megatron"),
}


@pytest.mark.parametrize("name", sorted(CASES_BEYOND))
def test_widened_relaxations_searched_by_ceilings_give_the_whole_spaces_verdicts(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # max_vpp and node_size are searched only where a layout's MFU ceiling beats the optimum:
    # the verdict and the relaxed optimum are those of the widened space searched whole
    from optimizer.explain.relaxations import _relaxed_problems

    monkeypatch.setitem(CASES, name, CASES_BEYOND[name])
    _, _, _, problem, costs = request(name)
    result = explanation(name, shared=True)
    optimum = best_layout(narrow_to_rules(problem), costs, SolveSettings(60.0))
    assert optimum.layout is not None
    binds_above = evaluate(problem.job, optimum.layout, "standard", costs).mfu
    binds_above *= 1 + BINDS_RELATIVE
    said = {relaxation.name: relaxation for relaxation in result.relaxations}
    for rule, wider in _relaxed_problems(problem).items():
        whole = best_layout(narrow_to_rules(wider), costs, SolveSettings(60.0))
        assert whole.proved and whole.layout is not None
        mfu = evaluate(wider.job, whole.layout, "standard", costs).mfu
        assert said[rule].binds == (mfu > binds_above), rule
        if said[rule].binds:
            assert said[rule].relaxed_mfu == pytest.approx(mfu, rel=1e-9)


def test_placement_classes_kept_from_other_searches_are_those_worked_out_afresh() -> None:
    *_, problem, _ = request("mixtral on 64")  # MoE: the expert links read the experts too
    wide = placements_module.placement_class_of(problem)  # every tuple, then a part of them
    part = replace(problem, degrees=problem.degrees[::3])
    placements_module._CLASSES.clear()
    assert np.array_equal(placements_module.placement_class_of(part), wide[::3])
    placements_module._CLASSES.clear()
    assert np.array_equal(placements_module._class_of(part), wide[::3])
    # another cluster is another context: its classes are its own
    bigger = problem.job.cluster.model_copy(update={"gpus_per_node": 16, "nvlink_domain": 16})
    other = replace(problem, job=problem.job.model_copy(update={"cluster": bigger}))
    assert np.array_equal(
        placements_module.placement_class_of(other), placements_module._class_of(other)
    )
