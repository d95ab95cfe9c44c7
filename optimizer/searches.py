"""The optimiser's front door: the best layout with a proof and why, and the memory/MFU
frontier, each saying exactly what was proved.

Every figure in a result is recomputed by the cost model (`costmodel.evaluate`) from the
layout the solver chose; the solver's scaled integers only decide which layout that is.
"""

from __future__ import annotations

import time
from dataclasses import replace

from models.job import TrainingJob
from models.layout import Layout
from optimizer import explain as explaining
from optimizer import staging
from optimizer.costmodel import (
    CostAssumptions,
    Estimate,
    evaluate,
    profile_named,
)
from optimizer.costmodel.warnings import calibration_warnings
from optimizer.engines import engine_assumptions, engine_placed, get_engine, judged
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
    SearchSpace,
    SolveSettings,
    StopSignal,
    best_layout_by_ceilings,
    narrowed,
    resolve_space,
)

# Every route prices with the profile that charges every knob a search turns, so that an
# answer's layout evaluated again gives the answer's figures; the plate is asked for by name.
DEFAULT_PROFILE = "standard"


def prepared(
    job: TrainingJob,
    space: SearchSpace | None,
    profile: str,
    assumptions: CostAssumptions | None,
    engine: str | None,
) -> tuple[SearchProblem, CostAssumptions]:
    """The search problem with the engine's rules, and the assumptions priced as the engine
    runs (its gradient sync); no engine: no engine's rules, the engine-agnostic figures."""
    profile_named(profile)
    costs = priced_assumptions(assumptions, engine)
    runs_on = None if engine is None else get_engine(engine)
    problem = resolve_space(job, space or SearchSpace(), profile, runs_on)
    beyond = tuple(calibration_warnings(job, costs, engine))
    return replace(problem, warnings=problem.warnings + beyond), costs


def priced_assumptions(assumptions: CostAssumptions | None, engine: str | None) -> CostAssumptions:
    """The request's assumptions with `engine`'s way of running laid under them (its gradient
    sync, kernels, overlaps); no engine: the engine-agnostic figures."""
    costs = assumptions or CostAssumptions()
    return costs if engine is None else engine_assumptions(get_engine(engine), costs)


def evaluate_on(
    job: TrainingJob,
    layout: Layout,
    profile: str = DEFAULT_PROFILE,
    assumptions: CostAssumptions | None = None,
    engine: str | None = None,
) -> Estimate:
    """One layout priced as `engine` runs it (its gradient sync; its default rank order when
    the layout names none); the rules it breaks are the caller's to report
    (optimizer.engines.violations)."""
    costs = priced_assumptions(assumptions, engine)
    if engine is not None:
        layout = engine_placed(layout, get_engine(engine))
    estimate = evaluate(job, layout, profile, costs)
    beyond = tuple(calibration_warnings(job, costs, engine))
    estimate = replace(estimate, warnings=estimate.warnings + beyond) if beyond else estimate
    return with_verdict(job, estimate, engine, assumptions)


def with_verdict(
    job: TrainingJob,
    estimate: Estimate,
    engine: str | None,
    assumptions: CostAssumptions | None,
) -> Estimate:
    """The estimate with its engine's verdict (broken rules, artefact or refusal); as it is
    when no engine was asked. The selective module list is the request's, where it names one."""
    if engine is None:
        return estimate
    modules = None if assumptions is None else assumptions.selective_recompute_modules
    return judged(get_engine(engine), job, estimate, modules)


def optimize(
    job: TrainingJob,
    space: SearchSpace | None = None,
    profile: str = DEFAULT_PROFILE,
    assumptions: CostAssumptions | None = None,
    time_limit_s: float = 10.0,
    workers: int = 1,
    explain: bool = True,
    stop: StopSignal | None = None,
    engine: str | None = None,
) -> OptimizeResult:
    """The layout of highest MFU that fits, proved optimal within the time limit, and why.

    `time_limit_s` bounds the whole call: the explanations get what the optimum leaves.
    `stop`, set from another thread, ends it early with what was proved by then. `engine`
    (a name of optimizer.engines.ENGINES) adds its rules and prices its gradient sync."""
    problem, costs = prepared(job, space, profile, assumptions, engine)
    stop = stop or StopSignal()
    start = time.perf_counter()
    budget = explaining.Budget(start + time_limit_s, workers, stop)
    settings = SolveSettings(time_limit_s, workers, stop)
    # the layouts that cannot win are left out; the explanations price what they need
    found = best_layout_by_ceilings(narrowed(problem), costs, settings)
    wall_s = time.perf_counter() - start
    status = status_of(found.layout is not None, found.proved)
    warnings = problem.warnings
    if status == "unknown":
        warnings += (unknown_warning(problem, time_limit_s, stop.stopped),)
    best = None if found.layout is None else explaining.priced(problem, found.layout, costs)
    explained = explaining.Explanation()
    complete = False
    if explain and status != "unknown":
        explained = explaining.explain(problem, best, costs, budget)
        complete = not explained.warnings  # its only warnings: cut short, or skipped
    if best is not None:
        best = with_verdict(job, best, engine, assumptions)
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
    )


def pareto(
    job: TrainingJob,
    space: SearchSpace | None = None,
    profile: str = DEFAULT_PROFILE,
    assumptions: CostAssumptions | None = None,
    time_limit_s: float = 30.0,
    workers: int = 1,
    stop: StopSignal | None = None,
    engine: str | None = None,
) -> ParetoResult:
    """The exact memory/MFU frontier by epsilon-constraint solves, memory ascending; when
    time runs out first, the part found so far (its high-memory end), said to be partial."""
    from optimizer.search import SolveSettings, frontier

    problem, costs = prepared(job, space, profile, assumptions, engine)
    stop = stop or StopSignal()
    start = time.perf_counter()
    settings = SolveSettings(time_limit_s, workers, stop)
    layouts, proved = frontier(narrowed(problem), costs, settings)
    estimates = tuple(
        with_verdict(job, explaining.priced(problem, layout, costs), engine, assumptions)
        for layout in layouts
    )
    warnings = problem.warnings + refused_points(estimates, engine)
    if not proved and estimates:
        warnings += (
            f"the frontier is partial: the time limit ({time_limit_s:g} s) ran out after "
            f"{len(estimates)} point{'s' if len(estimates) > 1 else ''}; layouts of less memory "
            f"than {estimates[0].memory.total / 1e9:.2f} GB may be missing",
        )
    elif not proved:
        warnings += (unknown_warning(problem, time_limit_s, stop.stopped),)
    return ParetoResult(estimates, time.perf_counter() - start, proved, warnings)


def refused_points(estimates: tuple[Estimate, ...], engine: str | None) -> tuple[str, ...]:
    """One warning counting the frontier points the engine refuses (each point names why)."""
    refused = sum(e.export_error is not None for e in estimates)
    if not refused or engine is None:
        return ()
    label = get_engine(engine).label
    return (
        f"{refused} of {len(estimates)} frontier points break {label}'s rules "
        "(each point's warnings name them)",
    )


def stage_plans(
    job: TrainingJob,
    space: SearchSpace | None = None,
    assumptions: CostAssumptions | None = None,
    time_limit_s: float = 10.0,
    workers: int = 1,
    stop: StopSignal | None = None,
    engine: str | None = None,
    per_stage_recompute: bool | None = None,
) -> staging.StageSearch:
    """The layout and stage plan (layers and recompute mode of each pipeline rank) of least
    step time, under profile standard, proved within the time limit (optimizer.staging)."""
    problem, costs = prepared(job, space, DEFAULT_PROFILE, assumptions, engine)
    return staging.search_stage_plans(
        problem, costs, time_limit_s, workers, stop, per_stage_recompute, engine
    )
