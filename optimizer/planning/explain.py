"""Why the plan is what it is: who got less than its best configuration alone, and why
(the capacity of which pool, the objective's trade-off, a restart's cost, a rule); and what
one more node of each pool would buy.

The trade-offs are re-solves within what the plan's solve left of the time limit, on the
counts-only model (pools and node counts; in pools whose NVLink domains are one node that
model has the same optimum, since any counts pack into racks), each said with its numbers.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ortools.sat.python import cp_model

from optimizer.planning.greedy import Assignment
from optimizer.planning.model import PlanModel
from optimizer.planning.options import Option, OptionTable, objective_scale
from optimizer.planning.problem import PlanProblem, PlanSettings
from optimizer.planning.results import NodeValue, Reason, Shortfall
from optimizer.planning.solve import add_hint, new_solver, read_assignment, run, value_of

# The most one explanation's re-solve may take, however much time is left.
MAX_EXPLAIN_SOLVE_S = 1.0


class OutOfTime(Exception):
    pass


def _best_value(
    problem: PlanProblem,
    table: OptionTable,
    settings: PlanSettings,
    deadline: float,
    hint: Assignment,
    forced: list[int] | None = None,
    j: int = 0,
) -> tuple[int, Assignment] | None:
    """The counts-only optimum (proved), with job j held to the `forced` options; None when
    none is feasible; OutOfTime when no proof came in time."""
    left_s = min(deadline - time.perf_counter(), MAX_EXPLAIN_SOLVE_S)
    if left_s < 0.01 or settings.stop.stopped:
        raise OutOfTime()
    plan = PlanModel(replace(problem, assign_nodes=False), table)
    if forced is not None:
        plan.model.add(sum(plan.choose[j][o] for o in forced) == 1)
    plan.model.maximize(plan.value())
    add_hint(plan, Assignment(hint.choice))
    solver = new_solver(replace(settings, gap_limit=0.0), left_s)
    status = run(solver, plan, settings)
    if status == cp_model.INFEASIBLE:
        return None
    if status != cp_model.OPTIMAL:
        raise OutOfTime()
    found = read_assignment(plan, solver)
    return value_of(plan, found), found


def _best_alone(table: OptionTable, j: int) -> int:
    """The option of most throughput (fewest GPUs among equals)."""
    options = table.options[j]
    return max(range(len(options)), key=lambda o: (options[o].tokens_per_s, -options[o].gpus))


def _free_for(problem: PlanProblem, table: OptionTable, plan: Assignment, j: int, pool: int) -> int:
    used = sum(
        table.options[k][o].nodes
        for k, o in enumerate(plan.choice)
        if k != j and table.options[k][o].pool == pool
    )
    return problem.pools[pool].available_nodes - used


def _holders(problem: PlanProblem, table: OptionTable, plan: Assignment, j: int, pool: int) -> str:
    held = [
        f"{problem.jobs[k].name} ({table.options[k][o].nodes})"
        for k, o in enumerate(plan.choice)
        if k != j and table.options[k][o].pool == pool
    ]
    return ", ".join(held[:6]) + (f" and {len(held) - 6} more" if len(held) > 6 else "")


def _reasons(
    problem: PlanProblem, table: OptionTable, plan: Assignment, j: int, best: int
) -> list[Reason]:
    job, option = problem.jobs[j], table.options[j][best]
    pool = problem.pools[option.pool or 0]
    if job.pinned:
        return [Reason("rule", "it is pinned where it runs (running, not movable)")]
    free = _free_for(problem, table, plan, j, option.pool or 0)
    if option.nodes > free:
        return [
            Reason(
                "capacity",
                f"pool {pool.name!r} has {max(free, 0)} of its {pool.available_nodes} available "
                f"nodes free of other jobs (held by {_holders(problem, table, plan, j, option.pool or 0)}); "
                f"its best configuration needs {option.nodes}",
            )
        ]
    if job.running is not None and job.restart_minutes > 0:
        return [
            Reason(
                "restart_cost",
                f"moving to it would restart the job: {job.restart_minutes:g} minutes of "
                f"training lost over the {problem.horizon_minutes:g}-minute horizon",
            )
        ]
    return [Reason("objective", "the objective gains more elsewhere")]


def _shortfall(
    problem: PlanProblem, table: OptionTable, j: int, best: int, got: int, reasons: list[Reason]
) -> Shortfall:
    asked, given = table.options[j][best], table.options[j][got]

    def pool(option: Option) -> str | None:
        return None if option.pool is None else problem.pools[option.pool].name

    return Shortfall(
        problem.jobs[j].name,
        asked.gpus,
        pool(asked),
        asked.tokens_per_s,
        given.gpus,
        pool(given),
        given.tokens_per_s,
        tuple(reasons),
    )


def shortfalls(
    problem: PlanProblem,
    table: OptionTable,
    plan: Assignment,
    settings: PlanSettings,
    deadline: float,
) -> tuple[tuple[Shortfall, ...], bool]:
    """Each job given less throughput than its best alone, with reasons; and whether every
    trade-off was worked out in time."""
    found, complete = [], True
    base: tuple[int, Assignment] | None = None
    scale = objective_scale(problem, table)
    for j, options in enumerate(table.options):
        best, chosen = _best_alone(table, j), options[plan.choice[j]]
        if options[best].point is None:
            why = Reason("no_configuration", "none of its configurations has a layout (left_out)")
            found.append(_shortfall(problem, table, j, best, plan.choice[j], [why]))
            continue
        if chosen.tokens_per_s >= options[best].tokens_per_s:
            continue
        reasons = _reasons(problem, table, plan, j, best)
        better = [
            o
            for o, opt in enumerate(options)
            if opt.tokens_per_s > chosen.tokens_per_s and not opt.on_unavailable
        ]
        if reasons[0].code in ("capacity", "objective") and better:
            try:
                base = base or _best_value(problem, table, settings, deadline, plan)
                forced = _best_value(problem, table, settings, deadline, plan, better, j)
                if base is not None:
                    reasons.append(_trade_off(problem, scale, base[0], forced))
            except OutOfTime:
                complete = False
        found.append(_shortfall(problem, table, j, best, plan.choice[j], reasons))
    return tuple(found), complete


def _trade_off(
    problem: PlanProblem, scale: float, base: int, forced: tuple[int, Assignment] | None
) -> Reason:
    if forced is None:
        return Reason("objective", "no plan gives it more: the rules would break")
    cost = (base - forced[0]) / abs(scale)
    if cost <= 0:
        return Reason(
            "objective",
            "an equally good plan gives it more; the tie-break (earlier jobs first, lower "
            "node ids) chose this one",
        )
    units = {
        "throughput": "weighted tokens/s",
        "fairness": "of the fairness sum (w * x^p)",
        "deadlines": "met weight",
    }[problem.objective]
    return Reason(
        "objective",
        f"{problem.objective}: more throughput for it would cost the plan {cost:.4g} {units} "
        "(the best plan that gives it any better configuration, counts only)",
    )


def node_values(
    problem: PlanProblem,
    table: OptionTable,
    plan: Assignment,
    settings: PlanSettings,
    deadline: float,
) -> tuple[tuple[NodeValue, ...], bool]:
    """For each pool, the objective one more node of it would buy (counts only)."""
    scale = objective_scale(problem, table)
    try:
        base = _best_value(problem, table, settings, deadline, plan)
    except OutOfTime:
        return tuple(
            NodeValue(p.name, None, "not worked out in time") for p in problem.pools
        ), False
    if base is None:
        return (), True
    values, complete = [], True
    for p, pool in enumerate(problem.pools):
        grown = problem.pools[:p] + (replace(pool, nodes=pool.nodes + 1),) + problem.pools[p + 1 :]
        try:
            more = _best_value(replace(problem, pools=grown), table, settings, deadline, plan)
        except OutOfTime:
            values.append(NodeValue(pool.name, None, "not worked out in time"))
            complete = False
            continue
        gain = 0.0 if more is None else (more[0] - base[0]) / abs(scale)
        values.append(
            NodeValue(pool.name, gain, _gain_words(problem, table, base[1], more, pool.name, gain))
        )
    return tuple(values), complete


def _gain_words(
    problem: PlanProblem,
    table: OptionTable,
    before: Assignment,
    after: tuple[int, Assignment] | None,
    pool: str,
    gain: float,
) -> str:
    if after is None or gain <= 0:
        return f"one more node of {pool!r} buys nothing: no job's better configuration fits in it"
    moved = [
        f"{problem.jobs[j].name} {_config(problem, table, j, o)} -> "
        f"{_config(problem, table, j, after[1].choice[j])}"
        for j, o in enumerate(before.choice)
        if after[1].choice[j] != o
    ]
    return f"one more node of {pool!r} would buy {gain:.4g} ({'; '.join(moved[:4])})"


def _config(problem: PlanProblem, table: OptionTable, j: int, o: int) -> str:
    option = table.options[j][o]
    if option.pool is None:
        return "nothing"
    return f"{option.gpus} GPUs of {problem.pools[option.pool].name!r}"
