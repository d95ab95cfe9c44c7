"""For a plan nothing satisfies: a minimal set of its rules that conflict, found by the
kernel's `minimal_core` as for a single job. The model is built with each rule an
assumption literal and no objective (presolve would otherwise blame them all), and each
member is said in words with its numbers."""

from __future__ import annotations

from ortools.sat.python import cp_model

from optimizer import cpsat
from optimizer.cpsat import Budget, CutShort
from optimizer.planning.model import PlanModel
from optimizer.planning.options import OptionTable
from optimizer.planning.problem import PlanProblem, PlanSettings
from optimizer.planning.solve import new_solver
from optimizer.results import Conflict


def _settled(
    plan: PlanModel, settings: PlanSettings, budget: Budget
) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus]:
    """One solve of the plan's model as it stands; CutShort when no time is left for it or
    it ends unsettled."""
    if not budget.can_solve:
        raise CutShort()
    solver = new_solver(settings, budget.solve_limit_s())
    return solver, cpsat.settled_solve(solver, plan.model, settings.stop)


def plan_conflict(
    problem: PlanProblem, table: OptionTable, settings: PlanSettings, deadline: float
) -> tuple[Conflict, ...]:
    """A minimal conflicting set of rules; () if none is found; CutShort if out of time."""
    plan = PlanModel(problem, table, free_rules=True)
    budget = Budget(deadline, settings.stop)
    kept = cpsat.minimal_core(plan.model, plan.rules, lambda: _settled(plan, settings, budget))
    if kept is None:
        return ()
    return tuple(Conflict(name, describe(problem, table, name)) for name in kept)


def _nodes_text(nodes: tuple[int, ...]) -> str:
    runs, start = [], None
    for i, node in enumerate(nodes):
        if start is None:
            start = node
        if i + 1 == len(nodes) or nodes[i + 1] != node + 1:
            runs.append(f"{start}" if start == node else f"{start}-{node}")
            start = None
    return ", ".join(runs)


def describe(problem: PlanProblem, table: OptionTable, rule: str) -> str:
    kind, _, name = rule.partition(":")
    if kind in ("must_run", "keeps_nodes"):
        j = next(i for i, job in enumerate(problem.jobs) if job.name == name)
        return _job_rule(problem, table, j, kind)
    pool = problem.pools[problem.pool_index(name)]
    if kind == "capacity":
        down = f", {len(pool.unavailable)} of them unavailable" if pool.unavailable else ""
        return (
            f"pool {name!r} has {pool.available_nodes} available nodes of "
            f"{pool.gpus_per_node} GPUs ({pool.nodes} in all{down})"
        )
    if kind == "unavailable":
        return (
            f"nodes {_nodes_text(tuple(sorted(pool.unavailable)))} of pool {name!r} are unavailable"
        )
    return (
        f"pool {name!r}: jobs take its NVLink domains of {pool.domain_nodes} nodes whole, "
        "plus at most one domain for their remainder"
    )


def _job_rule(problem: PlanProblem, table: OptionTable, j: int, kind: str) -> str:
    job = problem.jobs[j]
    if kind == "keeps_nodes" and job.running is not None:
        return (
            f"job {job.name!r} keeps its nodes {_nodes_text(tuple(sorted(job.running.nodes)))} "
            f"of pool {job.running.pool!r} (running, not movable)"
        )
    why = "pinned where it runs" if job.pinned else "not preemptible"
    smallest: dict[int, int] = {}
    for option in table.options[j]:
        if option.pool is not None:
            smallest[option.pool] = min(smallest.get(option.pool, option.nodes), option.nodes)
    if not smallest:
        return (
            f"job {job.name!r} must run ({why}), but none of its configurations has a layout "
            f"(min_gpus {job.min_gpus})"
        )
    least = ", ".join(
        f"{n} nodes ({n * problem.pools[p].gpus_per_node} GPUs) of {problem.pools[p].name!r}"
        for p, n in sorted(smallest.items())
    )
    return f"job {job.name!r} must run ({why}): at least {least}"
