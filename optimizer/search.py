"""The optimiser's front door: the best layout with a proof and why, and the memory/MFU frontier.

Every figure in a result is recomputed by the cost model (`cost_model.evaluate`) from the
layout the solver chose; the solver's scaled integers only decide which layout that is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from models.job import TrainingJob
from optimizer.assumptions import CostAssumptions
from optimizer.cost_model import profile_named
from optimizer.estimate import Estimate
from optimizer.space import SearchSpace, narrowed, resolve_space

Status = Literal["optimal", "feasible", "infeasible"]
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
    """Non-dominated layouts, memory ascending (and so MFU ascending)."""

    frontier: tuple[Estimate, ...]
    wall_s: float
    proved: bool
    warnings: tuple[str, ...] = ()


def optimize(
    job: TrainingJob,
    space: SearchSpace | None = None,
    profile: str = DEFAULT_SEARCH_PROFILE,
    assumptions: CostAssumptions | None = None,
    time_limit_s: float = 10.0,
    workers: int = 1,
    explain: bool = True,
) -> OptimizeResult:
    """The layout of highest MFU that fits, proved optimal within the time limit, and why.

    `time_limit_s` bounds the whole call: the explanations get what the optimum leaves."""
    from optimizer import explain as explaining
    from optimizer.cpsat_solve import SolveSettings, best_layout

    profile_named(profile)
    problem = resolve_space(job, space or SearchSpace(), profile)
    costs = assumptions or CostAssumptions()
    start = time.perf_counter()
    budget = explaining.Budget(start + time_limit_s, workers)
    found = best_layout(narrowed(problem), costs, SolveSettings(time_limit_s, workers))
    wall_s = time.perf_counter() - start
    warnings = problem.warnings
    if found.layout is None and not found.proved:
        warnings += (
            f"the time limit ({time_limit_s:g} s) ran out before a layout or a proof that none "
            "exists was found: infeasibility is NOT proved",
        )
    best = None if found.layout is None else explaining.priced(problem, found.layout, costs)
    explained = explaining.Explanation()
    complete = False
    if explain and (best is not None or found.proved):
        explained = explaining.explain(problem, best, costs, budget)
        complete = not explained.warnings  # its only warnings: cut short, or skipped
    stats = SolverStats(
        wall_s, found.proved, found.solves, workers, time.perf_counter() - start - wall_s
    )
    status: Status = "infeasible" if best is None else "optimal" if found.proved else "feasible"
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
) -> ParetoResult:
    """The exact memory/MFU frontier by epsilon-constraint solves, memory ascending."""
    from optimizer.cpsat_solve import SolveSettings
    from optimizer.frontier import frontier

    profile_named(profile)
    problem = resolve_space(job, space or SearchSpace(), profile)
    costs = assumptions or CostAssumptions()
    start = time.perf_counter()
    layouts, proved = frontier(narrowed(problem), costs, SolveSettings(time_limit_s, workers))
    from optimizer.explain import priced

    estimates = tuple(priced(problem, layout, costs) for layout in layouts)
    return ParetoResult(estimates, time.perf_counter() - start, proved, problem.warnings)
