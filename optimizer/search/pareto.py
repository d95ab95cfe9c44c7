"""The memory/MFU Pareto frontier by epsilon-constraint solves.

Start with the best layout; then, again and again, cap memory one byte below the last
point's and take the best layout under the cap (most MFU, then least memory to the MB, in
one solve). A point that the next one matches in MFU with less memory is dropped, so each
kept point has strictly less memory and strictly less MFU than the one before; the loop
ends when no layout fits the cap. Exact up to the model's scaling: memory in whole bytes,
ln(MFU) to 1 / LN_MFU_SCALE.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from models.layout import Layout
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.cpsat import CutShort
from optimizer.search.enumerator import FLOAT_NOISE_RELATIVE
from optimizer.search.problem import SearchProblem
from optimizer.search.solve import Found, SolveSettings, choosable_model, frontier_point
from optimizer.search.tables import NoLayouts, build_tables


def frontier(
    problem: SearchProblem, assumptions: CostAssumptions, settings: SolveSettings
) -> tuple[list[Layout], bool]:
    """Non-dominated layouts, memory ascending, and whether every solve was proved."""
    budget = settings.budget()
    if len(problem.degrees) == 0:
        return [], True
    try:
        tables = build_tables(problem, assumptions, deadline=budget.deadline, stop=budget.stop)
        layout_model = choosable_model(tables)
    except NoLayouts:
        return [], True
    except CutShort:
        return [], False
    points: list[Found] = []

    @cache  # each point is compared twice, with the one before and the one after
    def mfu_of(layout: Layout) -> float:
        return evaluate(problem.job, layout, problem.profile, assumptions).mfu

    cap_bytes: int | None = None
    proved = False
    while not budget.expired:
        found = frontier_point(layout_model, settings.within(budget), cap_bytes)
        if found.layout is None or found.memory_bytes is None or not found.proved:
            proved = found.layout is None and found.proved  # a point short of its proof may
            break  # be dominated: stop honestly
        if points and _matched(mfu_of, points[-1], found):
            points.pop()  # same MFU for less memory: the earlier point is dominated
        points.append(found)
        cap_bytes = found.memory_bytes - 1
    return [point.layout for point in reversed(points) if point.layout is not None], proved


def _matched(mfu_of: Callable[[Layout], float], earlier: Found, found: Found) -> bool:
    """Whether `found` (less memory) reaches `earlier`'s MFU: equal ln(MFU) in the model's
    units, or, when the ln values differ, the cost model's MFUs equal to float noise, as the
    enumerator judges (two layouts of one MFU whose terms round in different tables can sit
    a unit of ln(MFU) apart)."""
    if earlier.ln_mfu == found.ln_mfu:
        return True
    if earlier.layout is None or found.layout is None:
        return False
    return mfu_of(earlier.layout) <= mfu_of(found.layout) * (1 + FLOAT_NOISE_RELATIVE)
