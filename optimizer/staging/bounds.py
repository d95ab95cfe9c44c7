"""Lower bounds on one layout's step time over every stage plan, from its solver tables:
the capacity count (how many layers the ranks can hold within a busy time and the memory
limit) gives the least busy time exactly; the step at it, with each data-parallel term at
its least, bounds every plan. The bound over many layouts at once, before any table is
built, is the cost model's (`stage_plans.step_lower_bounds_s`)."""

from __future__ import annotations

import numpy as np

from optimizer.staging.tables import FRACTION_SCALE, TIME_UNIT_S, PlanTables

# --- one layout, from its solver tables: memory-aware ----------------------------------


def layers_that_fit(tables: PlanTables, busy_units: int) -> np.ndarray:
    """Most layers each rank (rows) can hold at each mode (columns) within `busy_units` of
    time and the memory limit; -1 where a mode cannot hold vpp layers."""
    t = tables
    modes = list(t.modes)
    time_per_layer = np.asarray([t.layer_units[m] for m in modes], dtype=np.int64)
    head = np.zeros(t.pp, dtype=np.int64)
    head[-1] = t.head_units
    by_time = (busy_units - head[:, None]) // np.maximum(time_per_layer[None, :], 1)
    layer_bytes = np.asarray([[r.layer_bytes[m] for m in modes] for r in t.ranks], dtype=np.int64)
    fixed = np.asarray([r.fixed_bytes for r in t.ranks], dtype=np.int64)
    working = np.asarray([t.working_bytes[m] for m in modes], dtype=np.int64)
    room = t.memory_limit_bytes - fixed[:, None] - working[None, :]
    by_memory = np.where(room >= 0, room // np.maximum(layer_bytes, 1), -1)
    fit = np.minimum(by_time, by_memory)
    return np.where(fit >= t.vpp, fit, -1)


def placeable(tables: PlanTables, busy_units: int, uniform: bool) -> bool:
    """Whether some plan (integer layers, every rank at least vpp) has no rank slower than
    `busy_units` and none over memory."""
    fit = layers_that_fit(tables, busy_units)
    if uniform:
        per_mode = np.where((fit >= 0).all(axis=0), fit.sum(axis=0), -1)
        return bool(per_mode.max() >= tables.num_layers)
    best = fit.max(axis=1)
    return bool((best >= 0).all() and best.sum() >= tables.num_layers)


def least_busy_units(tables: PlanTables, uniform: bool) -> int | None:
    """The least busiest-rank time of any plan that fits (exact: bisection over integer
    time); None if none fits at any time."""
    t = tables
    high = t.num_layers * max(t.layer_units[m] for m in t.modes) + t.head_units
    if not placeable(t, high, uniform):
        return None
    low = 0
    while low < high:
        middle = (low + high) // 2
        if placeable(t, middle, uniform):
            high = middle
        else:
            low = middle + 1
    return high


def step_bound_s(tables: PlanTables, busy_units: int) -> float:
    """A lower bound on the step over every plan whose busiest rank takes at least
    `busy_units`, in seconds: the solver's objective at that busy time with each data-
    parallel term at its least (the fullest rank holds ceil(L / pp) layers at least)."""
    t, k = tables, FRACTION_SCALE
    dp_step, dp_mb, zero3, optimizer_step = t.least_dp_units
    slot = k * busy_units + k * t.p2p_units
    monotone = t.zero3_overlap_scaled <= k // 2 or min(zero3, dp_mb) == 0
    monotone = monotone and t.dp_overlap_scaled <= t.slots_scaled
    s = t.slowdown_scaled
    if monotone:
        slot += max(k * zero3 - t.zero3_overlap_scaled * busy_units, s * zero3)
        slot += max(k * dp_mb - t.zero3_overlap_scaled * busy_units, s * dp_mb)
        exposed = max(k * k * dp_step - t.dp_overlap_scaled * slot, t.dp_floor_scaled * k * dp_step)
    else:
        exposed = 0
    step = t.slots_scaled * slot + exposed + k * k * optimizer_step
    return step * TIME_UNIT_S / (k * k)
