"""Sia's formulation of the same problem, for the planning benchmark: configurations only
(no layout choice, no placement), X[job, config] binaries, the p-norm objective, solved to
optimality with a MIP solver (CBC through OR-Tools' pywraplp, as Sia uses CBC).

Read from sia-simulator's `SiaPolicy.__solve_mip_rescaled` (SOSP'23 artifacts): each job's
goodputs normalised to its smallest configuration's, raised to p (-0.5) and minimised
(weighted), plus lambda_n = 1.1 for each job left without a configuration; at most one
configuration per job; GPUs used per type within the type's; non-preemptible jobs kept on
their previous configuration; configurations other than the previous scaled by a restart
factor. Sia also rounds the powered matrix to two decimals; here it is kept exact.

`mip_on_values` solves our own objective (the planner's integer values) with the same MIP
solver: the same optimum, a second solver's view of its time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ortools.linear_solver import pywraplp

from optimizer.planning.options import OptionTable
from optimizer.planning.problem import PlanProblem

LAMBDA_N = 1.1  # sia-simulator's default lambda_n
SIA_GAP = 1e-4  # sia_solver_thresh


@dataclass(frozen=True)
class MipPlan:
    choice: tuple[int, ...]  # option index per job (0: nothing)
    wall_s: float
    status: str


def _solver() -> pywraplp.Solver:
    solver = pywraplp.Solver.CreateSolver("CBC")
    if solver is None:
        raise SystemExit("OR-Tools was built without CBC")
    solver.SetNumThreads(1)
    return solver


def _constraints(
    solver: pywraplp.Solver, problem: PlanProblem, table: OptionTable, x: list[list]
) -> None:
    """One configuration per job (exactly one if it must run, its own if pinned); the GPUs
    (here nodes, the same thing at whole nodes) of each type within its available ones."""
    for j, job in enumerate(problem.jobs):
        options = table.options[j]
        solver.Add(sum(x[j][o] for o in range(1, len(options))) <= 1)
        if job.must_run:
            solver.Add(sum(x[j][o] for o in range(1, len(options))) == 1)
        if job.pinned:
            solver.Add(sum(x[j][o] for o, opt in enumerate(options) if opt.stays) == 1)
        for o, option in enumerate(options):
            if option.on_unavailable:
                solver.Add(x[j][o] == 0)
    for p, pool in enumerate(problem.pools):
        used = [
            option.nodes * x[j][o]
            for j, options in enumerate(table.options)
            for o, option in enumerate(options)
            if option.pool == p
        ]
        solver.Add(sum(used) <= pool.available_nodes)


def _solve(
    solver: pywraplp.Solver, table: OptionTable, x: list[list], time_limit_s: float
) -> MipPlan:
    solver.SetTimeLimit(int(time_limit_s * 1000))
    solver.SetSolverSpecificParametersAsString(f"ratioGap={SIA_GAP}")
    start = time.perf_counter()
    status = solver.Solve()
    wall_s = time.perf_counter() - start
    names = {pywraplp.Solver.OPTIMAL: "optimal", pywraplp.Solver.FEASIBLE: "feasible"}
    if status not in names:
        return MipPlan(
            (), wall_s, "infeasible" if status == pywraplp.Solver.INFEASIBLE else "unknown"
        )
    choice = tuple(
        next((o for o in range(1, len(row)) if row[o].solution_value() > 0.5), 0) for row in x
    )
    return MipPlan(choice, wall_s, names[status])


def sia_plan(
    problem: PlanProblem,
    table: OptionTable,
    throughput: list[list[float]],
    time_limit_s: float = 60.0,
) -> MipPlan:
    """Sia's objective over `throughput[j][o]` (tokens/s of each option, 0 for nothing):
    its own goodputs, e.g. those of a fixed layout."""
    solver = _solver()
    x = [
        [solver.BoolVar(f"x_{j}_{o}") for o in range(len(opts))]
        for j, opts in enumerate(table.options)
    ]
    p, horizon_s = problem.fairness_p, problem.horizon_s
    terms = []
    for j, job in enumerate(problem.jobs):
        least = min((t for t in throughput[j][1:] if t > 0), default=0.0)
        for o, option in enumerate(table.options[j]):
            if o == 0:
                continue
            if throughput[j][o] <= 0:
                solver.Add(x[j][o] == 0)
                continue
            kept = max(horizon_s - job.restart_s, 0.0) / horizon_s if option.restarts else 1.0
            speedup = max(throughput[j][o] * kept / least, 1e-4)  # ZERO_ALLOC_GAIN
            terms.append(job.weight * speedup**p * x[j][o])
    allocated = sum(x[j][o] for j, opts in enumerate(table.options) for o in range(1, len(opts)))
    solver.Minimize(sum(terms) + LAMBDA_N * (len(problem.jobs) - allocated))
    _constraints(solver, problem, table, x)
    return _solve(solver, table, x, time_limit_s)


def mip_on_values(problem: PlanProblem, table: OptionTable, time_limit_s: float = 60.0) -> MipPlan:
    """The planner's own integer objective (counts only), maximised by the MIP solver."""
    solver = _solver()
    x = [
        [solver.BoolVar(f"x_{j}_{o}") for o in range(len(opts))]
        for j, opts in enumerate(table.options)
    ]
    for row in x:
        solver.Add(sum(row) == 1)
    solver.Maximize(
        sum(v * x[j][o] for j, values in enumerate(table.values) for o, v in enumerate(values) if v)
    )
    _constraints(solver, problem, table, x)
    return _solve(solver, table, x, time_limit_s)
