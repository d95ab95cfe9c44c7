"""The optimiser's front door: the best layout with a proof and why, and the memory/MFU frontier.

Every figure in a result is recomputed by the cost model (`cost_model.evaluate`) from the
layout the solver chose; the solver's scaled integers only decide which layout that is.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

from models.job import TrainingJob
from optimizer.assumptions import CostAssumptions
from optimizer.cost_model import profile_named
from optimizer.estimate import Estimate
from optimizer.space import KNOBS, SearchProblem, SearchSpace, narrowed, resolve_space
from optimizer.stopping import StopSignal

# What was proved: the best (optimal), a layout short of that proof (feasible: with the
# solver's bound and gap), that none exists (infeasible: with the conflict), or neither
# (unknown: the time ran out first). A time-out is never infeasible.
Status = Literal["optimal", "feasible", "infeasible", "unknown"]
# Searches price with the profile that charges every knob they turn; evaluate keeps workshop.
DEFAULT_SEARCH_PROFILE = "standard"


@dataclass(frozen=True)
class Relaxation:
    """What relaxing one rule would buy: the best MFU and layout without it."""

    name: str  # "memory_limit", "kv_heads", "max_vpp", "zero_stages", "fixed_tp", "node_size", ...
    description: str  # in words, with the numbers
    relaxed_mfu: float | None  # None when it does not bind
    relaxed: Estimate | None
    binds: bool = True  # whether relaxing it raises the best MFU
    # For the memory limit: the least-memory layout that beats the optimum at all, i.e.
    # the smallest raise of the limit that buys anything.
    step_up: Estimate | None = None


@dataclass(frozen=True)
class Choice:
    """What one of the optimum's less common choices buys: the best layout without it."""

    name: str  # "context_parallel", "expert_parallel", "schedule", "interleaving", ...
    description: str  # in words, with the numbers
    without_mfu: float | None = None  # None: nothing fits without it
    without: Estimate | None = None


@dataclass(frozen=True)
class Slack:
    """How far the chosen layout is from one constraint's bound (in the constraint's unit)."""

    name: str
    value: float
    limit: float
    slack: float
    unit: str
    description: str


@dataclass(frozen=True)
class Conflict:
    """One member of a minimal set of rules that cannot hold together."""

    name: str
    description: str


@dataclass(frozen=True)
class SolverStats:
    wall_s: float
    proved_optimal: bool
    solves: int
    workers: int
    explain_wall_s: float = 0.0
    # The most MFU any layout of the search could reach, as far as the solver proved (the
    # optimum's own MFU once proved), and the relative gap of the answer to it.
    bound: float | None = None
    gap: float | None = None


def status_of(has_layout: bool, proved: bool) -> Status:
    if has_layout:
        return "optimal" if proved else "feasible"
    return "infeasible" if proved else "unknown"


def mfu_bound(bound_ln_mfu: int | None) -> float | None:
    """The solver's bound on ln(MFU), in its scaled units, as an MFU (capped at 1)."""
    from optimizer.cpsat_tables import LN_MFU_SCALE

    if bound_ln_mfu is None:
        return None
    return min(math.exp(bound_ln_mfu / LN_MFU_SCALE), 1.0)


def relative_gap(mfu: float | None, bound: float | None) -> float | None:
    if mfu is None or bound is None or bound <= 0:
        return None
    return max(bound - mfu, 0.0) / bound


def unknown_warning(problem: SearchProblem, time_limit_s: float, stopped: bool) -> str:
    """What was searched and how to get an answer, when neither a layout nor a proof came."""
    why = "the search was stopped" if stopped else f"the time limit ({time_limit_s:g} s) ran out"
    knobs = ", ".join(f"{len(problem.knobs[k])} {k}" for k in KNOBS if len(problem.knobs[k]) > 1)
    return (
        f"status unknown: {why} before a layout or a proof that none exists was found "
        f"(infeasibility is NOT proved); the search spans {len(problem.degrees)} "
        f"(tp, pp, cp, dp) tuples x {knobs or 'no free knobs'} x placements. To get an "
        "answer: allow more time (time_limit_s) or narrow the search (fix tp, pp or cp; "
        "fewer micro_batches, max_vpp, zero_stages, schedules)"
    )


@dataclass(frozen=True)
class OptimizeResult:
    status: Status
    best: Estimate | None
    binding: tuple[Relaxation, ...] = ()  # the relaxations that bind
    slack: tuple[Slack, ...] = ()
    conflict: tuple[Conflict, ...] = ()
    warnings: tuple[str, ...] = ()
    solver: SolverStats = field(default_factory=lambda: SolverStats(0.0, False, 0, 1))
    relaxations: tuple[Relaxation, ...] = ()  # every relaxable rule of the request, bound or not
    choices: tuple[Choice, ...] = ()  # the optimum's less common choices, each with its price
    # Every relaxation, choice or conflict was worked out within the time limit: only then
    # does an empty `binding` mean that nothing holds the optimum back
    explanations_complete: bool = False


@dataclass(frozen=True)
class ParetoResult:
    """Non-dominated layouts, memory ascending (and so MFU ascending). `proved`: the frontier
    is complete, every point proved; otherwise it is partial (or, empty, says nothing)."""

    frontier: tuple[Estimate, ...]
    wall_s: float
    proved: bool
    warnings: tuple[str, ...] = ()

    @property
    def status(self) -> Status:
        return status_of(bool(self.frontier), self.proved)


def optimize(
    job: TrainingJob,
    space: SearchSpace | None = None,
    profile: str = DEFAULT_SEARCH_PROFILE,
    assumptions: CostAssumptions | None = None,
    time_limit_s: float = 10.0,
    workers: int = 1,
    explain: bool = True,
    stop: StopSignal | None = None,
) -> OptimizeResult:
    """The layout of highest MFU that fits, proved optimal within the time limit, and why.

    `time_limit_s` bounds the whole call: the explanations get what the optimum leaves.
    `stop`, set from another thread, ends it early with what was proved by then."""
    from optimizer import explain as explaining
    from optimizer.cpsat_solve import SolveSettings, best_layout

    profile_named(profile)
    problem = resolve_space(job, space or SearchSpace(), profile)
    costs = assumptions or CostAssumptions()
    stop = stop or StopSignal()
    start = time.perf_counter()
    budget = explaining.Budget(start + time_limit_s, workers, stop)
    found = best_layout(narrowed(problem), costs, SolveSettings(time_limit_s, workers, stop))
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
    )


def pareto(
    job: TrainingJob,
    space: SearchSpace | None = None,
    profile: str = DEFAULT_SEARCH_PROFILE,
    assumptions: CostAssumptions | None = None,
    time_limit_s: float = 30.0,
    workers: int = 1,
    stop: StopSignal | None = None,
) -> ParetoResult:
    """The exact memory/MFU frontier by epsilon-constraint solves, memory ascending; when
    time runs out first, the part found so far (its high-memory end), said to be partial."""
    from optimizer.cpsat_solve import SolveSettings
    from optimizer.explain import priced
    from optimizer.frontier import frontier

    profile_named(profile)
    problem = resolve_space(job, space or SearchSpace(), profile)
    costs = assumptions or CostAssumptions()
    stop = stop or StopSignal()
    start = time.perf_counter()
    settings = SolveSettings(time_limit_s, workers, stop)
    layouts, proved = frontier(narrowed(problem), costs, settings)
    estimates = tuple(priced(problem, layout, costs) for layout in layouts)
    warnings = problem.warnings
    if not proved and estimates:
        warnings += (
            f"the frontier is partial: the time limit ({time_limit_s:g} s) ran out after "
            f"{len(estimates)} point{'s' if len(estimates) > 1 else ''}; layouts of less memory "
            f"than {estimates[0].memory.total / 1e9:.2f} GB may be missing",
        )
    elif not proved:
        warnings += (unknown_warning(problem, time_limit_s, stop.stopped),)
    return ParetoResult(estimates, time.perf_counter() - start, proved, warnings)
