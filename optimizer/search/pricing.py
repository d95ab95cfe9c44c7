"""One request's pricing: the layouts its searches share (the optimum, each explanation's
relaxed or restricted space) priced once by the cost model, each search's table a mask of
them.

A request declares the searches it will run up front (`Pricing(problem, assumptions,
searches)`). Their rows live in one frame: the request's degree tuples and, per knob, every
value some search allows. A search's rows are priced the first time it asks for its tables,
and only those no search before it priced (relaxing max_vpp prices only the extra chunks).
Each priced chunk is pruned of dominated rows within groups finer than any declared
search's own (degrees, ruled knobs, broken engine rules, and which declared searches hold
the row): a search's rows taken from them and pruned again within its own groups are then
exactly the table `build_tables` prices for it, row for row and in its order (a row that
another of its group beats is beaten by one that survived its finer group).

Only profiles whose terms are one table of whole layouts (standard) are shared this way:
a table over a few knobs (workshop's) is priced with the other knobs at a default value, so
another search's table is not a mask of it; those tables price in milliseconds. A search
not declared, or of another job (the node-size relaxation doubles the node, which changes
every row's links), is built whole by `build_tables`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from optimizer.costmodel import CostAssumptions
from optimizer.cpsat import CutShort, StopSignal, time_is_up
from optimizer.search.dominance import ruled_knobs, without_dominated
from optimizer.search.placements import PlacementClasses, placement_classes
from optimizer.search.problem import SearchProblem
from optimizer.search.tables import (
    COUPLED_KNOBS,
    NoLayouts,
    Tables,
    build_tables,
    concatenated,
    coupled_valid_rows,
    free_axes,
    priced_rows,
    row_chunks,
    rows_per_coupled_row,
    unpriced,
    whole_layouts,
    with_free_axes,
)
from optimizer.search.terms import PLACEMENT, Table, Term, in_memory_units, profile_terms


def one_table_axes(profile: str) -> tuple[str, ...] | None:
    """The axes of the profile's one table of whole layouts; None if its terms split."""
    axes = {term.axes for term in profile_terms(profile)}
    only = next(iter(axes))
    return only if len(axes) == 1 and whole_layouts(only) else None


@dataclass(frozen=True)
class InFrame:
    """Where a search's rows sit in the frame: per degree tuple and per knob value of the
    search, its position in the frame's (increasing: the orders agree)."""

    degrees: np.ndarray
    knobs: dict[str, np.ndarray]


def _positions(frame: list, values: list) -> np.ndarray | None:
    lookup = {value: i for i, value in enumerate(frame)}
    if any(value not in lookup for value in values):
        return None
    positions = np.asarray([lookup[value] for value in values], dtype=np.int64)
    return positions if np.all(np.diff(positions) > 0) else None


def in_frame(frame: SearchProblem, search: SearchProblem) -> InFrame | None:
    """The search's place in the frame; None when it does not fit in it (another job,
    profile, engine or placement list, or degrees the frame lacks)."""
    same = (search.job, search.profile, search.engine, search.placements)
    if same != (frame.job, frame.profile, frame.engine, frame.placements):
        return None
    rows = [tuple(row) for row in frame.degrees.tolist()]
    degrees = _positions(rows, [tuple(row) for row in search.degrees.tolist()])
    knobs = {k: _positions(list(frame.knobs[k]), list(v)) for k, v in search.knobs.items()}
    if degrees is None or any(positions is None for positions in knobs.values()):
        return None
    return InFrame(degrees, {k: v for k, v in knobs.items() if v is not None})


def _frame(problem: SearchProblem, searches: tuple[SearchProblem, ...]) -> SearchProblem:
    """The request's problem with, per knob, every value a search of its job allows (the
    request's first, in order; more after them: max_vpp's extra chunks)."""
    knobs = {knob: list(values) for knob, values in problem.knobs.items()}
    for search in searches:
        if search.job == problem.job:
            for knob, values in search.knobs.items():
                knobs[knob] += [value for value in values if value not in knobs[knob]]
    return replace(problem, knobs={knob: tuple(values) for knob, values in knobs.items()})


def _same_space(a: SearchProblem, b: SearchProblem) -> bool:
    """Whether two problems tabulate alike: the same rows, pruned within the same groups."""
    return (
        (a.job, a.profile, a.engine, a.placements) == (b.job, b.profile, b.engine, b.placements)
        and np.array_equal(a.degrees, b.degrees)
        and a.knobs == b.knobs
        and a.mfu_floor == b.mfu_floor
        and sorted(ruled_knobs(a)) == sorted(ruled_knobs(b))
    )


class Pricing:
    """The tables of one request's searches, their rows priced once (module docstring)."""

    def __init__(
        self,
        problem: SearchProblem,
        assumptions: CostAssumptions,
        searches: tuple[SearchProblem, ...] = (),
    ) -> None:
        self.assumptions = assumptions
        self.axes = one_table_axes(problem.profile)
        self.frame = _frame(problem, searches)
        placed = [(s, in_frame(self.frame, s)) for s in searches if self.axes is not None]
        self.searches = [search for search, where in placed if where is not None]
        self.where = [where for _, where in placed if where is not None]
        self.terms: tuple[Term, ...] = profile_terms(problem.profile)
        self.degree_bits, self.knob_bits = _membership_bits(self.frame, self.where)
        self.classes: PlacementClasses | None = None  # the frame's, once a search needs them
        self.parts: list[Table] = []  # priced rows in the frame's indices, pruned finely
        self.priced: list[int] = []  # the declared searches whose rows are all in `parts`

    def tables(
        self,
        problem: SearchProblem,
        deadline: float | None = None,
        stop: StopSignal | None = None,
    ) -> Tables:
        """The search's tables, as `build_tables` would price them (the same refusals:
        NoLayouts, CutShort past `deadline` or once `stop` is set, InvalidSpec)."""
        i = next((i for i, s in enumerate(self.searches) if _same_space(s, problem)), None)
        if i is None:
            return build_tables(problem, self.assumptions, deadline=deadline, stop=stop)
        classes = self._classes(i)
        # the search's own valid rows: its size checks and refusals come first, as built
        coupled = coupled_valid_rows(
            problem, classes, self._axes, True, lambda: time_is_up(deadline, stop)
        )
        if len(coupled[0]) == 0:
            raise NoLayouts()
        if i not in self.priced:
            self._price(i, classes, coupled, deadline, stop)
            self.priced.append(i)
        return self._derived(i, classes)

    @property
    def _axes(self) -> tuple[str, ...]:
        assert self.axes is not None  # only declared searches, of one-table profiles, get here
        return self.axes

    def _classes(self, i: int) -> PlacementClasses:
        """The search's placement classes: the frame's of its tuples (each tuple's own)."""
        if self.classes is None:  # not before: a search without tuples never gets here
            self.classes = placement_classes(self.frame)
        return PlacementClasses([self.classes.representative[k] for k in self.where[i].degrees])

    def _price(
        self,
        i: int,
        classes: PlacementClasses,
        coupled: tuple[np.ndarray, dict[str, np.ndarray]],
        deadline: float | None,
        stop: StopSignal | None,
    ) -> None:
        """Price the search's rows that no search before it priced, a chunk at a time."""
        search, (k, index), first = self.searches[i], coupled, len(self.parts)
        try:
            self._price_chunks(i, search, classes, k, index, deadline, stop)
        except CutShort:
            del self.parts[first:]  # priced again, whole, on the next call
            raise

    def _price_chunks(
        self,
        i: int,
        search: SearchProblem,
        classes: PlacementClasses,
        k: np.ndarray,
        index: dict[str, np.ndarray],
        deadline: float | None,
        stop: StopSignal | None,
    ) -> None:
        """Each chunk's rows not yet priced, priced and pruned within the finer groups."""
        for rows in row_chunks(rows_per_coupled_row(search, classes, self._axes, k)):
            if time_is_up(deadline, stop):
                raise CutShort()
            chunk = (k[rows], {axis: column[rows] for axis, column in index.items()})
            rows_k, rows_index = with_free_axes(search, classes, self._axes, *chunk)
            framed_k, framed_index = self._to_frame(i, rows_k, rows_index)
            new = ~self._held(self.priced, framed_k, framed_index)
            if not new.any():
                continue
            part = priced_rows(
                search,
                classes,
                self.terms,
                self._axes,
                rows_k[new],
                {axis: column[new] for axis, column in rows_index.items()},
                self.assumptions,
            )
            if len(part.degree_index):
                own_k, own_index = part.degree_index, part.axis_index
                framed_k, framed_index = self._to_frame(i, own_k, own_index)
                framed = replace(part, degree_index=framed_k, axis_index=framed_index)
                self.parts.append(
                    without_dominated(self.frame, framed, self.terms, self._finer_keys(framed))
                )

    def _to_frame(
        self, i: int, k: np.ndarray, index: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        where = self.where[i]
        framed = {
            axis: column if axis == PLACEMENT else where.knobs[axis][column]
            for axis, column in index.items()
        }
        return where.degrees[k], framed

    def _held_by(self, k: np.ndarray, index: dict[str, np.ndarray]) -> np.ndarray:
        """Per frame row, which declared searches hold it: bit i for the i-th."""
        held_by = self.degree_bits[k]
        for knob, bits in self.knob_bits.items():
            held_by = held_by & bits[index[knob]]
        return held_by

    def _in(self, i: int, k: np.ndarray, index: dict[str, np.ndarray]) -> np.ndarray:
        """Which frame rows the `i`-th declared search holds."""
        return (self._held_by(k, index) >> i) & 1 == 1

    def _held(self, searches: list[int], k: np.ndarray, index: dict[str, np.ndarray]):
        """Which frame rows any of `searches` holds."""
        mask = sum(1 << i for i in searches)
        return self._held_by(k, index) & mask != 0

    def _finer_keys(self, table: Table) -> list[np.ndarray]:
        """What keeps rows apart beyond the frame's groups: which declared searches hold
        each row (one bit each), and the value of every knob a search rules while searching
        more than one of its values (a knob fixed to one value splits nothing)."""
        held_by = self._held_by(table.degree_index, table.axis_index)
        ruled = {
            knob
            for search in self.searches
            for knob in ruled_knobs(search)
            if len(search.knobs[knob]) > 1
        }
        return [held_by, *(table.axis_index[knob] for knob in sorted(ruled))]

    def _derived(self, i: int, classes: PlacementClasses) -> Tables:
        """The search's table from the priced parts: its rows, in its own indices and in
        the order build_tables makes them, pruned within its own groups."""
        search, where = self.searches[i], self.where[i]
        kept = [part.take(self._in(i, part.degree_index, part.axis_index)) for part in self.parts]
        kept = [part for part in kept if len(part.degree_index)]
        if not kept:
            raise unpriced(self.assumptions)
        table = concatenated(self._axes, kept)
        own_k = _inverse(where.degrees, len(self.frame.degrees))[table.degree_index]
        own_index = {
            axis: column
            if axis == PLACEMENT
            else _inverse(where.knobs[axis], len(self.frame.knobs[axis]))[column]
            for axis, column in table.axis_index.items()
        }
        coupled = [axis for axis in self._axes if axis in COUPLED_KNOBS]
        made_in = [own_k, *(own_index[axis] for axis in (*coupled, *free_axes(self._axes)))]
        table = replace(table, degree_index=own_k, axis_index=own_index)
        table = table.take(np.lexsort(tuple(reversed(made_in))))
        scaled, unit = in_memory_units((without_dominated(search, table, self.terms),), self.terms)
        return Tables(search, classes, scaled, self.terms, unit)


def _membership_bits(
    frame: SearchProblem, where: list[InFrame]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per frame degree tuple and per frame knob value, which declared searches hold it (bit
    i for the i-th): a row's searches are then one AND over its columns."""
    assert len(where) < 63, "one bit per declared search in an int64"
    degree_bits = np.zeros(len(frame.degrees), dtype=np.int64)
    knob_bits = {
        knob: np.zeros(len(values), dtype=np.int64) for knob, values in frame.knobs.items()
    }
    for i, place in enumerate(where):
        degree_bits[place.degrees] |= 1 << i
        for knob, positions in place.knobs.items():
            knob_bits[knob][positions] |= 1 << i
    return degree_bits, knob_bits


def _inverse(positions: np.ndarray, size: int) -> np.ndarray:
    """Frame position -> the search's own index (-1 where the search has none)."""
    inverse = np.full(size, -1, dtype=np.int64)
    inverse[positions] = np.arange(positions.size)
    return inverse
