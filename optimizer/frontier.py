"""The memory/MFU Pareto frontier by epsilon-constraint solves.

Start with the best layout; then, again and again, cap memory one byte below the last
point's and take the best layout under the cap (most MFU, then least memory). Each point
has strictly less memory and strictly less MFU than the one before; the loop ends when no
layout fits the cap. Exact up to the model's scaling: memory in whole bytes, ln(MFU) to
1 / LN_MFU_SCALE.
"""

from __future__ import annotations

import time

from models.layout import Layout
from optimizer.assumptions import CostAssumptions
from optimizer.cpsat_model import LayoutModel, SolveSettings, solve_best
from optimizer.cpsat_tables import build_tables
from optimizer.space import SearchProblem


def frontier(
    problem: SearchProblem, assumptions: CostAssumptions, settings: SolveSettings
) -> tuple[list[Layout], bool]:
    """Non-dominated layouts, memory ascending, and whether every solve was proved."""
    deadline = time.perf_counter() + settings.time_limit_s
    if len(problem.degrees) == 0:
        return [], True
    layout_model = LayoutModel(build_tables(problem, assumptions))
    points: list[Layout] = []
    cap_bytes: int | None = None
    while True:
        remaining_s = deadline - time.perf_counter()
        if remaining_s <= 0:
            return points[::-1], False
        found = solve_best(
            layout_model, SolveSettings(remaining_s, settings.workers), memory_cap_bytes=cap_bytes
        )
        if found.layout is None or found.memory_bytes is None:
            return points[::-1], found.proved
        if not found.proved:  # a point short of its proof may be dominated: stop honestly
            return points[::-1], False
        points.append(found.layout)
        cap_bytes = found.memory_bytes - 1
