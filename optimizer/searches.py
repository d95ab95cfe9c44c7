"""The optimiser's front doors: a layout priced, the best layout with a proof and why, the
memory/MFU frontier and the stage plans, each saying exactly what was proved. Each takes the
one `Request` (optimizer.request) and, where it searches, a budget (`SolveSettings`: time
limit, CP-SAT workers, stop signal).

Every figure in a result is recomputed by the cost model (`costmodel.evaluate`) from the
layout the solver chose; the solver's scaled integers only decide which layout that is.
"""

from __future__ import annotations

import time
from dataclasses import replace

from models.errors import InvalidSpec
from optimizer import explain as explaining
from optimizer import staging
from optimizer.costmodel import CostAssumptions, Estimate, evaluate, profile_named
from optimizer.engines import engine_placed, judged
from optimizer.memory_fit import held_to_request, memory_margin_warning
from optimizer.request import DEFAULT_PROFILE, Request
from optimizer.results import (
    OptimizeResult,
    ParetoResult,
    SolverStats,
    mfu_bound,
    relative_gap,
    status_of,
    unknown_warning,
)
from optimizer.search import (
    SearchProblem,
    SolveSettings,
    best_layout_by_ceilings,
    frontier,
    narrow_to_rules,
    resolve_space,
)
from optimizer.ties import TiedLayout, tied_layouts
from optimizer.uncertainty import RESIDUALS_PROFILE, with_interval


def prepare_search(request: Request) -> tuple[SearchProblem, CostAssumptions]:
    """The request's search problem with its engine's rules (none without an engine) and its
    memory rule (optimizer.memory_fit), and the assumptions it is priced under."""
    profile_named(request.profile)
    problem = resolve_space(request.job, request.space, request.profile, request.engine)
    problem = held_to_request(problem, request)
    return replace(problem, warnings=problem.warnings + request.notes), request.priced


def evaluate_on(request: Request) -> Estimate:
    """The request's layout priced as its engine runs it (its gradient sync; its default rank
    order when the layout names none), with the engine's verdict on it."""
    if request.layout is None:
        raise InvalidSpec("evaluate prices a layout: the request gives none", "layout")
    layout = request.layout
    if request.engine is not None:
        layout = engine_placed(layout, request.engine)
    estimate = evaluate(request.job, layout, request.profile, request.priced)
    beyond = request.notes  # an engine release or calibration priced from elsewhere
    estimate = replace(estimate, warnings=estimate.warnings + beyond) if beyond else estimate
    return finish_estimate(request, estimate)


def finish_estimate(request: Request, estimate: Estimate) -> Estimate:
    """The estimate as every answer carries it: with its engine's verdict (broken rules,
    artefact or refusal; none when no engine was asked; the selective module list is the
    request's, where it names one) and, under the profile the published runs were priced
    with, the interval their residuals give it."""
    if request.profile == RESIDUALS_PROFILE:
        precision = request.job.training.precision
        estimate = with_interval(estimate, request.job, request.engine_name, precision)
        estimate = replace(estimate, warnings=estimate.warnings + memory_margin_warning(estimate))
    if request.engine is None:
        return estimate
    return judged(request.engine, request.job, estimate, request.recompute_modules)


def optimize(request: Request, budget: SolveSettings | None = None) -> OptimizeResult:
    """The layout of highest MFU that fits, proved optimal within the time limit, and why
    (unless the request asks for the layout alone).

    `budget` (time limit, CP-SAT workers, stop signal) is the caller's: its time limit
    bounds the whole call, the explanations getting what the optimum leaves; its stop, set
    from another thread, ends it early with what was proved by then."""
    settings = budget or SolveSettings()
    time_limit_s, workers, stop = settings.time_limit_s, settings.workers, settings.stop
    (problem, costs), explain = prepare_search(request), request.explain
    start = time.perf_counter()
    left = explaining.Budget(start + time_limit_s, workers, stop)
    # the layouts that cannot win are left out; the explanations price what they need
    found = best_layout_by_ceilings(narrow_to_rules(problem), costs, settings)
    wall_s = time.perf_counter() - start
    status = status_of(found.layout is not None, found.proved)
    warnings = problem.warnings
    if status == "unknown":
        warnings += (unknown_warning(problem, time_limit_s, stop.stopped),)
    best = None if found.layout is None else explaining.priced(problem, found.layout, costs)
    explained = explaining.Explanation()
    complete = False
    if explain and status != "unknown":
        explained = explaining.explain(problem, best, costs, left)
        complete = not explained.warnings  # its only warnings: cut short, or skipped
    if best is not None:
        best = finish_estimate(request, best)
    tied: tuple[TiedLayout, ...] = ()
    tied_note = None
    if explain and best is not None and status != "unknown":
        tied, tied_note = ties_of(request, problem, costs, best, start + time_limit_s)
    bound = mfu_bound(found.bound_ln_mfu)
    if status == "optimal" and best is not None:
        bound = best.mfu  # the proof's bound is the optimum itself
    stats = SolverStats(
        wall_s,
        found.proved,
        found.solves,
        workers,
        time.perf_counter() - start - wall_s,
        bound=bound,
        gap=relative_gap(None if best is None else best.mfu, bound),
    )
    return OptimizeResult(
        status,
        best,
        binding=explained.binding,
        slack=explained.slack,
        conflict=explained.conflict,
        warnings=warnings + explained.warnings + (() if best is None else best.warnings),
        solver=stats,
        relaxations=explained.relaxations,
        choices=explained.choices,
        explanations_complete=complete,
        explanations_skipped=explained.skipped,
        explained=explain and status != "unknown",
        tied=tied,
        tied_note=tied_note,
        memory_fit=problem.memory_fit,
    )


def ties_of(
    request: Request,
    problem: SearchProblem,
    costs: CostAssumptions,
    optimum: Estimate,
    deadline: float,
) -> tuple[tuple[TiedLayout, ...], str]:
    """The layouts tied with the optimum, each with its interval, and how far their search
    went; none where the profile gives no interval."""
    if request.profile != RESIDUALS_PROFILE:
        return (), f"profile {request.profile} gives no interval, so no ties are worked out"
    ties = tied_layouts(problem, costs, optimum, deadline)
    job, engine, precision = request.job, request.engine_name, request.job.training.precision
    return tuple(
        replace(tie, estimate=with_interval(tie.estimate, job, engine, precision))
        for tie in ties.layouts
    ), ties.note


def pareto(request: Request, budget: SolveSettings | None = None) -> ParetoResult:
    """The exact memory/MFU frontier by epsilon-constraint solves, memory ascending; when
    time runs out first, the part found so far (its high-memory end), said to be partial."""
    settings = budget or SolveSettings()
    time_limit_s, stop = settings.time_limit_s, settings.stop
    problem, costs = prepare_search(request)
    start = time.perf_counter()
    layouts, proved = frontier(narrow_to_rules(problem), costs, settings)
    estimates = tuple(
        finish_estimate(request, explaining.priced(problem, layout, costs)) for layout in layouts
    )
    warnings = problem.warnings + refused_points(estimates, request)
    if not proved and estimates:
        warnings += (
            f"the frontier is partial: the time limit ({time_limit_s:g} s) ran out after "
            f"{len(estimates)} point{'s' if len(estimates) > 1 else ''}; layouts of less memory "
            f"than {estimates[0].memory.total / 1e9:.2f} GB may be missing",
        )
    elif not proved:
        warnings += (unknown_warning(problem, time_limit_s, stop.stopped),)
    wall_s = time.perf_counter() - start
    return ParetoResult(estimates, wall_s, proved, warnings, problem.memory_fit)


def refused_points(estimates: tuple[Estimate, ...], request: Request) -> tuple[str, ...]:
    """One warning counting the frontier points the engine refuses (each point names why)."""
    refused = sum(e.export_error is not None for e in estimates)
    if not refused or request.engine is None:
        return ()
    label = request.engine.label
    return (
        f"{refused} of {len(estimates)} frontier points break {label}'s rules "
        "(each point's warnings name them)",
    )


def stage_plans(request: Request, budget: SolveSettings | None = None) -> staging.StageSearch:
    """The layout and stage plan (layers and recompute mode of each pipeline rank) of least
    step time, under profile standard, proved within the time limit (optimizer.staging)."""
    settings = budget or SolveSettings()
    problem, costs = prepare_search(replace(request, profile=DEFAULT_PROFILE))
    found = staging.search_stage_plans(
        problem,
        costs,
        settings.time_limit_s,
        settings.workers,
        settings.stop,
        request.per_stage_recompute,
        request.engine_name,
    )
    return replace(found, memory_fit=problem.memory_fit)
