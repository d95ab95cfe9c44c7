"""What the explanations spend: the caller's time budget, handed out solve by solve (nothing
once the caller's stop signal is set), and the layouts they quote, priced by the cost model."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.layout import Layout
from optimizer import cpsat
from optimizer.costmodel import CostAssumptions, Estimate, evaluate
from optimizer.cpsat import StopSignal
from optimizer.search import SearchProblem, SolveSettings

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
        """The next solve's settings; None when no solve is worth starting."""
        time_left = cpsat.Budget(self.deadline, self.stop)
        if not time_left.can_solve:
            return None
        return SolveSettings(time_left.solve_limit_s(), self.workers, self.stop)
