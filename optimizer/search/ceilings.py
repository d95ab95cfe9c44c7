"""MFU ceilings: for each degree tuple, knob values and placement class, an MFU none of its
layouts exceeds, whatever its ZeRO stage.

The figure is the cost model's `mfu_ceiling_box`: the model FLOPs over the step's floor
(breakdown.step_floor_s: every micro-batch slot of the busiest stage with its pipeline sends,
to which each ZeRO stage's step only adds the data-parallel sync and the optimiser step). It
is computed in boxes (the tuples times every knob value and placement class, the ZeRO axis at
one value, since the floor does not read it): a few hundred cells a tuple where its priced
rows are four times as many, each priced in full. A cell that is no layout (valid_knob_mask)
has no ceiling.

What uses them: optimizer/search/ceiling_search.py, which also orders the tuples by probes
(a few of each tuple's layouts priced in full), and build_tables, which leaves out the rows
of a problem whose ceiling falls below its `mfu_floor` before they are priced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from optimizer.costmodel import CostAssumptions, LayoutGrid, profile_named
from optimizer.search.boxes import layout_cells, tuple_boxes
from optimizer.search.placements import PlacementClasses
from optimizer.search.problem import KNOBS, SearchProblem, degree_columns
from optimizer.search.terms import PLACEMENT

# Cell ceilings rank_tuples keeps for the floor's rows, at most (float32: 16 MB). Rounding
# to float32 moves a ceiling by 6e-8 of itself, under ceiling_search.TIE_MARGIN's 1e-6.
KEPT_CELLS = 4_000_000
# A cell's axes after the degree tuple: every knob but the ZeRO stage, then the placement class
CELL_AXES = (*(knob for knob in KNOBS if knob != "zero"), PLACEMENT)


def has_ceilings(problem: SearchProblem) -> bool:
    return profile_named(problem.profile).mfu_ceiling_box is not None


def ceiling_cells(problem: SearchProblem, classes: PlacementClasses) -> int:
    """Box cells the ceilings of every tuple of `problem` take: what they cost, counted
    before any is computed."""
    knob_cells = int(np.prod([len(problem.knobs[knob]) for knob in KNOBS if knob != "zero"]))
    return len(problem.degrees) * knob_cells * classes.count


def cell_ceilings(
    problem: SearchProblem,
    classes: PlacementClasses,
    assumptions: CostAssumptions,
    tuples: np.ndarray,
) -> np.ndarray:
    """[tuple of `tuples`, then CELL_AXES (value indices into the problem's lists)]: the
    ceiling of those layouts."""
    blocks = _ceiling_blocks(problem, classes, assumptions, tuples)
    return np.concatenate([cells for _, cells in blocks])


def _cells_of(
    problem: SearchProblem,
    classes: PlacementClasses,
    assumptions: CostAssumptions,
    tuples: np.ndarray,
) -> np.ndarray:
    """cell_ceilings of `tuples` (sorted, unique), the problem's known ones when it has them."""
    known = problem.known_ceilings
    if known is not None and np.array_equal(known[0], problem.degrees):
        return known[1][tuples]
    return cell_ceilings(problem, classes, assumptions, tuples)


def row_ceilings(
    problem: SearchProblem,
    classes: PlacementClasses,
    assumptions: CostAssumptions,
    k: np.ndarray,
    index: dict[str, np.ndarray],
) -> np.ndarray:
    """The ceiling of each table row (degree tuple `k`, each knob's and the placement class's
    value index in `index`)."""
    tuples = np.unique(k)
    ceilings = _cells_of(problem, classes, assumptions, tuples)
    return ceilings[(np.searchsorted(tuples, k), *(index[axis] for axis in CELL_AXES))]


def floored_rows(
    problem: SearchProblem,
    classes: PlacementClasses,
    assumptions: CostAssumptions,
    k: np.ndarray,
    index: dict[str, np.ndarray],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The rows of a table of whole layouts that these coupled rows (tuple `k`, the coupled
    knobs' value indices) become, only those whose ceiling reaches the problem's
    `mfu_floor`, in tables.with_free_axes's order (each coupled row's ZeRO stages, recompute
    modes, then placement classes). Decided per coupled row, recompute mode and class, what a
    ceiling reads, before the ZeRO stages multiply them: the rows below the floor (most of a
    search's millions) are never made."""
    assert problem.mfu_floor is not None
    tuples = np.unique(k)
    cells = _cells_of(problem, classes, assumptions, tuples)
    vpp, micro_batch, schedule, ep = (
        index[knob] for knob in ("vpp", "micro_batch", "schedule", "ep")
    )
    # [row, recompute mode, class]: CELL_AXES with recompute and the class left whole
    at = cells[np.searchsorted(tuples, k), vpp, micro_batch, :, schedule, ep, :]
    reached = at >= problem.mfu_floor
    reached &= (np.arange(cells.shape[-1]) < classes.counts()[k][:, None])[:, None, :]
    zeros = len(problem.knobs["zero"])
    every = np.broadcast_to(reached[:, None], (len(k), zeros, *reached.shape[1:]))
    row, zero, recompute, placement = np.nonzero(every)
    rows = {axis: column[row] for axis, column in index.items()}
    return k[row], rows | {"zero": zero, "recompute": recompute, PLACEMENT: placement}


@dataclass(frozen=True)
class TupleRanking:
    """Per degree tuple: its ceiling, and the best MFU of its probes that fit in memory (-1
    where none does): a few layouts priced in full, those of highest ceiling at each recompute
    mode and ZeRO stage. The ceiling is a bound; the probes only order the search."""

    ceilings: np.ndarray
    probe_mfu: np.ndarray
    cells: np.ndarray | None  # every tuple's cell ceilings, kept when small (KEPT_CELLS)

    def order(self) -> np.ndarray:
        """Tuples most promising first: by probe, then by ceiling."""
        return np.lexsort((-self.ceilings, -self.probe_mfu))


def rank_tuples(
    problem: SearchProblem,
    classes: PlacementClasses,
    assumptions: CostAssumptions,
    cut_short: Callable[[], bool] = lambda: False,
    probed: bool = True,
) -> TupleRanking:
    """Every tuple's ceiling and (when `probed`; else -1) probes, each block of cells reduced
    as it comes, so memory stays that of one block."""
    tuples = np.arange(len(problem.degrees))
    keep = ceiling_cells(problem, classes) <= KEPT_CELLS
    ceilings, probes, kept = [], [], []
    for chosen, cells in _ceiling_blocks(problem, classes, assumptions, tuples, cut_short):
        ceilings.append(cells.reshape(len(cells), -1).max(axis=1))
        probes.append(
            _probe_mfu(problem, classes, assumptions, tuples[chosen], cells)
            if probed
            else np.full(len(cells), -1.0)
        )
        if keep:
            kept.append(cells.astype(np.float32))
    return TupleRanking(
        np.concatenate(ceilings), np.concatenate(probes), np.concatenate(kept) if keep else None
    )


def tuple_ceilings(
    problem: SearchProblem, classes: PlacementClasses, assumptions: CostAssumptions
) -> np.ndarray:
    """Per degree tuple of `problem`, an MFU none of its layouts exceeds."""
    tuples = np.arange(len(problem.degrees))
    blocks = _ceiling_blocks(problem, classes, assumptions, tuples)
    return np.concatenate([cells.reshape(len(cells), -1).max(axis=1) for _, cells in blocks])


def _ceiling_blocks(
    problem: SearchProblem,
    classes: PlacementClasses,
    assumptions: CostAssumptions,
    tuples: np.ndarray,
    cut_short: Callable[[], bool] = lambda: False,
) -> Iterator[tuple[slice, np.ndarray]]:
    """cell_ceilings a block of about BOX_CELLS cells at a time (the block's slice of
    `tuples`, its cells), `cut_short` asked between blocks (CutShort). A cell the cost model
    cannot price counts as unbounded, so nothing is left out on its account; a cell that is
    no layout has none (-inf)."""
    ceiling_box = profile_named(problem.profile).mfu_ceiling_box
    assert ceiling_box is not None
    knobs = {knob: tuple(problem.knobs[knob]) for knob in KNOBS}
    knobs["zero"] = knobs["zero"][:1]  # the ceiling reads no ZeRO stage
    zero_axis = 1 + KNOBS.index("zero")
    for chosen, box, _ in tuple_boxes(problem, classes, knobs, tuples, cut_short):
        with np.errstate(all="ignore"):  # combinations that are not layouts may overflow
            cells = np.broadcast_to(ceiling_box(problem.job, box, assumptions), box.shape)
        cells = np.where(np.isnan(cells), np.inf, cells)
        yield chosen, np.where(layout_cells(problem, box), cells, -np.inf).max(axis=zero_axis)


def _probe_mfu(
    problem: SearchProblem,
    classes: PlacementClasses,
    assumptions: CostAssumptions,
    tuples: np.ndarray,
    cells: np.ndarray,
) -> np.ndarray:
    """Per tuple, the best MFU that fits among its probes (-1: none fits): at each recompute
    mode, the layout cell of highest ceiling, priced at every ZeRO stage."""
    grid, row_tuple = _probe_grid(problem, classes, tuples, cells)
    with np.errstate(all="ignore"):
        prices = profile_named(problem.profile).price_grid(problem.job, grid, assumptions)
    fits = (prices.memory_bytes <= problem.memory_limit_bytes) & np.isfinite(prices.mfu)
    probe = np.full(len(tuples), -1.0)
    np.maximum.at(probe, row_tuple[fits], prices.mfu[fits])
    return probe


def _probe_grid(
    problem: SearchProblem, classes: PlacementClasses, tuples: np.ndarray, cells: np.ndarray
) -> tuple[LayoutGrid, np.ndarray]:
    """The probes as layouts, and each one's position in `tuples`."""
    recompute_axis = 1 + CELL_AXES.index("recompute")
    per_mode = np.moveaxis(cells, recompute_axis, 1)
    flat = per_mode.reshape(*per_mode.shape[:2], -1)
    best = flat.argmax(axis=2)  # [tuple, recompute mode]
    is_layout = np.take_along_axis(flat, best[..., None], axis=2)[..., 0] > -np.inf
    others = [axis for axis in CELL_AXES if axis != "recompute"]
    at = dict(zip(others, np.unravel_index(best, per_mode.shape[2:]), strict=True))
    at["recompute"] = np.broadcast_to(np.arange(per_mode.shape[1]), best.shape)
    zeros = len(problem.knobs["zero"])
    row_tuple = np.repeat(np.nonzero(is_layout)[0], zeros)
    columns = {
        knob: np.asarray(problem.knobs[knob])[np.repeat(at[knob][is_layout], zeros)]
        for knob in KNOBS
        if knob != "zero"
    }
    columns["zero"] = np.tile(np.asarray(problem.knobs["zero"]), int(is_layout.sum()))
    codes = classes.codes()[tuples[row_tuple]]
    placement = codes[np.arange(len(codes)), np.repeat(at[PLACEMENT][is_layout], zeros)]
    grid = LayoutGrid(
        **degree_columns(problem.degrees[tuples[row_tuple]]),
        # a padding class is its tuple's first (boxes.tuple_boxes)
        placement=np.where(placement >= 0, placement, codes[:, 0]),
        **columns,
    )
    return grid, row_tuple
