"""What a search answers: its status, the layout with what binds it or the conflict, the
frontier, and the solver's figures. Both the search and the explanations build these."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from optimizer.costmodel import Estimate
from optimizer.search import KNOBS, LN_MFU_SCALE, MemoryFit, SearchProblem
from optimizer.ties import TiedLayout

# What was proved: the best (optimal), a layout short of that proof (feasible: with the
# solver's bound and gap), that none exists (infeasible: with the conflict), or neither
# (unknown: the time ran out first). A time-out is never infeasible.
Status = Literal["optimal", "feasible", "infeasible", "unknown"]


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
    # What was not worked out because its space is over the tables' size guard, each with why
    # (a time limit leaves this empty and explanations_complete false)
    explanations_skipped: tuple[str, ...] = ()
    # Whether explanations were worked out at all: not when the request turned them off
    # (explain false) or no layout came back to explain
    explained: bool = True
    # The best layouts tied with the optimum under its interval (optimizer.ties), each with
    # the mechanism it differs in, and how far their search went or why it was not made
    tied: tuple[TiedLayout, ...] = ()
    tied_note: str | None = None
    # The rule the layouts' memory was held to (optimizer.memory_fit); what it costs is the
    # relaxation named memory_fit, where explanations were worked out
    memory_fit: MemoryFit | None = None


@dataclass(frozen=True)
class ParetoResult:
    """Non-dominated layouts, memory ascending (and so MFU ascending). `proved`: the frontier
    is complete, every point proved; otherwise it is partial (or, empty, says nothing)."""

    frontier: tuple[Estimate, ...]
    wall_s: float
    proved: bool
    warnings: tuple[str, ...] = ()
    memory_fit: MemoryFit | None = None  # the rule each point's memory was held to

    @property
    def status(self) -> Status:
        return status_of(bool(self.frontier), self.proved)
