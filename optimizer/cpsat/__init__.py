"""The CP-SAT kernel under the three solver stacks (search/, staging/, planning/): a time
budget (budget.py), a solver with the parameters they share and its stoppable solve
(solver.py, stopping.py), and the minimal conflict (core.py). Each stack keeps only its own
tuning. It imports OR-Tools and the standard library only.

Other rooms import from this module only.
"""

from optimizer.cpsat.budget import MIN_SOLVE_S, READ_BACK_S, Budget
from optimizer.cpsat.core import Settle, minimal_core
from optimizer.cpsat.solver import new_solver, objective_bound, settled_solve, solve
from optimizer.cpsat.stopping import CutShort, StopSignal, time_is_up

__all__ = [
    "MIN_SOLVE_S",
    "READ_BACK_S",
    "Budget",
    "CutShort",
    "Settle",
    "StopSignal",
    "minimal_core",
    "new_solver",
    "objective_bound",
    "settled_solve",
    "solve",
    "time_is_up",
]
