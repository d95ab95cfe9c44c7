"""The stage search's front door: a request's space, the engine's say on stage plans, the
even splits priced as the incumbent, then branch and bound (search.py)."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Schedule
from optimizer.costmodel import (
    CostAssumptions,
    GridPrices,
    LayoutGrid,
    profile_named,
    schedule_code,
)
from optimizer.costmodel import stage_plans as sp
from optimizer.cpsat import Budget, CutShort, StopSignal
from optimizer.search import (
    ENGINE_RULE_PREFIX,
    EVEN_STAGES,
    MEMORY_LIMIT,
    PricedSpace,
    SearchProblem,
    layout_grid,
    narrow_to_rules,
    placement_class_of,
    restriction_masks,
)
from optimizer.staging.search import (
    Candidates,
    PlanFound,
    StageSearch,
    branch_and_bound,
    group_candidates,
)

# Engines whose launch takes any per-rank layer split, and whether they take a recompute
# mode per rank. Megatron-Core: `--pipeline-model-parallel-layout` places any layers on any
# chunk (pipeline_parallel_layer_layout.py:25-107 at d98e8a6), but recompute_granularity,
# recompute_method and recompute_num_layers are one setting for every stage
# (transformer_config.py). `generic` is a what-if: anything goes.
PLAN_ENGINES = {"generic": True, "megatron": False, "nemo": False}
# Most valid layouts the stage search prices at once: about 10 s of numpy on 2 cores (the
# plate has 1,059,000 of them); a request past it is refused as soon as its count passes.
MAX_STAGE_LAYOUTS = 4_000_000
# Rows built or priced between two looks at the clock and the stop signal (~0.3 s of numpy).
CHUNK_ROWS = 100_000
# Rules a stage plan replaces: how layers split is what the plan chooses.
SPLIT_RULES = (EVEN_STAGES, ENGINE_RULE_PREFIX + "layer_split")


def recompute_per_stage(engine: str | None, requested: bool | None) -> bool:
    """Whether ranks may differ in recompute mode; refuses what the engine cannot launch."""
    name = engine or "generic"
    if name not in PLAN_ENGINES:
        raise InvalidSpec(
            f"engine {name} does not take a per-rank layer split that layoutopt can write: "
            "stage plans are for megatron, nemo (--pipeline-model-parallel-layout) and generic",
            "engine",
        )
    if requested and not PLAN_ENGINES[name]:
        raise InvalidSpec(
            f"engine {name} sets recompute once for every pipeline stage (Megatron-Core's "
            "recompute_granularity): per_stage_recompute needs engine generic",
            "per_stage_recompute",
        )
    return PLAN_ENGINES[name] if requested is None else requested


def refuse_mode_dependent_traffic(problem: SearchProblem, a: CostAssumptions) -> None:
    """The stage search looks each rank's data-parallel traffic up by its layer count alone:
    a ZeRO-3 whose replayed forward gathers again would make it depend on the rank's
    recompute mode too."""
    if a.zero3_recompute_regathers and 3 in problem.knobs["zero"]:
        raise InvalidSpec(
            "stage plans price each rank's ZeRO-3 gathers once whatever its recompute, and "
            "zero3_recompute_regathers makes them depend on it: search zero_stages up to 2, "
            "or leave the assumption unset",
            "assumptions.zero3_recompute_regathers",
        )


def searchable_rows(priced: PricedSpace, masks: dict[str, np.ndarray]) -> np.ndarray:
    """Rows with figures that every rule but memory and the layer split allows (a plan
    chooses the split, and is held to memory rank by rank)."""
    with np.errstate(all="ignore"):
        base = np.isfinite(priced.mfu) & (priced.mfu > 0)
    for name, rule in masks.items():
        if name not in SPLIT_RULES and name != MEMORY_LIMIT:
            base &= rule
    return base


def even_incumbent(
    job: TrainingJob, a: CostAssumptions, space: PricedSpace, rows: np.ndarray
) -> PlanFound | None:
    """The best fitting even split at one mode, as a plan."""
    if rows.size == 0:
        return None
    row = int(rows[np.argmax(space.mfu[rows])])
    layout = space.grid.layout(row)
    plan = sp.even_plan(job, layout)
    return PlanFound(layout, plan, sp.price_plan(job, a, layout, plan))


def plan_space_size(
    num_layers: int, grid: LayoutGrid, candidates: Candidates, uniform: bool
) -> int:
    """Stage plans over the searched layouts: compositions of the layers into pp parts of at
    least vpp each, times the recompute choices (one for all ranks, or one per rank)."""
    total = 0
    for row, mask in zip(candidates.rows.tolist(), candidates.mode_masks.tolist(), strict=True):
        pp, vpp, modes = int(grid.pp[row]), int(grid.vpp[row]), int(mask).bit_count()
        splits = math.comb(num_layers - pp * vpp + pp - 1, pp - 1)
        total += splits * (modes if uniform else modes**pp)
    return total


def look(budget: Budget) -> None:
    """CutShort when the time is up or the stop signal is set: nothing is claimed."""
    if budget.expired:
        raise CutShort()


def joined(grids: list[LayoutGrid]) -> LayoutGrid:
    fields = LayoutGrid.__dataclass_fields__
    return LayoutGrid(**{f: np.concatenate([getattr(g, f) for g in grids]) for f in fields})


def tuple_index(degrees: np.ndarray, grid: LayoutGrid) -> np.ndarray:
    """Each row's position in `degrees` (its (tp, pp, cp, dp) tuple). Every degree divides
    the GPU count, so a tuple is three positions among the divisors (dp follows)."""
    divisors = np.unique(degrees[:, :3])

    def code(tp: np.ndarray, pp: np.ndarray, cp: np.ndarray) -> np.ndarray:
        n = divisors.size
        at = [np.searchsorted(divisors, d) for d in (tp, pp, cp)]
        return (at[0] * n + at[1]) * n + at[2]

    known = code(degrees[:, 0], degrees[:, 1], degrees[:, 2])
    order = np.argsort(known)
    return order[np.searchsorted(known[order], code(grid.tp, grid.pp, grid.cp))]


def one_placement_a_class(
    problem: SearchProblem, representative: np.ndarray, grid: LayoutGrid
) -> LayoutGrid:
    """The grid's rows whose placement represents its class (`representative`: [tuple k,
    placement i] -> code, placement_class_of's for the problem's tuples): the others price
    exactly as it does (search/placements.py), so each would be bounded and solved again
    for nothing."""
    k = tuple_index(problem.degrees, grid)
    column = np.full(max(problem.placements) + 1, -1, dtype=np.int64)
    column[list(problem.placements)] = np.arange(len(problem.placements))
    kept = representative[k, column[grid.placement]] == grid.placement
    return grid.take(kept)


def layouts_in_blocks(problem: SearchProblem, budget: Budget) -> LayoutGrid:
    """The problem's valid layouts, one placement a class, a block of degree tuples at a
    time (memory stays near CHUNK_ROWS however many knob values); refused once they pass
    MAX_STAGE_LAYOUTS."""
    per_tuple = len(problem.placements) * math.prod(len(v) for v in problem.knobs.values())
    block = max(1, CHUNK_ROWS // max(per_tuple, 1))
    grids, rows = [layout_grid(replace(problem, degrees=problem.degrees[:0]))], 0
    representative = placement_class_of(problem)  # once: per block it costs per call
    for start in range(0, len(problem.degrees), block):
        look(budget)
        part = replace(problem, degrees=problem.degrees[start : start + block])
        of = representative[start : start + block]
        grids.append(one_placement_a_class(part, of, layout_grid(part)))
        rows += len(grids[-1])
        if rows > MAX_STAGE_LAYOUTS:
            raise InvalidSpec(
                f"the stage search would price more than {MAX_STAGE_LAYOUTS:,} layouts (over "
                f"{rows:,} from {start + block:,} of {len(problem.degrees):,} degree tuples): "
                "fix a degree (search.tp, search.pp, ...) or narrow the knob lists",
                "search",
            )
    return joined(grids)


def priced_in_chunks(problem: SearchProblem, a: CostAssumptions, budget: Budget) -> PricedSpace:
    """Every layout of the problem priced by the profile a chunk at a time."""
    grid = layouts_in_blocks(problem, budget)
    profile = profile_named(problem.profile)
    parts: list[GridPrices] = []
    for start in range(0, max(len(grid), 1), CHUNK_ROWS):
        look(budget)
        rows = np.arange(start, min(start + CHUNK_ROWS, len(grid)))
        parts.append(profile.price_grid(problem.job, grid.take(rows), a))
    fields = GridPrices.__dataclass_fields__
    prices = {f: np.concatenate([getattr(p, f) for p in parts]) for f in fields}
    return PricedSpace(grid, GridPrices(**prices))


def bounded_in_chunks(
    job: TrainingJob,
    a: CostAssumptions,
    grid: LayoutGrid,
    rows: np.ndarray,
    budget: Budget,
) -> np.ndarray:
    """Each row's lower bound over its stage plans (inf for rows not searched)."""
    bounds = np.full(len(grid), np.inf)
    for start in range(0, rows.size, CHUNK_ROWS):
        look(budget)
        chunk = rows[start : start + CHUNK_ROWS]
        bounds[chunk] = sp.step_lower_bounds_s(job, a, grid.take(chunk))
    return bounds


def search_stage_plans(
    problem: SearchProblem,
    a: CostAssumptions,
    time_limit_s: float = 10.0,
    workers: int = 1,
    stop: StopSignal | None = None,
    per_stage_recompute: bool | None = None,
    engine: str | None = None,
) -> StageSearch:
    """The least step time over layouts and their stage plans, proved within the time."""
    start = time.perf_counter()
    job = problem.job
    uniform = not recompute_per_stage(engine, per_stage_recompute)
    refuse_mode_dependent_traffic(problem, a)
    problem = narrow_to_rules(problem)
    budget = Budget(start + time_limit_s, stop or StopSignal())
    try:
        priced = priced_in_chunks(problem, a, budget)
        masks = restriction_masks(problem, priced)
        base = searchable_rows(priced, masks)
        fits = base & masks[MEMORY_LIMIT]
        fits &= sp.exact_split(job.model.num_layers, priced.grid.pp, priced.grid.vpp)
        incumbent = even_incumbent(job, a, priced, np.flatnonzero(fits))
        grid = priced.grid
        dualpipe = grid.schedule_codes == schedule_code(Schedule.DUALPIPE)
        rows = np.flatnonzero(base & (grid.pp > 1) & ~dualpipe)
        bounds = bounded_in_chunks(job, a, grid, rows, budget)
        candidates = group_candidates(grid, bounds, rows)
    except CutShort:
        wall_s = time.perf_counter() - start
        return StageSearch(None, None, False, 0, 0, 0, 0, 0.0, wall_s)  # nothing proved
    L = job.model.num_layers
    best, proved, solved, pruned, rounding = branch_and_bound(
        problem, a, grid, candidates, incumbent, uniform, budget, workers
    )
    return StageSearch(
        best=best,
        even_best=incumbent,
        proved=proved,
        layouts=len(candidates),
        space_size=plan_space_size(L, grid, candidates, uniform),
        solved=solved,
        pruned=pruned,
        rounding=rounding,
        wall_s=time.perf_counter() - start,
    )
