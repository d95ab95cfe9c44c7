"""A solve's time: the caller's deadline and stop signal, and what the next solve may take."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from optimizer.cpsat.stopping import StopSignal, time_is_up

# CP-SAT's smallest time limit worth a solve: below it a solve only pays its set-up
# (loading the model and presolve's first pass), and answers UNKNOWN.
MIN_SOLVE_S = 0.01
# Kept back from the time left for the solve's end: CP-SAT returns up to ~5 ms after its
# limit (measured on the planning models), and the answer is read back after it, all
# before the caller's deadline.
READ_BACK_S = 0.01


@dataclass(frozen=True)
class Budget:
    """What is left of a caller's time: a deadline (a time.perf_counter() value) and the
    stop signal that ends it early, from another thread."""

    deadline: float
    stop: StopSignal = field(default_factory=StopSignal)

    @classmethod
    def starting_now(cls, time_limit_s: float, stop: StopSignal | None = None) -> Budget:
        return cls(time.perf_counter() + time_limit_s, stop or StopSignal())

    def left_s(self) -> float:
        """Seconds to the deadline, none once it has passed."""
        return max(self.deadline - time.perf_counter(), 0.0)

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed or the stop signal is set."""
        return time_is_up(self.deadline, self.stop)

    @property
    def can_solve(self) -> bool:
        """Whether a solve is worth starting: not stopped, and MIN_SOLVE_S left after the
        read-back."""
        return not self.stop.stopped and self.left_s() - READ_BACK_S > MIN_SOLVE_S

    def solve_limit_s(self, share: float = 1.0) -> float:
        """The next solve's time limit: `share` of the time left less READ_BACK_S, at least
        MIN_SOLVE_S (a caller that solves anyway falls back on what it has, e.g. a hint)."""
        return max(share * (self.left_s() - READ_BACK_S), MIN_SOLVE_S)
