"""For a plan nothing satisfies: a minimal set of its rules that conflict, found as
optimizer/explain/conflicts.py finds one for a single job. The model is built with each
rule an assumption literal and no objective (presolve would otherwise blame them all),
CP-SAT's sufficient assumptions are narrowed by a deletion filter, and each member is said
in words with its numbers."""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from optimizer.planning.model import PlanModel
from optimizer.planning.options import OptionTable
from optimizer.planning.problem import PlanProblem, PlanSettings
from optimizer.planning.solve import new_solver, run
from optimizer.results import Conflict
from optimizer.search import CutShort


def _infeasible(
    plan: PlanModel, rules: list[str], settings: PlanSettings, deadline: float
) -> cp_model.CpSolver | None:
    """The solver if the model is proved infeasible under `rules`; None if it is feasible;
    CutShort when time ran out first."""
    left_s = deadline - time.perf_counter()
    if left_s <= 0.005 or settings.stop.stopped:
        raise CutShort()
    plan.model.clear_assumptions()
    plan.model.add_assumptions([plan.rules[r] for r in rules])
    solver = new_solver(settings, left_s)
    status = run(solver, plan, settings)
    if status == cp_model.INFEASIBLE:
        return solver
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    raise CutShort()


def plan_conflict(
    problem: PlanProblem, table: OptionTable, settings: PlanSettings, deadline: float
) -> tuple[Conflict, ...]:
    """A minimal conflicting set of rules; () if none is found; CutShort if out of time."""
    plan = PlanModel(problem, table, free_rules=True)
    names = list(plan.rules)
    solver = _infeasible(plan, names, settings, deadline)
    if solver is None:
        return ()
    by_index = {literal.index: name for name, literal in plan.rules.items()}
    core = [by_index[i] for i in solver.sufficient_assumptions_for_infeasibility()]
    kept = list(core)
    for name in core:  # deletion filter: drop each rule the rest still conflict without
        trial = [rule for rule in kept if rule != name]
        if _infeasible(plan, trial, settings, deadline) is not None:
            kept = trial
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
