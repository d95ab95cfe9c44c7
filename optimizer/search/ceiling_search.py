"""The optimum without pricing every layout: the most promising degree tuples first, then
only the layouts whose MFU ceiling (optimizer/search/ceilings.py) reaches what they gave.

1. Every tuple's ceiling and probes (ceilings.rank_tuples); the FIRST_TUPLES of best probe
   are priced and solved as the search over them alone: their optimum's MFU is the incumbent.
2. The other tuples whose ceiling reaches the incumbent are solved with `mfu_floor` at it
   (less TIE_MARGIN): their tables hold only the rows whose ceiling reaches it. On the plate's
   case under Megatron-LM's rules: 4 tuples first (1,824 rows; an incumbent of 0.4278
   against the optimum's 0.4321), then 71 of the other 279, of whose 81,048 rows 10,880 are
   priced: 12,704 rows of the 284,544 the whole space prices.
3. The better optimum of the two is the answer; when they are as good as each other, both
   sets are solved together, so the solver's own tie-break (least memory, then its order)
   decides as it would over the whole space.

A row left out has a ceiling, so an MFU, below a layout that keeps every rule: the answer is
the optimum of the whole space, proved by the solver over the rows it holds and by the
ceilings over the rest. When the first tuples hold no layout, the optimum is the others'.
An answer cut short by the time limit claims no more than was proved: its bound is raised to
what the tuples it did not solve could reach (their highest ceiling, or the other solve's
bound).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.cpsat import Budget, CutShort
from optimizer.search.ceilings import TupleRanking, ceiling_cells, has_ceilings, rank_tuples
from optimizer.search.placements import placement_classes
from optimizer.search.problem import SearchProblem
from optimizer.search.solve import Found, SolveSettings, best_layout
from optimizer.search.terms import LN_MFU_SCALE

# Tuples priced and solved first, those of best probe (ceilings.TupleRanking): the probes'
# best tuples hold the optimum or one near it in the cases of bench/solver.py, and the rest
# is priced only above its MFU. Measured on seven of those cases (405B on 16,384 to 98,304,
# 70B, 8B, DeepSeek-V3-shaped, Mixtral): 1, 2, 4, 8, 12, 16, 24 first tuples took 807, 765,
# 759, 804, 844, 895, 976 ms in all, the plate's case 85, 77, 78, 79, 79, 80, 84 ms.
FIRST_TUPLES = 4
# Ceilings are computed first only while they cost this many box cells at most (every
# tuple's knob values and placement classes, the ZeRO axis apart; 0.03-0.06 us a cell on the
# reference machine, about a second at the cap); a larger search is priced whole, under the
# tables' own size guard, as it was before ceilings.
MAX_CEILING_CELLS = 20_000_000
# What an explanation's wide model may spend on ceilings: its tables are refused outright
# above the size guard when priced whole, so ceilings that might floor them under it are worth
# more time there; the explanation's deadline still cuts them short (CutShort).
MAX_EXPLAIN_CEILING_CELLS = 10 * MAX_CEILING_CELLS
# A row is left out only when its ceiling is below the incumbent by more than this share: the
# solver compares ln(MFU) rounded to 1e-8 (terms.LN_MFU_SCALE) and the ceilings are the cost
# model's floats, so a row that might tie is kept.
TIE_MARGIN = 1e-6


def tie_floor(mfu: float) -> float:
    """The floor that keeps every row that might tie with or beat a layout of this MFU."""
    return mfu * (1 - TIE_MARGIN)


def best_layout_by_ceilings(
    problem: SearchProblem, assumptions: CostAssumptions, settings: SolveSettings
) -> Found:
    """`best_layout(problem)`: the same layout and proof (module docstring)."""
    if not has_ceilings(problem) or len(problem.degrees) <= FIRST_TUPLES:
        return best_layout(problem, assumptions, settings)
    classes = placement_classes(problem)
    if ceiling_cells(problem, classes) > MAX_CEILING_CELLS:
        return best_layout(problem, assumptions, settings)  # priced whole, under its guards
    budget = settings.budget()
    try:
        ranking = rank_tuples(problem, classes, assumptions, lambda: budget.expired)
    except CutShort:
        return Found(None, False, 0)
    ceilings = ranking.ceilings
    first = np.sort(ranking.order()[:FIRST_TUPLES])
    others = np.setdiff1d(np.arange(len(ceilings)), first)
    found = best_layout(_with_tuples(problem, first), assumptions, settings.within(budget))
    if not found.proved:
        return _with_bound_over(found, ceilings[others])
    if found.layout is None:  # none in the first tuples: the optimum is the others'
        other = best_layout(_with_tuples(problem, others), assumptions, settings.within(budget))
        return replace(other, solves=other.solves + found.solves)
    incumbent = _mfu(problem, assumptions, found)
    floor = tie_floor(incumbent)
    rest = others[ceilings[others] >= floor]
    if rest.size == 0:
        return found
    other = _best_above_floor(problem, ranking, rest, floor, assumptions, settings.within(budget))
    return _better(problem, assumptions, settings, budget, (found, incumbent), other, first, rest)


def best_layout_above(
    problem: SearchProblem, assumptions: CostAssumptions, settings: SolveSettings, floor: float
) -> Found:
    """The best layout of `problem` if its MFU reaches `floor`: only the tuples and rows whose
    ceiling reaches it are priced. None back, proved, means no layout reaches it (what an
    explanation asks of a widened space: does anything there beat the optimum?)."""
    if not has_ceilings(problem):
        return best_layout(problem, assumptions, settings)
    budget = settings.budget()
    try:
        floored = reaching_problem(
            problem, assumptions, floor, lambda: budget.expired, MAX_EXPLAIN_CEILING_CELLS
        )
    except CutShort:
        return Found(None, False, 0)
    if len(floored.degrees) == 0:
        return Found(None, True, 0)
    return best_layout(floored, assumptions, settings.within(budget))


def reaching_problem(
    problem: SearchProblem,
    assumptions: CostAssumptions,
    floor: float,
    cut_short: Callable[[], bool],
    max_cells: int = MAX_CEILING_CELLS,
) -> SearchProblem:
    """`problem` floored at `floor`, over only the degree tuples whose MFU ceiling reaches it
    (their cell ceilings passed on), so that what a table build counts against its size
    guard is what it will price; floored whole (its rows floored as they are priced) where
    ceilings are not to be had or would cost more than `max_cells`. What an explanation's wide
    model and a widened space's search need: every row they can use beats the optimum."""
    floored = replace(problem, mfu_floor=floor)
    if not has_ceilings(problem):
        return floored
    classes = placement_classes(problem)
    if ceiling_cells(problem, classes) > max_cells:
        return floored
    ranking = rank_tuples(problem, classes, assumptions, cut_short, probed=False)
    return _problem_above_floor(problem, ranking, np.flatnonzero(ranking.ceilings >= floor), floor)


def _problem_above_floor(
    problem: SearchProblem, ranking: TupleRanking, tuples: np.ndarray, floor: float
) -> SearchProblem:
    floored = replace(_with_tuples(problem, tuples), mfu_floor=floor)
    if ranking.cells is not None:
        floored = replace(floored, known_ceilings=(floored.degrees, ranking.cells[tuples]))
    return floored


def _best_above_floor(
    problem: SearchProblem,
    ranking: TupleRanking,
    tuples: np.ndarray,
    floor: float,
    assumptions: CostAssumptions,
    settings: SolveSettings,
) -> Found:
    """The best layout of `tuples` whose ceiling reaches `floor` (their cell ceilings passed
    on when the ranking kept them)."""
    if tuples.size == 0:
        return Found(None, True, 0)
    return best_layout(_problem_above_floor(problem, ranking, tuples, floor), assumptions, settings)


def _better(
    problem: SearchProblem,
    assumptions: CostAssumptions,
    settings: SolveSettings,
    budget: Budget,
    first_optimum: tuple[Found, float],
    other: Found,
    first: np.ndarray,
    rest: np.ndarray,
) -> Found:
    """The better of the first tuples' optimum (with its MFU) and the rest's (those reaching
    the floor)."""
    found, incumbent = first_optimum
    solves = found.solves + other.solves
    if other.layout is None and other.proved:
        return replace(found, solves=solves)
    if not other.proved:  # the rest cut short: the better layout, the rest's bound raised
        bound = other.bound_ln_mfu
        if bound is not None:
            bound = max(bound, round(LN_MFU_SCALE * math.log(incumbent)))
        ahead = other.layout is not None and _mfu(problem, assumptions, other) > incumbent
        return replace(other if ahead else found, proved=False, solves=solves, bound_ln_mfu=bound)
    mfu = _mfu(problem, assumptions, other)
    if abs(mfu - incumbent) > TIE_MARGIN * incumbent:
        return replace(other if mfu > incumbent else found, solves=solves)
    # as good as each other: the solver's tie-break over both sets, above the floor
    floor = tie_floor(incumbent)
    both = replace(_with_tuples(problem, np.union1d(first, rest)), mfu_floor=floor)
    again = best_layout(both, assumptions, settings.within(budget))
    return replace(again, solves=again.solves + solves)


def _with_bound_over(found: Found, ceilings: np.ndarray) -> Found:
    """An answer cut short over the first tuples: its proved bound raised to the other
    tuples' highest ceiling, what any of them could reach (no bound: none)."""
    if found.bound_ln_mfu is None or ceilings.size == 0:
        return found
    highest = round(LN_MFU_SCALE * math.log(float(np.max(ceilings))))
    return replace(found, bound_ln_mfu=max(found.bound_ln_mfu, highest))


def _mfu(problem: SearchProblem, assumptions: CostAssumptions, found: Found) -> float:
    """The MFU of a solve's layout: its objective, ln(MFU) rounded to 1e-8 (TIE_MARGIN is a
    hundred times that), else the cost model's."""
    if found.ln_mfu is not None:
        return math.exp(found.ln_mfu / LN_MFU_SCALE)
    assert found.layout is not None
    return float(evaluate(problem.job, found.layout, problem.profile, assumptions).mfu)


def _with_tuples(problem: SearchProblem, tuples: np.ndarray) -> SearchProblem:
    return replace(problem, degrees=problem.degrees[tuples])
