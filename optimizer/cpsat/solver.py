"""A CP-SAT solver with the parameters every stack shares, its stoppable solve, and what it
proved of the objective."""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from optimizer.cpsat.budget import MIN_SOLVE_S
from optimizer.cpsat.stopping import CutShort, StopSignal

# A solve that ended with an answer: a solution, or the proof that none exists.
SETTLED = (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE)


def new_solver(limit_s: float, workers: int, seed: int | None = None) -> cp_model.CpSolver:
    """A solver of at most `limit_s` seconds (MIN_SOLVE_S at least) on `workers` workers;
    `seed` fixes its random choices where given. Ctrl-C is left to the process: CP-SAT's own
    SIGINT handler, once the solve ends, resets the signal to its default action (not to the
    handler before it), so a study worker that ignores SIGINT died of the next Ctrl-C; solves
    are stopped by `StopSignal` instead. Each stack adds its own tuning to the parameters."""
    solver = cp_model.CpSolver()
    parameters = solver.parameters
    parameters.max_time_in_seconds = max(limit_s, MIN_SOLVE_S)
    parameters.num_workers = workers
    parameters.catch_sigint_signal = False
    if seed is not None:
        parameters.random_seed = seed
    return solver


def solve(
    solver: cp_model.CpSolver, model: cp_model.CpModel, stop: StopSignal
) -> cp_model.CpSolverStatus:
    """Every solve goes through here, so that `stop` can end it from outside: UNKNOWN at once
    if it is set already, else the solve, which `stop()` ends with what it has."""
    with stop.watching(solver):
        if stop.stopped:
            return cp_model.UNKNOWN
        return solver.solve(model)


def settled_solve(
    solver: cp_model.CpSolver, model: cp_model.CpModel, stop: StopSignal
) -> cp_model.CpSolverStatus:
    """`solve`, with CutShort when it ends unsettled (neither a solution nor a proof): what
    a caller that must know the answer (a conflict's re-solves) cannot use."""
    status = solve(solver, model, stop)
    if status not in SETTLED:
        raise CutShort()
    return status


def objective_bound(solver: cp_model.CpSolver) -> int | None:
    """The proved bound of a maximised integer objective, rounded down; None without one."""
    bound = solver.best_objective_bound
    return int(math.floor(bound)) if math.isfinite(bound) else None
