"""The stage search's front door: a request's space, the engine's say on stage plans, the
even splits priced as the incumbent, then branch and bound (search.py)."""

from __future__ import annotations

import math
import time

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
from optimizer.search import (
    ENGINE_RULE_PREFIX,
    EVEN_STAGES,
    MEMORY_LIMIT,
    CutShort,
    PricedSpace,
    SearchProblem,
    StopSignal,
    layout_grid,
    narrowed,
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
# Most layouts (degree tuples x knob values x placement classes, before validity) the stage
# search prices at once: 4x the plate's 1,956,096, about 20 s of numpy on 2 cores; a request
# past it is refused before anything is built.
MAX_STAGE_GRID_ROWS = 8_000_000
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


def refuse_if_too_large(problem: SearchProblem) -> None:
    axes = [len(problem.degrees), len(problem.placements)]
    axes += [len(values) for values in problem.knobs.values()]
    rows = math.prod(axes)
    if rows > MAX_STAGE_GRID_ROWS:
        raise InvalidSpec(
            f"the stage search would price {rows:,} layouts ({len(problem.degrees):,} degree "
            f"tuples x knob values x placements), over its limit of {MAX_STAGE_GRID_ROWS:,}: "
            "fix a degree (search.tp, search.pp, ...) or narrow the knob lists",
            "search",
        )


# Rows priced between two looks at the clock and the stop signal (~1 s of numpy on 2 cores).
PRICE_CHUNK_ROWS = 400_000


def priced_in_chunks(
    problem: SearchProblem, a: CostAssumptions, deadline: float, stop: StopSignal
) -> PricedSpace:
    """Every layout of the problem priced by the profile a chunk at a time; CutShort when the
    time runs out or the stop signal is set first (nothing was proved)."""
    grid = layout_grid(problem)
    profile = profile_named(problem.profile)
    parts: list[GridPrices] = []
    for start in range(0, len(grid), PRICE_CHUNK_ROWS):
        if stop.stopped or time.perf_counter() > deadline:
            raise CutShort()
        rows = np.arange(start, min(start + PRICE_CHUNK_ROWS, len(grid)))
        parts.append(profile.price_grid(problem.job, grid.take(rows), a))
    fields = GridPrices.__dataclass_fields__
    joined = (
        {f: np.concatenate([getattr(p, f) for p in parts]) for f in fields}
        if parts
        else {f: np.zeros(0) for f in fields}
    )
    return PricedSpace(grid, GridPrices(**joined))


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
    problem = narrowed(problem)
    refuse_if_too_large(problem)
    stop = stop or StopSignal()
    deadline = start + time_limit_s
    try:
        priced = priced_in_chunks(problem, a, deadline, stop)
    except CutShort:
        wall_s = time.perf_counter() - start
        return StageSearch(None, None, False, 0, 0, 0, 0, 0.0, wall_s)  # nothing proved
    grid, L = priced.grid, job.model.num_layers
    masks = restriction_masks(problem, priced)
    with np.errstate(all="ignore"):
        base = np.isfinite(priced.mfu) & (priced.mfu > 0)
    for name, rule in masks.items():
        if name not in SPLIT_RULES and name != MEMORY_LIMIT:
            base &= rule
    fits = base & masks[MEMORY_LIMIT] & sp.exact_split(L, grid.pp, grid.vpp)
    incumbent = even_incumbent(job, a, priced, np.flatnonzero(fits))
    searched = base & (grid.pp > 1) & (grid.schedule_codes != schedule_code(Schedule.DUALPIPE))
    rows = np.flatnonzero(searched)
    bounds = np.full(len(grid), np.inf)
    bounds[rows] = sp.step_lower_bounds_s(job, a, grid.take(rows))
    candidates = group_candidates(grid, bounds, rows)
    best, proved, solved, pruned, rounding = branch_and_bound(
        problem, a, grid, candidates, incumbent, uniform, deadline, workers, stop
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
