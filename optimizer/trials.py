"""Trial runs: the few launchable layouts whose measured step times settle a choice the cost
model cannot make on its own.

Under its interval (optimizer.uncertainty) the optimum is tied with every layout whose MFU is
within the interval's width of it: the model's misses in that regime are as large as their
gap. What would separate them is what they are charged differently for. A trial plan is the
optimum, then, from the tied layouts best first, the best one whose largest difference from
the optimum lies in a mechanism no earlier trial already tests (the pipeline bubble, the
tensor-parallel collectives, the data-parallel sync, recomputation...): each run measures the
mechanism its choice rests on, not the k best layouts by the model, which mostly differ in the
same way. Each trial comes with its artefact and how many steps to run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from models.errors import InvalidSpec
from models.layout import Layout
from optimizer import explain as explaining
from optimizer.costmodel import Estimate
from optimizer.request import Request
from optimizer.search import SolveSettings, enumerator
from optimizer.searches import finish_estimate, optimize, prepare_search
from optimizer.ties import deciding_mechanism, tie_words, tied_width, unplaced

DEFAULT_TRIALS = 3
MAX_TRIALS = 8
# Steps a trial runs: the first are dropped by the log parsers (compilation, the allocator's
# growth, NCCL's communicators), the median of the rest is the step time.
WARMUP_STEPS = 10
MEASURED_STEPS = 20
# The layouts the enumerator may price for a trial plan; a wider search is asked to narrow.
MAX_CANDIDATES = 2_000_000


@dataclass(frozen=True)
class Trial:
    name: str
    estimate: Estimate  # with its artefact (or why the engine refuses it) and interval
    steps: int
    why: str
    mechanism: str | None  # what it tests against the optimum; None for the optimum itself


@dataclass(frozen=True)
class TrialPlan:
    trials: tuple[Trial, ...]
    tied: int  # layouts within the optimum's interval, the optimum included
    status: str  # the optimum's: optimal, feasible, infeasible or unknown
    warnings: tuple[str, ...] = ()


def ranked_candidates(request: Request) -> list[tuple[Layout, float]]:
    """Every layout of the request's search that fits with its MFU, best first, one per
    layout up to its rank order (its best placement)."""
    problem, costs = prepare_search(request)
    size = math.prod(enumerator.grid_axes(problem))
    if size > MAX_CANDIDATES:
        raise InvalidSpec(
            f"the search spans {size:,} layouts, over the {MAX_CANDIDATES:,} a trial plan "
            "prices: fix a degree or narrow `search`",
            "search",
        )
    space = enumerator.price_space(problem, costs)
    rows = enumerator.tie_break_order(
        space, np.flatnonzero(enumerator.feasible(problem, space, frozenset()))
    )
    first: dict[Layout, tuple[Layout, float]] = {}
    for row in rows:
        layout = space.grid.layout(int(row))
        first.setdefault(unplaced(layout), (layout, space.mfu[row]))
    return list(first.values())


def plan_trials(
    request: Request, k: int = DEFAULT_TRIALS, budget: SolveSettings | None = None
) -> TrialPlan:
    """At most `k` trials that separate the layouts tied with the request's optimum."""
    found = optimize(replace(request, explain=False), budget)
    if found.best is None:
        return TrialPlan((), 0, found.status, found.warnings)
    optimum = found.best
    problem, costs = prepare_search(request)
    width = tied_width(optimum)
    trials = [
        Trial(
            "optimum",
            optimum,
            WARMUP_STEPS + MEASURED_STEPS,
            "the model's best layout: its measured step time checks the model where it matters",
            None,
        )
    ]
    candidates = ranked_candidates(request)
    tied = [layout for layout, mfu in candidates if optimum.mfu - float(mfu) <= width]
    for layout in tied:
        if len(trials) >= k:
            break
        other = explaining.priced(problem, layout, costs)
        if _same_layout(other.layout, optimum.layout):
            continue
        mechanism, ours, theirs = deciding_mechanism(optimum, other)
        if any(t.mechanism == mechanism for t in trials):
            continue
        trials.append(
            Trial(
                f"trial {len(trials)}",
                finish_estimate(request, other),
                WARMUP_STEPS + MEASURED_STEPS,
                _why(optimum.mfu - other.mfu, width, mechanism, ours, theirs),
                mechanism,
            )
        )
    return TrialPlan(tuple(trials), max(1, len(tied)), found.status, found.warnings)


def _same_layout(a: Layout, b: Layout) -> bool:
    return unplaced(a) == unplaced(b)


def _why(behind: float, width: float, mechanism: str, ours: float, theirs: float) -> str:
    return (
        f"{tie_words(behind, width, mechanism, ours, theirs)}: its measured step "
        f"time tells whether the model charges {mechanism} right"
    )
