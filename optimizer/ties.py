"""Layouts tied with the optimum: those the cost model cannot tell from it, and the mechanism
their difference rests on.

Under its interval (optimizer.uncertainty) the optimum is tied with every layout whose MFU is
within the interval's width of it: both lie in one regime, so their intervals overlap (the
model's misses there are as large as their gap). What a tied layout is charged differently
for, the effect of the MFU waterfall whose charge differs most (`deciding_mechanism`), is
what a measured run would have to settle.

`optimize` lists the best few tied layouts (`tied_layouts`). The whole tied set may be
hundreds of layouts, and pricing the whole space for them costs several times the search,
so only the degree tuples whose MFU ceiling reaches a floor just under the optimum are
priced (the ceiling search's own pruning, optimizer.search.reaching_problem), the floor
lowered step by step (`FLOOR_STEPS`) until MAX_TIED layouts are found or it reaches the
interval's width; a floored space over MAX_TIED_ROWS layouts is not priced (said so).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np

from models.layout import Layout
from optimizer.costmodel import CostAssumptions, Estimate, evaluate
from optimizer.cpsat import CutShort
from optimizer.search import SearchProblem, enumerator, narrow_to_rules, reaching_problem

MAX_TIED = 5
# How far under the optimum the floor goes at each step, in MFU points (fractions): the
# best tied layouts lie within a point of the optimum in the presets' searches; the last
# step is the interval's width, whatever these say.
FLOOR_STEPS = (0.005, 0.02, 0.05)
# Layouts one step may price (~0.1 s under profile standard on the reference machine).
MAX_TIED_ROWS = 150_000


@dataclass(frozen=True)
class TiedLayout:
    estimate: Estimate
    mechanism: str  # the effect whose charge differs most from the optimum's
    why: str


@dataclass(frozen=True)
class Ties:
    """The best tied layouts, best first, and what was searched for them."""

    layouts: tuple[TiedLayout, ...]
    width: float  # the optimum's MFU interval width: tied within it
    note: str  # how far the search for them went, or why it did not


def charges(estimate: Estimate) -> dict[str, float]:
    """What each effect of the MFU waterfall costs the layout, in utilisation."""
    return {after.name: before.mfu - after.mfu for before, after in pairwise(estimate.mfu_steps)}


def deciding_mechanism(optimum: Estimate, other: Estimate) -> tuple[str, float, float]:
    """The effect whose charge differs most between the two layouts, with both charges."""
    ours, theirs = charges(optimum), charges(other)
    name = max(ours.keys() & theirs.keys(), key=lambda n: abs(ours[n] - theirs[n]))
    return name.removeprefix("after "), ours[name], theirs[name]


def tied_width(optimum: Estimate) -> float:
    """How far behind the optimum a layout may price and still be tied with it: its MFU
    interval's width (both share the regime's misses)."""
    if optimum.interval is None:
        return 0.0
    low, high = optimum.interval.mfu
    return high - low


def tie_words(behind: float, width: float, mechanism: str, ours: float, theirs: float) -> str:
    return (
        f"priced {100 * behind:.1f} points behind the optimum, inside its interval's "
        f"{100 * width:.1f}-point width: tied. They differ most in {mechanism} "
        f"({100 * theirs:.1f} points charged here, {100 * ours:.1f} there)"
    )


def unplaced(layout: Layout) -> Layout:
    return layout.model_copy(update={"placement": None})


def tied_layouts(
    problem: SearchProblem,
    costs: CostAssumptions,
    optimum: Estimate,
    deadline: float,
) -> Ties:
    """Up to MAX_TIED layouts tied with `optimum`, best first, one per layout up to its
    placement (its best), each priced, with the mechanism it differs from the optimum in.
    `deadline` (a time.perf_counter() value) cuts the search short."""
    width = tied_width(optimum)
    if optimum.interval is None:
        return Ties((), 0.0, "no interval, so no layout is tied with the optimum")
    try:
        widest = reaching_problem(
            narrow_to_rules(problem),
            costs,
            optimum.mfu - width,
            lambda: time.perf_counter() > deadline,
        )
    except CutShort:
        return Ties((), width, "not worked out: the time limit ran out first")
    ceilings = _tuple_ceilings(widest)
    found: list[Layout] = []
    reached, stopped = 0.0, None
    for step in sorted({min(s, width) for s in FLOOR_STEPS} | {width}):
        reaching = (
            np.ones(len(widest.degrees), bool)
            if ceilings is None
            else ceilings >= optimum.mfu - step
        )
        floored = replace(widest, degrees=widest.degrees[reaching], known_ceilings=None)
        size = math.prod(enumerator.grid_axes(floored)) if len(floored.degrees) else 0
        if size > MAX_TIED_ROWS:
            stopped = (
                f"a floor {100 * step:.1f} points under it spans {size:,} layouts, over the "
                f"{MAX_TIED_ROWS:,} priced for ties"
            )
            break
        if time.perf_counter() > deadline:
            stopped = "the time limit ran out"
            break
        found = _best_rows(floored, costs, optimum, optimum.mfu - step) if size else []
        reached = step
        if len(found) >= MAX_TIED:
            break
    tied = []
    for layout in found:
        other = evaluate(problem.job, layout, problem.profile, costs)
        mechanism, ours, theirs = deciding_mechanism(optimum, other)
        why = tie_words(optimum.mfu - other.mfu, width, mechanism, ours, theirs)
        tied.append(TiedLayout(other, mechanism, why))
    return Ties(tuple(tied), width, _note(len(tied), reached, width, stopped))


def _tuple_ceilings(problem: SearchProblem) -> np.ndarray | None:
    """Each degree tuple's MFU ceiling, where the floored problem kept its cells."""
    if problem.known_ceilings is None:
        return None
    degrees, cells = problem.known_ceilings
    return np.asarray(cells).reshape(len(degrees), -1).max(axis=1)


def _best_rows(
    problem: SearchProblem, costs: CostAssumptions, optimum: Estimate, floor: float
) -> list[Layout]:
    """The layouts of `problem` priced at `floor` or more, best first, the optimum left out."""
    space = enumerator.price_space(problem, costs)
    keep = enumerator.feasible(problem, space, frozenset()) & (space.mfu >= floor)
    rows = enumerator.tie_break_order(space, np.flatnonzero(keep))
    seen = {unplaced(optimum.layout)}
    best = []
    for row in rows:
        layout = space.grid.layout(int(row))
        if (key := unplaced(layout)) not in seen:
            seen.add(key)
            best.append(layout)
            if len(best) >= MAX_TIED:
                break
    return best


def _note(shown: int, reached: float, width: float, stopped: str | None) -> str:
    """How far the search for tied layouts went."""
    tied = f"within {100 * width:.1f} points of it (its MFU interval's width)"
    if shown >= MAX_TIED:
        more = "" if reached >= width else f", found within {100 * reached:.1f} points"
        return f"the {shown} best layouts {tied}{more}"
    if reached >= width:
        return f"all {shown} layouts {tied}"
    if reached == 0:
        return f"layouts {tied} are not listed: {stopped}"
    return (
        f"{shown} layouts {tied}, from a search within {100 * reached:.1f} points "
        f"(not further: {stopped})"
    )
