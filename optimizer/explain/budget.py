"""What the explanations spend: the caller's time budget, handed out solve by solve (nothing
once the caller's stop signal is set), and the layouts they quote, priced by the cost model."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from models.layout import Layout
from optimizer.costmodel import CostAssumptions, Estimate, evaluate
from optimizer.search import MIN_SOLVE_S, SearchProblem, SolveSettings, StopSignal

GB = 1e9


CUT_SHORT = "the time limit ran out before every explanation was worked out: some are missing"


def priced(problem: SearchProblem, layout: Layout, assumptions: CostAssumptions) -> Estimate:
    return evaluate(problem.job, layout, problem.profile, assumptions)


@dataclass(frozen=True)
class Budget:
    """What is left of the caller's time limit, handed out solve by solve; nothing once the
    caller's stop signal is set."""

    deadline: float  # time.perf_counter() value
    workers: int
    stop: StopSignal = field(default_factory=StopSignal)

    def settings(self) -> SolveSettings | None:
        remaining_s = self.deadline - time.perf_counter()
        if remaining_s <= MIN_SOLVE_S or self.stop.stopped:
            return None
        return SolveSettings(remaining_s, self.workers, self.stop)
