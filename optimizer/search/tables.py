"""The CP-SAT model's data: the cost model's terms (terms.py) tabulated per degree tuple and
knob values.

Each term (a memory part in bytes, or the logarithm of a utilisation factor) depends on the
degree tuple and a few knobs, declared per profile as data (`TERMS`). A term's table prices
exactly those combinations through `profile.price_grid`, so the solver's numbers come from
the one cost model. Terms with the same knobs share one table (one row literal per row).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from models.errors import InvalidSpec
from optimizer.costmodel import CostAssumptions, GridPrices, LayoutGrid, profile_named
from optimizer.cpsat import CutShort, StopSignal, time_is_up
from optimizer.search.boxes import axis_values, boxed_prices
from optimizer.search.ceilings import floored_rows
from optimizer.search.dominance import without_dominated
from optimizer.search.placements import PlacementClasses, placement_classes
from optimizer.search.problem import KNOBS, SearchProblem, degree_columns, valid_knob_mask
from optimizer.search.terms import (
    LN_MFU_SCALE,
    MAX_TERM,
    PLACEMENT,
    Table,
    Term,
    in_memory_units,
    profile_terms,
)

# Largest table priced for one request: about 12 s of numpy on the reference machine (2 cores),
# beyond the default time limit; memory is bounded by CHUNK_ROWS, not by this.
MAX_TABLE_ROWS = 10_000_000
# Largest product of degree tuples and coupled knob values whose validity is checked (a block
# at a time, ~2 s of numpy): the first bound a request meets, before anything is priced.
MAX_COUPLED_ROWS = 20_000_000


class NoLayouts(Exception):
    """The request's own rules, applied up front, leave no valid layout (e.g. vpp 4 with only
    zero-bubble allowed, which runs without interleaving): an infeasible search, not an error."""


def unpriced(assumptions: CostAssumptions) -> InvalidSpec:
    """No layout of the search got finite figures: blame the assumptions when the request
    changed them, else the model and cluster, whose sizes then overflow the arithmetic."""
    if assumptions != CostAssumptions():
        return InvalidSpec(
            "the cost model gives no finite MFU for any layout of this search under these "
            "assumptions (an efficiency near 0 overflows step times): check the assumptions",
            "assumptions",
        )
    return InvalidSpec(
        "the cost model gives no finite MFU for any layout of this search: the model's and "
        "cluster's sizes overflow its arithmetic; check the model (layers, widths, vocabulary) "
        "and the GPU's figures",
        "model",
    )


@dataclass(frozen=True)
class Tables:
    problem: SearchProblem
    classes: PlacementClasses
    tables: tuple[Table, ...]
    terms: tuple[Term, ...]
    # Memory terms are in units of this many bytes (rounded up): 1, exact, unless the sum of
    # every row's memory would overflow the solver's int64 arithmetic (memory in petabytes).
    memory_unit_bytes: int = 1


def _table_rows(
    problem: SearchProblem,
    classes: PlacementClasses,
    axes: tuple[str, ...],
    tuples: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every (degree tuple, axis values) combination, placement classes per tuple; of the
    `tuples` (indices into the problem's degrees) only, when given."""
    knob_axes = [axis for axis in axes if axis != PLACEMENT]
    chosen = np.arange(len(problem.degrees)) if tuples is None else tuples
    sizes = [len(chosen)] + [len(problem.knobs[axis]) for axis in knob_axes]
    rows = np.indices(sizes).reshape(len(sizes), -1)
    rows[0] = chosen[rows[0]]
    index = {}
    if PLACEMENT in axes:  # each row once per placement class of its tuple
        counts = classes.counts()[rows[0]]
        rows = rows[:, np.repeat(np.arange(rows.shape[1]), counts)]
        index[PLACEMENT] = np.arange(rows.shape[1]) - np.repeat(np.cumsum(counts) - counts, counts)
    index.update({axis: rows[i + 1] for i, axis in enumerate(knob_axes)})
    return rows[0], index


def table_grid(tables: Tables, table: Table) -> LayoutGrid:
    """The layouts of a table's rows (placement: each class's first)."""
    return _grid_for_rows(tables.problem, tables.classes, table.degree_index, table.axis_index)


def _grid_for_rows(
    problem: SearchProblem, classes: PlacementClasses, k: np.ndarray, index: dict[str, np.ndarray]
) -> LayoutGrid:
    """Layouts of the rows; knobs outside the table take a value valid for the tuple."""
    degrees = problem.degrees[k]
    columns = {}
    for knob in KNOBS:
        values = np.asarray(problem.knobs[knob], dtype=np.int64)
        columns[knob] = values[index[knob]] if knob in index else np.full(k.size, values[0])
    if "micro_batch" not in index:  # the first size that divides the batch for this dp
        batch = problem.job.training.global_batch
        sizes = np.asarray(problem.knobs["micro_batch"])
        ok = batch % (degrees[:, 3:4] * sizes[None, :]) == 0
        columns["micro_batch"] = sizes[np.argmax(ok, axis=1)]
    j = index.get(PLACEMENT, np.zeros(k.size, dtype=np.int64))
    return LayoutGrid(**degree_columns(degrees), placement=classes.codes()[k, j], **columns)


def valid_rows(
    problem: SearchProblem, classes: PlacementClasses, axes: tuple[str, ...], structure: bool = True
) -> tuple[LayoutGrid, np.ndarray, dict[str, np.ndarray]]:
    """The table's rows that are layouts (valid_knob_mask): their grid, degree-tuple index
    and axis indices."""
    k, index = coupled_valid_rows(problem, classes, axes, structure)
    k, index = with_free_axes(problem, classes, axes, k, index)
    return _grid_for_rows(problem, classes, k, index), k, index


# Knobs whose valid values depend on the degrees or on each other (valid_knob_mask).
COUPLED_KNOBS = ("vpp", "micro_batch", "schedule", "ep")


def coupled_valid_rows(
    problem: SearchProblem,
    classes: PlacementClasses,
    axes: tuple[str, ...],
    structure: bool,
    cut_short: Callable[[], bool] = lambda: False,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The valid combinations of each degree tuple with the table's coupled knobs. The rule
    sees nothing else, so it runs on these before the free axes multiply them (a 4M-row
    MoE table is ~9x fewer rows here). Built a block of tuples at a time, so memory stays
    near CHUNK_ROWS whatever the knob lists; the count of table rows so far is checked
    against MAX_TABLE_ROWS after each block, and the search refused as soon as it passes."""
    coupled = tuple(axis for axis in axes if axis in COUPLED_KNOBS)
    per_tuple = int(np.prod([len(problem.knobs[axis]) for axis in coupled], dtype=np.int64))
    _refuse_if_too_large(problem, axes, len(problem.degrees) * per_tuple, MAX_COUPLED_ROWS)
    block = max(1, CHUNK_ROWS // max(per_tuple, 1))
    parts: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    table_rows = 0
    for start in range(0, len(problem.degrees), block):
        if cut_short():
            raise CutShort()
        tuples = np.arange(start, min(start + block, len(problem.degrees)))
        k, index = _table_rows(problem, classes, coupled, tuples)
        grid = _grid_for_rows(problem, classes, k, index)
        valid = valid_knob_mask(
            problem.job,
            grid.pp,
            grid.dp,
            grid.vpp,
            grid.micro_batch,
            grid.cp,
            grid.schedule,
            grid.ep,
            structure=structure,
        )
        parts.append((k[valid], {axis: column[valid] for axis, column in index.items()}))
        table_rows += int(rows_per_coupled_row(problem, classes, axes, parts[-1][0]).sum())
        _refuse_if_too_large(problem, axes, table_rows, MAX_TABLE_ROWS)
    k = np.concatenate([part[0] for part in parts]) if parts else np.zeros(0, dtype=np.int64)
    index = {axis: np.concatenate([part[1][axis] for part in parts]) for axis in coupled}
    return k, index


def _free_axis_sizes(
    problem: SearchProblem, classes: PlacementClasses, axis: str, k: np.ndarray
) -> np.ndarray:
    """Per row, how many values a free axis has: the tuple's placement classes, or the knob's."""
    if axis == PLACEMENT:
        return classes.counts()[k]
    return np.full(k.size, len(problem.knobs[axis]), dtype=np.int64)


def free_axes(axes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(axis for axis in axes if axis not in COUPLED_KNOBS)


def with_free_axes(
    problem: SearchProblem,
    classes: PlacementClasses,
    axes: tuple[str, ...],
    k: np.ndarray,
    index: dict[str, np.ndarray],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each row once per value of every free axis."""
    for axis in free_axes(axes):
        counts = _free_axis_sizes(problem, classes, axis, k)
        repeat = np.repeat(np.arange(k.size), counts)
        position = np.arange(repeat.size) - np.repeat(np.cumsum(counts) - counts, counts)
        k, index = k[repeat], {name: column[repeat] for name, column in index.items()}
        index[axis] = position
    return k, index


def rows_per_coupled_row(
    problem: SearchProblem, classes: PlacementClasses, axes: tuple[str, ...], k: np.ndarray
) -> np.ndarray:
    """How many table rows each coupled row becomes once the free axes multiply it."""
    per_row = np.ones(k.size, dtype=np.int64)
    for axis in free_axes(axes):
        per_row *= _free_axis_sizes(problem, classes, axis, k)
    return per_row


def valid_table_rows(
    problem: SearchProblem, classes: PlacementClasses, axes: tuple[str, ...]
) -> int:
    """Rows a table over `axes` will hold: per degree tuple, the valid combinations of the
    coupled knobs (interleaving only under 1F1B, ep dividing dp x cp, ...) times the other
    knobs' values and the tuple's placement classes, counted without building the table."""
    k, _ = coupled_valid_rows(problem, classes, axes, structure=True)
    return int(rows_per_coupled_row(problem, classes, axes, k).sum())


def _refuse_if_too_large(
    problem: SearchProblem, axes: tuple[str, ...], rows: int, most: int = MAX_TABLE_ROWS
) -> None:
    """Refuse, with the numbers, a space too large to tabulate within a request's time."""
    if rows > most:
        knobs = ", ".join(f"{a} {len(problem.knobs[a])}" for a in axes if a != PLACEMENT)
        counted = "valid layouts" if most == MAX_TABLE_ROWS else "knob combinations"
        raise InvalidSpec(
            f"search space too large: {len(problem.degrees)} (tp, pp, cp, dp) tuples x "
            f"({knobs}) x placements = more than {most:,} {counted} to price; fix some "
            "degrees or narrow the knobs (max_vpp, zero_stages, recompute, micro_batches, "
            "schedules)",
            "search",
        )


def _scaled_terms(terms: tuple[Term, ...], axes: tuple[str, ...], prices: GridPrices) -> dict:
    """The table's terms as floats in the model's units (NaN where the cost model gives none)."""
    scaled = {}
    with np.errstate(all="ignore"):
        for term in terms:
            if term.axes == axes:
                scale = LN_MFU_SCALE if term.kind == "ln_mfu" else 1
                scaled[term.name] = scale * term.value(prices)
    return scaled


def build_tables(
    problem: SearchProblem,
    assumptions: CostAssumptions,
    structure: bool = True,
    deadline: float | None = None,
    stop: StopSignal | None = None,
) -> Tables:
    """Every term of every layout the problem allows, in integers. Rows the cost model does
    not price to finite figures (absurd assumptions overflow) are not layouts. `structure`
    False keeps rows that break the layer and batch rules: the model's own constraint
    families must then exclude them (tests).

    Rows are priced a chunk at a time, so a build's memory is bounded by CHUNK_ROWS whatever
    the search's size. When one table holds every term (each row a whole layout), each chunk
    keeps only its undominated rows (~1,000x fewer), and the survivors are pruned once more
    together: dominance never compares rows of different tuples, so this is exact. Past
    `deadline` (a time.perf_counter() value) or once `stop` is set, between chunks, it raises
    CutShort."""
    terms = profile_terms(problem.profile)
    classes = placement_classes(problem)
    all_axes = tuple(dict.fromkeys(term.axes for term in terms))

    def cut_short() -> bool:
        return time_is_up(deadline, stop)

    tables = []
    for axes in all_axes:
        k, index = coupled_valid_rows(problem, classes, axes, structure, cut_short)
        per_row = rows_per_coupled_row(problem, classes, axes, k)
        if len(k) == 0:
            raise NoLayouts()
        parts = []
        prune = len(all_axes) == 1
        for rows in row_chunks(per_row):
            if cut_short():
                raise CutShort()
            coupled = (k[rows], {axis: column[rows] for axis, column in index.items()})
            parts.append(_priced_part(problem, classes, terms, axes, coupled, assumptions, prune))
        if not any(len(part.degree_index) for part in parts):
            # under a floor, no row reaching it is no layout reaching it: not an error
            raise NoLayouts() if problem.mfu_floor is not None else unpriced(assumptions)
        table = concatenated(axes, parts)
        # a tuple split between chunks was pruned in pieces: once more over the survivors
        tables.append(without_dominated(problem, table, terms) if prune else table)
    if problem.engine is not None and not any(whole_layouts(axes) for axes in all_axes):
        tables.append(rules_table(problem, classes, structure))
    scaled, unit = in_memory_units(tuple(tables), terms)
    return Tables(problem, classes, scaled, terms, unit)


# Rows priced at once by build_tables (~150 MB of arrays under profile standard).
CHUNK_ROWS = 250_000


def row_chunks(per_row: np.ndarray) -> list[np.ndarray]:
    """Consecutive coupled rows in chunks that expand to about CHUNK_ROWS table rows each
    (one coupled row expands to at most a few hundred)."""
    if per_row.size == 0:
        return []
    expanded_before = np.r_[0, np.cumsum(per_row)[:-1]]
    chunk = expanded_before // CHUNK_ROWS
    starts = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1]])
    return np.split(np.arange(per_row.size), starts[1:])


def _priced_part(
    problem: SearchProblem,
    classes: PlacementClasses,
    terms: tuple[Term, ...],
    axes: tuple[str, ...],
    coupled: tuple[np.ndarray, dict[str, np.ndarray]],
    assumptions: CostAssumptions,
    prune: bool,
) -> Table:
    """One chunk of a table: its rows expanded by the free axes (under a floor, those whose
    ceiling reaches it), priced, the unpriced and (when `prune`) the dominated ones dropped."""
    if problem.mfu_floor is not None and whole_layouts(axes):
        k, index = floored_rows(problem, classes, assumptions, *coupled)
    else:
        k, index = with_free_axes(problem, classes, axes, *coupled)
    if k.size == 0:  # none kept: one row priced for the table's columns, then dropped
        first = (coupled[0][:1], {axis: column[:1] for axis, column in coupled[1].items()})
        k, index = with_free_axes(problem, classes, axes, *first)
        one = (k[:1], {axis: column[:1] for axis, column in index.items()})
        part = priced_rows(problem, classes, terms, axes, *one, assumptions)
        return part.take(np.zeros(len(part.degree_index), dtype=bool))
    part = priced_rows(problem, classes, terms, axes, k, index, assumptions)
    return without_dominated(problem, part, terms) if prune and len(part.degree_index) else part


def priced_rows(
    problem: SearchProblem,
    classes: PlacementClasses,
    terms: tuple[Term, ...],
    axes: tuple[str, ...],
    k: np.ndarray,
    index: dict[str, np.ndarray],
    assumptions: CostAssumptions,
) -> Table:
    """The table's rows (degree tuple `k`, axis indices `index`) priced by the cost model,
    the rows it gives no finite figures dropped. The one place rows are priced."""
    grid = _grid_for_rows(problem, classes, k, index)
    profile = profile_named(problem.profile)
    if profile.price_box is not None and whole_layouts(axes):
        prices = boxed_prices(profile, problem, classes, k, index, assumptions, grid)
    else:
        prices = profile.price_grid(problem.job, grid, assumptions)
    scaled = _scaled_terms(terms, axes, prices)
    for term in terms:
        if term.kind == "memory_bytes" and term.name in scaled:
            scaled[term.name] = np.minimum(scaled[term.name], MAX_TERM)  # NaN stays NaN
    priced = np.all([np.abs(v) <= MAX_TERM for v in scaled.values()], axis=0)
    values = {name: np.rint(v).astype(np.int64) for name, v in scaled.items()}
    breaks = problem.engine_breaks(grid) if whole_layouts(axes) else {}
    return Table(axes, k, index, values, breaks).take(priced)


def whole_layouts(axes: tuple[str, ...]) -> bool:
    """Whether a table over `axes` has one row per layout (up to placement), so that an
    engine's rules, which may read any knob, can be checked on its rows."""
    return set(KNOBS) <= set(axes)


def rules_table(problem: SearchProblem, classes: PlacementClasses, structure: bool) -> Table:
    """For profiles whose terms split over smaller tables: one table of whole layouts
    (every knob, no terms) that carries which rows break the engine's rules."""
    grid, k, index = valid_rows(problem, classes, KNOBS, structure)
    return Table(KNOBS, k, index, {}, problem.engine_breaks(grid))


def concatenated(axes: tuple[str, ...], parts: list[Table]) -> Table:
    def joined(column: str) -> dict[str, np.ndarray]:
        first = getattr(parts[0], column)
        return {n: np.concatenate([getattr(part, column)[n] for part in parts]) for n in first}

    return Table(
        axes,
        np.concatenate([part.degree_index for part in parts]),
        joined("axis_index"),
        joined("values"),
        joined("breaks"),
    )


def axis_size(tables: Tables, axis: str) -> int:
    return axis_values(tables.problem, tables.classes, axis)
