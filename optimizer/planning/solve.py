"""Solving a plan within the caller's deadline: first the options, then the nodes.

Lexicographically: the scheduler's objective; then the option tie-break (earlier jobs first,
model.py); then the topology (racks spanned, fewer first); then the node tie-break (lower
node ids for earlier jobs). Each level is folded below the one above it in one integer
objective where int64 and the LP's doubles hold it exactly (SOLVE_RANGE), so one plan comes
back whatever the number of workers once every solve is proved.

Where every pool's NVLink domain is one node, any node counts within a pool's capacity pack
into its racks: the objective does not depend on the racks, and the plan is solved in two
parts: (1) options on the counts-only model, (2) nodes with the options fixed. Otherwise
(multi-node NVLink domains, whose packing can fail) (1) is the joint model, objective with
topology below it, and (2) the node tie-break at that topology.

Each solve starts from a hint (the greedy plan, or the options packed greedily), gets a
fixed seed and the caller's worker count, and stops at the deadline or the stop signal with
what it has. The status says what was proved of the objective; whether the topology and
the tie-breaks were proved is reported beside it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ortools.sat.python import cp_model

from optimizer import cpsat
from optimizer.cpsat import Budget
from optimizer.planning.cluster import Cell
from optimizer.planning.greedy import Assignment, greedy_plan, pack
from optimizer.planning.model import BuildOutOfTime, PlanModel
from optimizer.planning.options import OptionTable
from optimizer.planning.problem import PlanProblem, PlanSettings
from optimizer.results import Status

# Of the time left, what the first part may take; the second gets the rest.
FIRST_SHARE = 0.6
SOLVE_RANGE = 2**52  # a folded objective's span stays below this (the LP sees it exactly)
# Building the node model costs about this per node-count variable (measured: 1.0 s for
# 25,600 on the reference machine); a model that would take more than half the time left
# is not built, and the greedy packing stands.
BUILD_S_PER_VARIABLE = 5e-5


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
    variables: int = 0
    constraints: int = 0
    notes: tuple[str, ...] = ()
    objective_s: float = 0.0  # what the first part (the objective's solve) took


def new_solver(settings: PlanSettings, time_limit_s: float) -> cp_model.CpSolver:
    """The kernel's solver with the plan's workers and fixed seed."""
    return cpsat.new_solver(time_limit_s, settings.workers, settings.seed)


def add_hint(plan: PlanModel, assignment: Assignment) -> None:
    """The assignment as the solver's starting point, every variable of it."""
    plan.model.clear_hints()
    for j, choices in enumerate(plan.choose):
        for o, literal in enumerate(choices):
            plan.model.add_hint(literal, o == assignment.choice[j])
    nodes_in = plan.in_rack_order(assignment.nodes_in)
    for key, count in plan.nodes_in.items():
        nodes = nodes_in.get(key, 0)
        plan.model.add_hint(count, nodes)
        plan.model.add_hint(plan.uses[key], nodes > 0)


def read_assignment(plan: PlanModel, solver: cp_model.CpSolver) -> Assignment:
    choice = tuple(
        next(o for o, literal in enumerate(choices) if solver.boolean_value(literal))
        for choices in plan.choose
    )
    counts = {key: int(solver.value(var)) for key, var in plan.nodes_in.items()}
    return Assignment(choice, {key: n for key, n in counts.items() if n})


def value_of(table: OptionTable, assignment: Assignment) -> int:
    return sum(table.values[j][o] for j, o in enumerate(assignment.choice))


def racks_of(cells: tuple[Cell, ...], assignment: Assignment) -> int:
    spanned = {(j, cells[c].pool, cells[c].rack) for (j, c), n in assignment.nodes_in.items() if n}
    return len(spanned)


def _fold(
    levels: list[tuple[cp_model.LinearExpr, int, int]],
) -> tuple[cp_model.LinearExpr, list[int]]:
    """levels: (expression, largest absolute value, sign: +1 maximised, -1 minimised),
    highest first. The top one and as many below it as SOLVE_RANGE allows, folded into one
    maximised expression; returns it and each folded level's multiplier."""
    count, span = 1, levels[0][1] + 1
    while count < len(levels) and span * (levels[count][1] + 1) <= SOLVE_RANGE:
        span *= levels[count][1] + 1
        count += 1
    multipliers: list[int] = []
    multiplier = 1
    for _, most, _ in reversed(levels[:count]):
        multipliers.insert(0, multiplier)
        multiplier *= most + 1
    expression = sum(
        sign * m * term for (term, _, sign), m in zip(levels[:count], multipliers, strict=True)
    )
    return expression, multipliers  # type: ignore[return-value]


def _value_range(plan: PlanModel) -> int:
    return sum(max(abs(v) for v in values) for values in plan.table.values)


def _bound_of(solver: cp_model.CpSolver, multiplier: int) -> int | None:
    """The top level's bound from the folded one's: the levels below add at most
    multiplier - 1 and subtract at most as much."""
    bound = cpsat.objective_bound(solver)
    return None if bound is None else (bound + multiplier - 1) // multiplier


def solve_plan(
    problem: PlanProblem, table: OptionTable, settings: PlanSettings, deadline: float
) -> Solved:
    budget = Budget(deadline, settings.stop)
    cells = problem.cells() if problem.assign_nodes else ()
    greedy = greedy_plan(problem, table, cells)
    decomposable = all(pool.domain_nodes == 1 for pool in problem.pools)
    if problem.assign_nodes and not decomposable:
        return _joint(problem, table, settings, budget, greedy)
    counts_only = PlanModel(replace(problem, assign_nodes=False), table)
    hint = None if greedy is None else Assignment(greedy.choice)
    first = _options(counts_only, settings, budget, hint)
    if not problem.assign_nodes or first.assignment is None:
        return first
    choice = first.assignment.choice
    placed = pack(problem, table, cells, list(choice))
    chosen_cells = sum(
        sum(c.pool == table.options[j][o].pool for c in cells) for j, o in enumerate(choice)
    )
    if chosen_cells * BUILD_S_PER_VARIABLE > budget.left_s() / 2 and placed is not None:
        note = (
            f"the node model ({chosen_cells:,} node-count variables) would take longer to "
            "build than the time left allows: nodes are packed greedily (topology not proved)"
        )
        return _packed_greedily(problem, first, placed, note)
    return _nodes(problem, table, settings, budget, first, placed)


def _restricted(table: OptionTable, choice: tuple[int, ...]) -> OptionTable:
    """Each job's options cut to nothing and its choice (index 1): the node model then has
    node counts only in the pool each job was given."""
    keep = [(0,) if o == 0 else (0, o) for o in choice]
    return OptionTable(
        tuple(tuple(opts[o] for o in k) for opts, k in zip(table.options, keep, strict=True)),
        tuple(tuple(vals[o] for o in k) for vals, k in zip(table.values, keep, strict=True)),
        tuple(tuple(sc[o] for o in k) for sc, k in zip(table.scores, keep, strict=True)),
        table.alone_tokens_per_s,
    )


def _options(
    plan: PlanModel, settings: PlanSettings, budget: Budget, hint: Assignment | None
) -> Solved:
    """Part 1 on the counts-only model: the objective, then the option tie-break."""
    tie, most_tie = plan.option_tie_break()
    levels = [(plan.value(), _value_range(plan), 1), (tie, most_tie, -1)]
    return _first_part(plan, levels, settings, budget, hint)


def _first_part(
    plan: PlanModel,
    levels: list[tuple[cp_model.LinearExpr, int, int]],
    settings: PlanSettings,
    budget: Budget,
    hint: Assignment | None,
) -> Solved:
    """One solve of the objective levels folded into one (the tie-breaks proved only when
    every level folded), from `hint`, in the first part's share of the time left."""
    objective, multipliers = _fold(levels)
    plan.model.maximize(objective)
    if hint is not None:
        add_hint(plan, hint)
    start = time.perf_counter()
    solver = new_solver(settings, budget.solve_limit_s(FIRST_SHARE))
    solver.parameters.relative_gap_limit = settings.gap_limit
    status = cpsat.solve(solver, plan.model, settings.stop)
    sizes = (len(plan.model.proto.variables), len(plan.model.proto.constraints))
    folded = len(multipliers) == len(levels)
    first = _settled(plan, solver, status, multipliers[0], hint, folded, settings, sizes)
    return replace(first, objective_s=time.perf_counter() - start)


def _settled(
    plan: PlanModel,
    solver: cp_model.CpSolver,
    status: cp_model.CpSolverStatus,
    multiplier: int,
    hint: Assignment | None,
    folded: bool,
    settings: PlanSettings,
    sizes: tuple[int, int],
) -> Solved:
    """What one first-part solve proved: status, assignment, value and bound."""
    if status == cp_model.INFEASIBLE:
        return Solved(
            "infeasible",
            None,
            solves=1,
            branches=solver.num_branches,
            variables=sizes[0],
            constraints=sizes[1],
        )
    bound = _bound_of(solver, multiplier)
    found = (
        hint
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        else read_assignment(plan, solver)
    )
    if found is None:
        return Solved(
            "unknown",
            None,
            bound=bound,
            solves=1,
            branches=solver.num_branches,
            variables=sizes[0],
            constraints=sizes[1],
        )
    value = value_of(plan.table, found)
    optimal = status == cp_model.OPTIMAL and settings.gap_limit == 0
    proved = optimal or (bound is not None and value >= bound)
    return Solved(
        "optimal" if proved else "feasible",
        found,
        value,
        value if proved else bound,
        racks_of(plan.cells, found) if plan.cells else None,
        topology_proved=optimal and bool(plan.cells),
        tie_break_proved=optimal and folded,
        solves=1,
        branches=solver.num_branches,
        from_greedy=status not in (cp_model.OPTIMAL, cp_model.FEASIBLE),
        variables=sizes[0],
        constraints=sizes[1],
    )


def _nodes(
    problem: PlanProblem,
    table: OptionTable,
    settings: PlanSettings,
    budget: Budget,
    first: Solved,
    placed: Assignment | None,
) -> Solved:
    """Part 2 with the options fixed: fewest racks spanned, then the node tie-break."""
    assert first.assignment is not None
    choice = first.assignment.choice
    try:
        plan = PlanModel(problem, _restricted(table, choice), out_of_time=lambda: budget.expired)
    except BuildOutOfTime:
        return _packed_greedily(problem, first, placed, BUILD_OUT_OF_TIME)
    plan.fix_options(tuple(int(o > 0) for o in choice))
    tie, most_tie = plan.cell_tie_break()
    objective, multipliers = _fold(
        [(plan.racks_spanned(), plan.most_racks, -1), (tie, most_tie, -1)]
    )
    plan.model.maximize(objective)
    if placed is not None:
        add_hint(plan, Assignment(tuple(int(o > 0) for o in placed.choice), placed.nodes_in))
    solver = new_solver(settings, budget.solve_limit_s())
    status = cpsat.solve(solver, plan.model, settings.stop)
    solves, branches = first.solves + 1, first.branches + solver.num_branches
    sizes = (
        first.variables + len(plan.model.proto.variables),
        first.constraints + len(plan.model.proto.constraints),
    )
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = Assignment(choice, read_assignment(plan, solver).nodes_in)
    elif placed is not None:
        found = placed
    else:  # neither a packing nor time: the options alone cannot be answered with nodes
        return replace(
            first,
            status="unknown",
            assignment=None,
            solves=solves,
            branches=branches,
            variables=sizes[0],
            constraints=sizes[1],
        )
    optimal = status == cp_model.OPTIMAL
    return replace(
        first,
        assignment=found,
        racks=racks_of(plan.cells, found),
        topology_proved=optimal,
        tie_break_proved=first.tie_break_proved and optimal and len(multipliers) > 1,
        solves=solves,
        branches=branches,
        variables=sizes[0],
        constraints=sizes[1],
    )


def _joint(
    problem: PlanProblem,
    table: OptionTable,
    settings: PlanSettings,
    budget: Budget,
    greedy: Assignment | None,
) -> Solved:
    """Part 1 on the joint model (NVLink domains spanning nodes): the objective, the option
    tie-break and the topology; part 2, at that, the node tie-break."""
    try:
        plan = PlanModel(problem, table, out_of_time=lambda: budget.expired)
    except BuildOutOfTime:
        return _greedy_for_lack_of_time(problem, table, greedy)
    tie, most_tie = plan.option_tie_break()
    levels = [
        (plan.value(), _value_range(plan), 1),
        (tie, most_tie, -1),
        (plan.racks_spanned(), plan.most_racks, -1),
    ]
    first = _first_part(plan, levels, settings, budget, greedy)
    if first.assignment is None or not (first.topology_proved and first.tie_break_proved):
        return replace(first, tie_break_proved=False)
    return _nodes(problem, table, settings, budget, first, first.assignment)


BUILD_OUT_OF_TIME = (
    "the time ran out while the node model was being built: nodes are packed greedily "
    "(topology not proved)"
)


def _packed_greedily(
    problem: PlanProblem, first: Solved, placed: Assignment | None, why: str
) -> Solved:
    """Part 1's options on the greedy packing, the node model not solved (`why`), or, with
    no packing, no answer with nodes."""
    if placed is None:
        return replace(first, status="unknown", assignment=None, notes=(why,))
    racks = racks_of(problem.cells(), placed)
    return replace(first, assignment=placed, racks=racks, tie_break_proved=False, notes=(why,))


def _greedy_for_lack_of_time(
    problem: PlanProblem, table: OptionTable, greedy: Assignment | None
) -> Solved:
    """The joint model never built: the greedy plan, its objective not proved."""
    if greedy is None:
        return Solved("unknown", None, notes=(BUILD_OUT_OF_TIME,))
    racks = racks_of(problem.cells(), greedy)
    return Solved(
        "feasible",
        greedy,
        value_of(table, greedy),
        None,
        racks,
        from_greedy=True,
        notes=(BUILD_OUT_OF_TIME,),
    )
