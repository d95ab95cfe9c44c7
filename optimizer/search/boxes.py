"""Rows of whole layouts priced through boxes: the rows' degree tuples times every value of
every knob and placement class, priced by the profile's `price_box` (each formula over the
axes it reads), then read back at the rows. The same functions as `price_grid`, so the same
figures, bit for bit (tests/test_pricing_boxes.py holds them equal); several times faster,
since most of a layout's cost (a layer's compute and collectives, the data-parallel sync,
the schedule's bubble) depends on a few of its choices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from optimizer.costmodel import (
    BOX_KNOBS,
    CostAssumptions,
    GridPrices,
    LayoutBox,
    LayoutGrid,
    Profile,
)
from optimizer.cpsat import CutShort
from optimizer.search.placements import PlacementClasses
from optimizer.search.problem import ENGINE_RULE_PREFIX, KNOBS, SearchProblem, valid_knob_mask
from optimizer.search.terms import PLACEMENT

# Cells of one box (every combination, valid or not): the largest arrays a box pricing
# holds are this many float64s, 8 MB each.
BOX_CELLS = 1_000_000
# Beyond this many box cells a row, rows are priced one by one. A bound on a box's waste,
# not a measured crossover: on the plate a box of 5 cells a row prices 6x faster than its
# rows; a search over 16 micro-batch sizes has parts of up to 29 (3 of its 75 go by rows).
MAX_CELLS_PER_ROW = 16

assert BOX_KNOBS == KNOBS, "a box's axes are the search's knobs, in its order"

PRICE_FIELDS = (
    "weights_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "runtime_bytes",
    "bubble",
    "mfu",
)


def layout_cells(problem: SearchProblem, box: LayoutBox) -> np.ndarray:
    """Which cells of the box are layouts (valid_knob_mask), broadcastable to its shape."""
    pp, dp, cp = (box.degree(dim) for dim in ("pp", "dp", "cp"))
    knobs = [box.knob(knob) for knob in ("vpp", "micro_batch", "schedule", "ep")]
    # the mask takes its shape from its first four: give pp the others' axes as well
    pp = np.broadcast_to(pp, np.broadcast_shapes(pp.shape, cp.shape, *(k.shape for k in knobs)))
    vpp, micro_batch, schedule, ep = knobs
    return valid_knob_mask(problem.job, pp, dp, vpp, micro_batch, cp, schedule, ep)


def tuple_boxes(
    problem: SearchProblem,
    classes: PlacementClasses,
    knobs: dict[str, tuple[int, ...]],
    tuples: np.ndarray,
    cut_short: Callable[[], bool] = lambda: False,
) -> Iterator[tuple[slice, LayoutBox, np.ndarray]]:
    """Boxes of `tuples` (indices into the problem's degrees) times `knobs`' values and each
    tuple's placement classes, about BOX_CELLS cells each: the block's slice of `tuples`, its
    box, and [tuple, class] which classes are the tuple's own (past its last, the box repeats
    its first, a placement of it); `cut_short` is asked between boxes (CutShort)."""
    codes = classes.codes()[tuples]
    held = codes >= 0
    padded = np.where(held, codes, codes[:, :1])
    per_tuple = int(np.prod([len(values) for values in knobs.values()])) * codes.shape[1]
    block = max(1, BOX_CELLS // max(per_tuple, 1))
    for start in range(0, len(tuples), block):
        if cut_short():
            raise CutShort()
        chosen = slice(start, start + block)
        box = LayoutBox(problem.degrees[tuples[chosen]], knobs, padded[chosen])
        yield chosen, box, held[chosen]


def engine_rules_broken(problem: SearchProblem, classes: PlacementClasses) -> frozenset[str]:
    """The engine's rules (search names) some layout of the problem breaks, whether or not a
    table holds it: each rule tested on boxes of the tuples, every knob value and placement
    class, so its test broadcasts over only the axes it reads (a rule of pp and vpp costs a
    few thousand cells where the layouts are millions)."""
    if problem.engine is None or len(problem.degrees) == 0:
        return frozenset()
    knobs = {knob: tuple(problem.knobs[knob]) for knob in KNOBS}
    tuples = np.arange(len(problem.degrees))
    broken: set[str] = set()
    for _, box, held in tuple_boxes(problem, classes, knobs, tuples):
        grid, layouts = box.grid(), layout_cells(problem, box)
        classes_held = np.expand_dims(held, tuple(range(1, 1 + len(KNOBS))))
        for rule in problem.engine.rules:
            name = ENGINE_RULE_PREFIX + rule.name
            if name in broken:
                continue
            breaks = np.logical_not(rule.check(problem.job, grid))
            if np.ndim(breaks) == len(box.shape) and np.shape(breaks)[-1] > 1:
                breaks = breaks & classes_held  # it reads the placement: real classes only
            if np.logical_and(breaks, layouts).any():
                broken.add(name)
    return frozenset(broken)


def axis_values(problem: SearchProblem, classes: PlacementClasses, axis: str) -> int:
    """Values an axis of the tables has: a knob's, or the most placement classes of a tuple."""
    return classes.count if axis == PLACEMENT else len(problem.knobs[axis])


@dataclass(frozen=True)
class Rows:
    """Table rows to price: degree tuple `k`, each knob's and the placement class's value
    index in `index`, all into `problem`'s lists and `classes`."""

    problem: SearchProblem
    classes: PlacementClasses
    k: np.ndarray
    index: dict[str, np.ndarray]

    def part(self, rows: np.ndarray) -> Rows:
        return Rows(
            self.problem, self.classes, self.k[rows], {n: c[rows] for n, c in self.index.items()}
        )

    @property
    def axis_sizes(self) -> dict[str, int]:
        """Values each axis of the problem has (placement: the most classes of a tuple)."""
        return {name: axis_values(self.problem, self.classes, name) for name in (*KNOBS, PLACEMENT)}

    @property
    def cells(self) -> int:
        """Cells of the boxes over these rows: their tuples times the values each axis takes."""
        cells = _present(self.k, len(self.problem.degrees)).size
        for name, size in self.axis_sizes.items():
            cells *= _present(self.index[name], size).size
        return cells


def boxed_prices(
    profile: Profile,
    problem: SearchProblem,
    classes: PlacementClasses,
    k: np.ndarray,
    index: dict[str, np.ndarray],
    assumptions: CostAssumptions,
    grid: LayoutGrid,
) -> GridPrices:
    """The figures of the rows (degree tuple `k`, each knob's and the placement class's
    value index in `index`; `grid`, the same rows as layouts): the rows of each schedule in
    boxes of their own, since only 1F1B interleaves (one box over every vpp and schedule
    would be 2.4x larger, its extra cells no layout). Rows whose box would hold more than
    MAX_CELLS_PER_ROW cells a row (many micro-batch sizes, of which each tuple's dp admits a
    few) are priced row by row, as `price_grid` prices them: a box would then be slower and
    larger than the rows."""
    out = {name: np.empty(k.size) for name in PRICE_FIELDS}
    every = Rows(problem, classes, k, index)
    schedule = index["schedule"]
    for rows in np.split(np.argsort(schedule, kind="stable"), _starts(schedule)):
        part = every.part(rows)
        if part.cells > MAX_CELLS_PER_ROW * rows.size:
            prices = profile.price_grid(problem.job, grid.take(rows), assumptions)
        else:
            prices = _boxes(profile, part, assumptions)
        for name in PRICE_FIELDS:
            out[name][rows] = getattr(prices, name)
    return GridPrices(**out)


def _boxes(profile: Profile, rows: Rows, assumptions: CostAssumptions) -> GridPrices:
    """The rows priced a block of tuples at a time over the values the rows take (a
    relaxation's extra rows price only their own knob values)."""
    assert profile.price_box is not None
    problem, k, index, sizes = rows.problem, rows.k, rows.index, rows.axis_sizes
    present = {name: _present(index[name], size) for name, size in sizes.items()}
    at = [_positions(present[name], size)[index[name]] for name, size in sizes.items()]
    tuples = _present(k, len(problem.degrees))
    row_tuple = _positions(tuples, len(problem.degrees))[k]
    knobs = {n: tuple(np.asarray(problem.knobs[n])[present[n]].tolist()) for n in KNOBS}
    # placement classes by position; past a tuple's last class, padding priced as code 0
    codes = np.maximum(rows.classes.codes()[tuples][:, present[PLACEMENT]], 0)
    cells_per_tuple = int(np.prod([len(values) for values in present.values()]))
    block = max(1, BOX_CELLS // cells_per_tuple)
    out = {name: np.empty(k.size) for name in PRICE_FIELDS}
    row_block = row_tuple // block
    for chunk in np.split(np.argsort(row_block, kind="stable"), _starts(row_block)):
        first = int(row_tuple[chunk[0]]) // block * block
        chosen = slice(first, first + block)
        box = LayoutBox(problem.degrees[tuples[chosen]], knobs, codes[chosen])
        with np.errstate(all="ignore"):  # combinations that are not layouts may overflow
            prices = profile.price_box(problem.job, box, assumptions)
        where = (row_tuple[chunk] - first, *(column[chunk] for column in at))
        for name in PRICE_FIELDS:
            out[name][chunk] = _read(np.asarray(getattr(prices, name)), box.shape, where)
    return GridPrices(**out)


def _read(values: np.ndarray, shape: tuple[int, ...], where: tuple[np.ndarray, ...]) -> np.ndarray:
    """`values` (broadcastable to `shape`) at the cells `where`, indexing only the axes it
    varies along (no full-size copy of a term that depends on two choices)."""
    values = values.reshape((1,) * (len(shape) - values.ndim) + values.shape)
    axes = [axis for axis, size in enumerate(values.shape) if size > 1]
    if not axes:
        return np.full(where[0].size, values.reshape(-1)[0])
    dims = tuple(values.shape[axis] for axis in axes)
    flat = np.ravel_multi_index(tuple(where[axis] for axis in axes), dims)
    return values.reshape(-1).take(flat)


def _present(values: np.ndarray, size: int) -> np.ndarray:
    """The distinct values of an index column into range(size), in increasing order."""
    return np.flatnonzero(np.bincount(values, minlength=size))


def _positions(present: np.ndarray, size: int) -> np.ndarray:
    """Lookup from a value of range(size) to its position among `present`."""
    positions = np.full(size, -1, dtype=np.int64)
    positions[present] = np.arange(present.size)
    return positions


def _starts(row_block: np.ndarray) -> np.ndarray:
    """Where each block's rows begin in the rows sorted by block (non-negative ids)."""
    counts = np.bincount(row_block)
    return np.cumsum(counts[counts > 0])[:-1]
