"""Solving the plan model in two stages, within the caller's deadline.

1. Maximise the objective, then (below one unit of it) the topology term: value * K -
   racks spanned, K = most racks + 1, so no rack is ever bought with throughput.
2. With both fixed at what stage 1 proved, minimise the tie-break (model.py), so the plan
   is one and the same whatever the number of CP-SAT workers.

Each solve starts from a hint (the greedy plan, or stage 1's), gets a fixed seed and the
caller's worker count, and stops at the deadline or the stop signal with what it has. The
status says what was proved of the objective (stage 1's value); whether the topology and
the tie-break were proved too is reported beside it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from optimizer.planning.greedy import Assignment
from optimizer.planning.model import PlanModel
from optimizer.planning.problem import PlanSettings
from optimizer.results import Status

# Of the time left when stage 1 starts, what it may take; stage 2 gets the rest.
STAGE_ONE_SHARE = 0.8
# Kept back for the read-back and the answer after the last solve.
READ_BACK_S = 0.015
MIN_SOLVE_S = 0.005


@dataclass(frozen=True)
class Solved:
    status: Status
    assignment: Assignment | None
    value: int | None = None  # the objective's integer (options.py)
    bound: int | None = None  # the most it could be, as far as proved
    racks: int | None = None
    topology_proved: bool = False
    tie_break_proved: bool = False
    solves: int = 0
    branches: int = 0
    from_greedy: bool = False


def new_solver(settings: PlanSettings, time_limit_s: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    parameters = solver.parameters
    parameters.max_time_in_seconds = max(time_limit_s, MIN_SOLVE_S)
    parameters.num_workers = settings.workers
    parameters.random_seed = settings.seed
    return solver


def run(
    solver: cp_model.CpSolver, plan: PlanModel, settings: PlanSettings
) -> cp_model.CpSolverStatus:
    """Every solve goes through here, so that the stop signal can end it from outside."""
    with settings.stop.watching(solver):
        if settings.stop.stopped:
            return cp_model.UNKNOWN
        return solver.solve(plan.model)


def add_hint(plan: PlanModel, assignment: Assignment) -> None:
    """The assignment as the solver's starting point, every variable of it."""
    plan.model.clear_hints()
    for j, choices in enumerate(plan.choose):
        for o, literal in enumerate(choices):
            plan.model.add_hint(literal, o == assignment.choice[j])
    for key, count in plan.nodes_in.items():
        nodes = assignment.nodes_in.get(key, 0)
        plan.model.add_hint(count, nodes)
        plan.model.add_hint(plan.uses[key], nodes > 0)


def read_assignment(plan: PlanModel, solver: cp_model.CpSolver) -> Assignment:
    choice = tuple(
        next(o for o, literal in enumerate(choices) if solver.boolean_value(literal))
        for choices in plan.choose
    )
    counts = {key: int(solver.value(var)) for key, var in plan.nodes_in.items()}
    return Assignment(choice, {key: n for key, n in counts.items() if n})


def value_of(plan: PlanModel, assignment: Assignment) -> int:
    return sum(plan.table.values[j][o] for j, o in enumerate(assignment.choice))


def racks_of(plan: PlanModel, assignment: Assignment) -> int:
    spanned = {
        (j, plan.cells[c].pool, plan.cells[c].rack)
        for (j, c), n in assignment.nodes_in.items()
        if n
    }
    return len(spanned)


def solve_plan(
    plan: PlanModel, settings: PlanSettings, deadline: float, hint: Assignment | None
) -> Solved:
    """Stage 1, then (when stage 1 proved its optimum) stage 2; see the module's note."""
    scale = plan.most_racks + 1
    plan.model.maximize(plan.value() * scale - plan.racks_spanned())
    if hint is not None:
        add_hint(plan, hint)
    left_s = deadline - time.perf_counter() - READ_BACK_S
    solver = new_solver(settings, left_s * STAGE_ONE_SHARE)
    solver.parameters.relative_gap_limit = settings.gap_limit
    status = run(solver, plan, settings)
    if status == cp_model.INFEASIBLE:
        return Solved("infeasible", None, solves=1, branches=solver.num_branches)
    bound = _value_bound(solver, scale)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if hint is None:
            return Solved("unknown", None, bound=bound, solves=1, branches=solver.num_branches)
        value = value_of(plan, hint)
        proved = bound is not None and value >= bound
        return Solved(
            "optimal" if proved else "feasible",
            hint,
            value,
            bound,
            racks_of(plan, hint),
            solves=1,
            branches=solver.num_branches,
            from_greedy=True,
        )
    found = read_assignment(plan, solver)
    value, racks = value_of(plan, found), racks_of(plan, found)
    optimal = status == cp_model.OPTIMAL and settings.gap_limit == 0
    proved_value = optimal or (bound is not None and value >= bound)
    first = Solved(
        "optimal" if proved_value else "feasible",
        found,
        value,
        value if optimal else bound,
        racks,
        topology_proved=optimal,
        solves=1,
        branches=solver.num_branches,
    )
    if not optimal:
        return first
    return _tie_break(plan, settings, deadline, first)


def _value_bound(solver: cp_model.CpSolver, scale: int) -> int | None:
    """The objective's bound from stage 1's: value * K - racks <= Z, racks <= K - 1."""
    bound = solver.best_objective_bound
    if not math.isfinite(bound):
        return None
    return (math.floor(bound) + scale - 1) // scale


def _tie_break(plan: PlanModel, settings: PlanSettings, deadline: float, first: Solved) -> Solved:
    assert first.assignment is not None and first.value is not None and first.racks is not None
    tie, _ = plan.tie_break()
    plan.model.add(plan.value() == first.value)
    plan.model.add(plan.racks_spanned() == first.racks)
    plan.model.minimize(tie)
    add_hint(plan, first.assignment)
    solver = new_solver(settings, deadline - time.perf_counter() - READ_BACK_S)
    status = run(solver, plan, settings)
    branches = first.branches + solver.num_branches
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solved(**{**vars(first), "solves": 2, "branches": branches})
    return Solved(
        first.status,
        read_assignment(plan, solver),
        first.value,
        first.bound,
        first.racks,
        first.topology_proved,
        tie_break_proved=status == cp_model.OPTIMAL,
        solves=2,
        branches=branches,
    )
