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

from optimizer import cpsat
from optimizer.cpsat import Budget
from optimizer.planning.greedy import Assignment
from optimizer.planning.model import PlanModel
from optimizer.planning.options import (
    MET_LEVELS,
    PRIMARY_LEVELS,
    THROUGHPUT_LEVELS,
    Option,
    OptionTable,
    lost_on_restart_s,
    objective_scale,
)
from optimizer.planning.problem import PlanProblem, PlanSettings
from optimizer.planning.results import NodeValue, Reason, Shortfall
from optimizer.planning.solve import add_hint, new_solver, read_assignment, value_of

# The most one explanation's re-solve may take, however much time is left.
MAX_EXPLAIN_SOLVE_S = 1.0
BUILD_S_PER_OPTION = 4e-5  # the counts-only model's build, per option (measured)


class OutOfTime(Exception):
    pass


def noise_units(problem: PlanProblem) -> int:
    """The least change of the integer objective that is a gain or a cost to report: a
    millionth of its range. Below it lie rounding and tie-breaks, not gains."""
    levels = MET_LEVELS * THROUGHPUT_LEVELS if problem.objective == "deadlines" else PRIMARY_LEVELS
    return max(levels // 1_000_000, 1)


def _amount(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def growth_steps(pool_nodes: int) -> list[int]:
    """The additions asked about: 1 node, then doubling up to the pool's own size."""
    steps, k = [], 1
    while k <= max(pool_nodes, 1):
        steps.append(k)
        k *= 2
    return steps


class WhatIf:
    """One counts-only model for every explanation, each question an assumption: job j
    given a better configuration (`more[j]`), or pool p k nodes larger (`grow[p][k]`: the
    model is built on every pool twice its size, its real capacity enforced unless grown).
    Built once: rebuilding it per question cost more than the solves."""

    def __init__(
        self, problem: PlanProblem, table: OptionTable, deadline: float, hint: Assignment
    ) -> None:
        if table.count * BUILD_S_PER_OPTION > deadline - time.perf_counter():
            raise OutOfTime()
        grown = tuple(replace(p, nodes=2 * p.nodes) for p in problem.pools)
        self.problem = problem
        self.plan = PlanModel(replace(problem, pools=grown, assign_nodes=False), table)
        model = self.plan.model
        self.grow: list[dict[int, cp_model.IntVar]] = []
        for p, pool in enumerate(problem.pools):
            used = sum(self.plan.nodes_chosen(j, p) for j in range(len(problem.jobs)))
            steps = {
                k: model.new_bool_var(f"{k}_more_nodes_of_{pool.name}")
                for k in growth_steps(pool.nodes)
            }
            for k, literal in steps.items():
                model.add(used <= pool.available_nodes + k).only_enforce_if(literal)
            model.add(used <= pool.available_nodes).only_enforce_if([~g for g in steps.values()])
            self.grow.append(steps)
        self.more: dict[int, cp_model.IntVar] = {}
        for j, job in enumerate(problem.jobs):
            self.more[j] = model.new_bool_var(f"{job.name}_gets_more")
        model.maximize(self.plan.value())
        add_hint(self.plan, Assignment(hint.choice))

    def ask_more(self, j: int, better: list[int]) -> None:
        self.plan.model.add(sum(self.plan.choose[j][o] for o in better) >= 1).only_enforce_if(
            self.more[j]
        )

    def best(
        self, settings: PlanSettings, deadline: float, assume: list[cp_model.IntVar]
    ) -> tuple[int, Assignment] | None:
        """The optimum (proved) under the assumptions; None when none is feasible;
        OutOfTime when no proof came in time."""
        model = self.plan.model
        model.clear_assumptions()
        others = [g for steps in self.grow for g in steps.values() if g not in assume]
        model.add_assumptions(assume + [~g for g in others])
        budget = Budget(deadline, settings.stop)
        if not budget.can_solve:
            raise OutOfTime()
        solver = new_solver(settings, min(budget.solve_limit_s(), MAX_EXPLAIN_SOLVE_S))
        status = cpsat.solve(solver, self.plan.model, settings.stop)
        if status == cp_model.INFEASIBLE:
            return None
        if status != cp_model.OPTIMAL:
            raise OutOfTime()
        found = read_assignment(self.plan, solver)
        return value_of(self.plan.table, found), found


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
        holders = _holders(problem, table, plan, j, option.pool or 0)
        has = f"{max(free, 0)} of its {pool.available_nodes} available nodes free of other jobs"
        if holders:
            has += f" (held by {holders})"
        elif pool.available_nodes < pool.nodes:  # none held: the pool is short of nodes
            has = f"{pool.available_nodes} available nodes ({pool.nodes - pool.available_nodes} unavailable)"
        return [
            Reason(
                "capacity",
                f"pool {pool.name!r} has {has}; its best configuration needs {option.nodes}",
            )
        ]
    lost_minutes = lost_on_restart_s(problem, job) / 60.0
    if job.running is not None and lost_minutes > 0:
        since = " (its restart and half its checkpoint interval)" if job.since_checkpoint_s else ""
        return [
            Reason(
                "restart_cost",
                f"moving to it would restart the job: {lost_minutes:g} minutes of training "
                f"lost{since} over the {problem.horizon_minutes:g}-minute horizon",
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


def explain_plan(
    problem: PlanProblem,
    table: OptionTable,
    plan: Assignment,
    settings: PlanSettings,
    deadline: float,
) -> tuple[tuple[Shortfall, ...], tuple[NodeValue, ...], bool]:
    """Who got less than its best alone and why; what one more node of each pool would buy;
    and whether every trade-off was worked out in time."""
    try:
        what_if = WhatIf(problem, table, deadline, plan)
        base = what_if.best(settings, deadline, [])
    except OutOfTime:
        what_if, base = None, None
    values, values_done = _node_values(problem, table, plan, settings, deadline, what_if, base)
    short, short_done = _shortfalls(problem, table, plan, settings, deadline, what_if, base)
    return short, values, values_done and short_done and what_if is not None


def _shortfalls(
    problem: PlanProblem,
    table: OptionTable,
    plan: Assignment,
    settings: PlanSettings,
    deadline: float,
    what_if: WhatIf | None,
    base: tuple[int, Assignment] | None,
) -> tuple[tuple[Shortfall, ...], bool]:
    found, complete = [], True
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
                if what_if is None or base is None:
                    raise OutOfTime()
                what_if.ask_more(j, better)
                forced = what_if.best(settings, deadline, [what_if.more[j]])
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
    if base - forced[0] < noise_units(problem):
        return Reason(
            "objective",
            "an equally good plan gives it more; the tie-break (earlier jobs first, lower "
            "node ids) chose this one",
        )
    units = {
        "throughput": "in weighted shares of best alone (w * x)",
        "tokens": "weighted tokens/s",
        "fairness": "of the fairness sum (w * x^p)",
        "deadlines": "met weight",
    }[problem.objective]
    return Reason(
        "objective",
        f"{problem.objective}: more throughput for it would cost the plan {_amount(cost)} {units} "
        "(the best plan that gives it any better configuration, counts only)",
    )


def _node_values(
    problem: PlanProblem,
    table: OptionTable,
    plan: Assignment,
    settings: PlanSettings,
    deadline: float,
    what_if: WhatIf | None,
    base: tuple[int, Assignment] | None,
) -> tuple[tuple[NodeValue, ...], bool]:
    """For each pool, what one more node would buy; when nothing, the fewest more nodes
    (doubling) that would buy anything (counts only, the configurations priced)."""
    if what_if is None or base is None:
        return tuple(
            NodeValue(p.name, None, "not worked out in time") for p in problem.pools
        ), False
    scale = objective_scale(problem, table)
    values, complete = [], True
    for p, pool in enumerate(problem.pools):
        found: list[tuple[int, float, tuple[int, Assignment] | None]] = []
        try:
            for k, literal in what_if.grow[p].items():
                more = what_if.best(settings, deadline, [literal])
                units = 0 if more is None else more[0] - base[0]
                gain = units / abs(scale) if units >= noise_units(problem) else 0.0
                found.append((k, gain, more))
                if gain > 0:
                    break
        except OutOfTime:
            complete = False
        if not found:
            values.append(NodeValue(pool.name, None, "not worked out in time"))
            continue
        words = _gain_words(problem, table, base[1], found, pool.name)
        values.append(NodeValue(pool.name, found[0][1], words, *_first_gain(found)))
    return tuple(values), complete


def _first_gain(
    found: list[tuple[int, float, tuple[int, Assignment] | None]],
) -> tuple[int | None, float | None]:
    k, gain, _ = found[-1]
    return (k, gain) if gain > 0 else (None, None)


def _gain_words(
    problem: PlanProblem,
    table: OptionTable,
    before: Assignment,
    found: list[tuple[int, float, tuple[int, Assignment] | None]],
    pool: str,
) -> str:
    k, gain, after = found[-1]
    units = {
        "throughput": "in weighted shares of best alone (w * x)",
        "tokens": "weighted tokens/s",
        "fairness": "off the fairness sum",
        "deadlines": "met weight",
    }[problem.objective]
    if after is None or gain <= 0:
        return f"more nodes of {pool!r}, up to {k}, buy nothing: no job's better configuration fits in them"
    moved = [
        f"{problem.jobs[j].name} {_config(problem, table, j, o)} -> {_config(problem, table, j, after[1].choice[j])}"
        for j, o in enumerate(before.choice)
        if after[1].choice[j] != o
    ]
    what = f"would buy {_amount(gain)} {units} ({'; '.join(moved[:4])})"
    if k == 1:
        return f"one more node of {pool!r} {what}"
    return f"one more node of {pool!r} buys nothing; {k} more nodes {what}"


def _config(problem: PlanProblem, table: OptionTable, j: int, o: int) -> str:
    option = table.options[j][o]
    if option.pool is None:
        return "nothing"
    return f"{option.gpus} GPUs of {problem.pools[option.pool].name!r}"
