"""The planner's front door: `plan`, many jobs on one cluster in one proved plan.

One call: check the snapshot and its size; price each job's scaling curve (cached); list
each job's options and their worth under the objective; a greedy plan; the CP-SAT model and
its two staged solves (solve.py); node ids and each layout laid on its nodes; then, with
what the time limit leaves, the explanations, or the minimal conflict when nothing fits.
`time_limit_s` bounds the whole call.
"""

from __future__ import annotations

import time
from dataclasses import replace

from optimizer.cpsat import CutShort, time_is_up
from optimizer.planning import conflicts as conflicting
from optimizer.planning import explain as explaining
from optimizer.planning.curves import CURVE_CACHE, CurveCache, Curves, build_curves
from optimizer.planning.options import (
    MET_LEVELS,
    THROUGHPUT_LEVELS,
    OptionTable,
    objective_scale,
    option_table,
)
from optimizer.planning.placement import lay_out, name_nodes
from optimizer.planning.problem import (
    PlanProblem,
    PlanSettings,
    check_problem,
    check_size,
    released_from_failures,
)
from optimizer.planning.results import JobPlan, LeftOut, PlanResult, PlanStats
from optimizer.planning.solve import Solved, solve_plan
from optimizer.results import Status

# Of the time limit, what pricing the scaling curves may take when the cache lacks them.
CURVE_SHARE = 0.6
# Of the time limit, what is kept for the explanations (they also get what the solve leaves).
EXPLAIN_SHARE = 0.2
# Kept back from the solve for the answer: naming nodes, re-pricing each layout on them and
# its export (measured: about 2.3 ms a job with an engine's export, which re-pricing writes).
ANSWER_S, ANSWER_S_PER_JOB = 0.01, 0.003


def plan(
    problem: PlanProblem,
    settings: PlanSettings | None = None,
    curves: Curves | None = None,
    cache: CurveCache = CURVE_CACHE,
) -> PlanResult:
    """The best plan within the time limit, what was proved of it, and why.
    `curves`: scaling curves already known (curves.given_curves); priced if absent, each
    point looked up in `cache` first (store.curve_cache: one kept on disk)."""
    settings = settings or PlanSettings()
    start = time.perf_counter()
    deadline = start + settings.time_limit_s
    check_problem(problem)
    check_size(problem)
    problem, released = released_from_failures(problem)
    if curves is None:
        curves = build_curves(problem, settings, start + CURVE_SHARE * settings.time_limit_s, cache)
    table = option_table(problem, curves)
    solve_start = time.perf_counter()
    reserve_s = ANSWER_S + ANSWER_S_PER_JOB * len(problem.jobs)
    if settings.explain:
        reserve_s += EXPLAIN_SHARE * settings.time_limit_s
    solved = solve_plan(problem, table, settings, deadline - reserve_s)
    solve_wall_s = time.perf_counter() - solve_start
    result = _answer(problem, table, curves, solved, settings, deadline)
    explain_start = time.perf_counter()
    result = _explained(problem, table, solved, settings, deadline, result)
    stats = replace(
        result.stats,
        wall_s=time.perf_counter() - start,
        curve_wall_s=curves.wall_s,
        solve_wall_s=solve_wall_s,
        explain_wall_s=time.perf_counter() - explain_start,
    )
    return replace(result, stats=stats, warnings=released + result.warnings)


def _explained(
    problem: PlanProblem,
    table: OptionTable,
    solved: Solved,
    settings: PlanSettings,
    deadline: float,
    result: PlanResult,
) -> PlanResult:
    if result.status == "infeasible":
        try:
            conflict = conflicting.plan_conflict(problem, table, settings, deadline)
            return replace(result, conflict=conflict, explanations_complete=True)
        except CutShort:
            cut = "the time limit ran out before the conflict was narrowed down"
            return replace(result, warnings=(*result.warnings, cut))
    if not settings.explain or solved.assignment is None:
        return result
    short, values, done = explaining.explain_plan(
        problem, table, solved.assignment, settings, deadline
    )
    warnings = result.warnings
    if not done:
        warnings += ("the time limit ran out before every explanation was worked out",)
    return replace(
        result, shortfalls=short, node_values=values, explanations_complete=done, warnings=warnings
    )


def _change(problem: PlanProblem, table: OptionTable, j: int, o: int) -> str:
    job, option = problem.jobs[j], table.options[j][o]
    if job.running is None:
        return "waits" if option.point is None else "starts"
    if option.point is None:
        return "stops"
    if option.stays:
        return "stays"
    same_size = option.gpus == problem.running_gpus(job)
    return "moves" if same_size else "resizes"


def _job_plans(
    problem: PlanProblem,
    table: OptionTable,
    solved: Solved,
    settings: PlanSettings,
    deadline: float,
) -> tuple[JobPlan, ...]:
    """Each job's record: the answer itself, so built whole past the deadline (linear in
    nodes and jobs, within the documented margin) but for the optional reordering of its
    layout; CutShort once the stop signal is set."""
    assignment = solved.assignment
    if assignment is None:
        return ()
    cells = problem.cells() if problem.assign_nodes else ()
    named = name_nodes(problem, table, cells, assignment, settings.stop)
    plans = []
    for j, o in enumerate(assignment.choice):
        if settings.stop.stopped:
            raise CutShort()
        job, option = problem.jobs[j], table.options[j][o]
        score = table.scores[j][o]
        estimate, placement, pool = None, None, None
        if option.point is not None:
            pool = problem.pools[option.point.pool]
            estimate = option.point.estimate
            if estimate is not None and named[j]:
                reorder = not time_is_up(deadline, None)
                estimate, placement = lay_out(problem, j, pool, named[j], estimate, reorder)
        plans.append(
            JobPlan(
                job.name,
                None if pool is None else pool.name,
                None if pool is None else pool.gpu.name,
                option.gpus,
                named[j],
                estimate,
                placement,
                option.tokens_per_s,
                score.tokens_per_s,
                score.share,
                _change(problem, table, j, o),
                score.meets_deadline,
                job.engine_name,
                # the engine's verdict rides on the estimate, re-priced on its nodes
                None if pool is None or estimate is None else estimate.export,
            )
        )
    return tuple(plans)


def _objective(
    problem: PlanProblem, table: OptionTable, solved: Solved
) -> tuple[float | None, float | None, float | None, dict[str, float]]:
    """The objective in its own units, its bound, the relative gap, and its terms."""
    if solved.assignment is None:
        return None, None, None, {}
    scores = [table.scores[j][o] for j, o in enumerate(solved.assignment.choice)]
    terms = {
        "weighted_share": sum(s.worth for s in scores),
        "weighted_tokens_per_s": sum(s.weighted for s in scores),
        "fairness_sum": sum(s.fairness for s in scores),
        "met_weight": sum(
            job.weight for job, s in zip(problem.jobs, scores, strict=True) if s.meets_deadline
        ),
    }
    value = {
        "throughput": terms["weighted_share"],
        "tokens": terms["weighted_tokens_per_s"],
        "fairness": terms["fairness_sum"],
        "deadlines": terms["met_weight"],
    }[problem.objective]
    bound = None
    if solved.bound is not None:
        if problem.objective == "deadlines":
            due = sum(job.weight for job in problem.jobs if job.deadline is not None) or 1.0
            bound = (solved.bound // THROUGHPUT_LEVELS) / MET_LEVELS * due
        else:
            bound = solved.bound / objective_scale(problem, table)
    gap = None
    if solved.bound is not None and solved.value is not None:
        gap = max(solved.bound - solved.value, 0) / max(abs(solved.value), 1)
    return value, bound, gap, terms


def _claimed(
    curves: Curves, solved: Solved, settings: PlanSettings
) -> tuple[Status, bool, list[str]]:
    """The status the answer may claim (never more than was proved over every
    configuration), whether its bound stands, and the warnings that say why."""
    status: Status = solved.status
    bound_stands, warnings = True, []
    if not curves.complete:
        missing = sum(p.status in ("unknown", "not_priced") for p in curves.points)
        warnings.append(
            f"{missing} configuration(s) were not priced in time (see left_out): the plan is "
            "the best over the others, so nothing beyond feasible is claimed"
        )
        if status == "optimal":
            status, bound_stands = "feasible", False
        if status == "infeasible":  # proved over the priced configurations only
            status = "unknown"
    warnings += solved.notes
    if solved.from_greedy:
        warnings.append("the solver found no plan in time: this is the greedy plan")
    if status in ("optimal", "feasible") and not solved.tie_break_proved:
        warnings.append(
            "the tie-break was not proved in time: an equally good plan with other node ids "
            "may come back on another run"
        )
    if status == "unknown":
        warnings.append(
            f"status unknown: the time limit ({settings.time_limit_s:g} s) ran out before a "
            "plan or a proof that none exists (infeasibility is NOT proved)"
        )
    return status, bound_stands, warnings


def _answer(
    problem: PlanProblem,
    table: OptionTable,
    curves: Curves,
    solved: Solved,
    settings: PlanSettings,
    deadline: float,
) -> PlanResult:
    value, bound, gap, terms = _objective(problem, table, solved)
    status, bound_stands, warnings = _claimed(curves, solved, settings)
    if not bound_stands:
        bound, gap = None, None
    stats = PlanStats(
        0.0,
        0.0,
        0.0,
        0.0,
        status == "optimal",
        solved.topology_proved,
        solved.tie_break_proved,
        solved.solves,
        settings.workers,
        settings.seed,
        curves.optimize_calls,
        curves.cache_hits,
        table.count,
        solved.variables,
        solved.constraints,
        solved.branches,
        solved.from_greedy,
        solved.objective_s,
    )
    left_out = tuple(
        LeftOut(problem.jobs[p.job].name, problem.pools[p.pool].name, p.gpus, p.status, p.note)
        for p in curves.left_out
    )
    return PlanResult(
        status,
        problem.objective,
        value,
        bound,
        gap,
        terms,
        _job_plans(problem, table, solved, settings, deadline),
        stats,
        left_out=left_out,
        warnings=tuple(warnings),
        racks_spanned=solved.racks,
        value_units=solved.value,
    )
