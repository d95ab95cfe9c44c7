"""How sure an estimate is: the range its measured step time, MFU and memory are expected in,
from how far the cost model missed the published runs of the same regime.

Each priced row leaves a residual: its MFU miss in points, the ratio of its measured step
time to the predicted one and, where it reports a peak, of its measured memory to the
predicted. The rows are priced as in the leave-one-source-out report (each source's rows
with the row-chosen defaults chosen without it), so a residual is a miss on work the
defaults were not chosen on. An estimate's interval takes the residuals of its regime
(engine, GPU generation, precision, dense or MoE, scale), widened until at least MIN_ROWS
rows bear on it, and their split-conformal bounds: with n residuals, the k-th smallest and
largest, k = ceil((n + 1)(1 + coverage) / 2), which cover a new exchangeable run with
probability at least `coverage` (Vovk et al., Algorithmic Learning in a Random World, 2005;
Lei et al., Distribution-Free Predictive Inference for Regression, JASA 2018), with n
counted in sources rather than rows, since a source's rows miss together.

The residuals are data (`models/presets/residuals.json`), written by `layoutopt validate
--residuals` beside docs/validation.md and checked current by the tests, so pricing never
re-runs the validation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cache
from importlib import resources

from models.job import TrainingJob
from optimizer.costmodel import Estimate, Interval
from optimizer.uncertainty.regimes import Regime, regime_of

COVERAGE = 0.8
# The profile the published runs are priced under (optimizer.validation): its estimates alone
# have residuals to go by.
RESIDUALS_PROFILE = "standard"
# The fewest residuals, and sources, an interval rests on: with fewer, the conformal bound is
# the sample's extreme and says little, so the regime is widened.
MIN_ROWS = 10
MIN_SOURCES = 3
RESIDUALS_FILE = "presets/residuals.json"


@dataclass(frozen=True)
class Residual:
    """One published row's miss."""

    regime: Regime
    source: str
    # measured minus predicted utilisation, in fractions (0.01 = 1 point), and measured step
    # time over predicted, where the row reports a utilisation or throughput
    mfu_points: float | None
    step_ratio: float | None
    memory_ratio: float | None  # measured peak over predicted, where the row reports one


def conformal_bounds(
    values: Sequence[float], sources: int | None = None, coverage: float = COVERAGE
) -> tuple[float, float]:
    """The split-conformal interval of `values` at `coverage`. Rows of one source miss
    together (one engine build, one cluster, one way of counting), so the sample counts as
    many draws as it has `sources`: the order statistic is taken at the level
    ceil((s + 1)(1 + coverage) / 2) / s of s sources (s = len(values) when None), capped at
    the sample's extremes."""
    ordered = sorted(values)
    n = len(ordered)
    draws = n if sources is None else sources
    level = min(1.0, math.ceil((draws + 1) * (1 + coverage) / 2) / draws)
    k = min(n, max(1, math.ceil(level * n)))
    return ordered[n - k], ordered[k - 1]


def nearest(residuals: Sequence[Residual], regime: Regime) -> tuple[Regime, list[Residual]]:
    """The narrowest widening of `regime` that at least MIN_ROWS residuals from MIN_SOURCES
    sources fall in (every residual if none does)."""
    for widened in regime.widened():
        matched = [r for r in residuals if widened.holds(r.regime)]
        if len(matched) >= MIN_ROWS and len({r.source for r in matched}) >= MIN_SOURCES:
            return widened, matched
    return regime.widened()[-1], list(residuals)


def bounds_of(rows: Sequence[Residual], field: str) -> tuple[float, float]:
    """The conformal bounds of one residual field over `rows`, counted by their sources."""
    values = [getattr(r, field) for r in rows]
    return conformal_bounds(values, len({r.source for r in rows}))


@dataclass(frozen=True)
class Bounds:
    """What a regime's residuals give any estimate of it: the MFU bounds in points, the step
    time's and memory's as ratios, and on what they rest."""

    mfu_points: tuple[float, float]
    step_ratio: tuple[float, float]
    memory_ratio: tuple[float, float] | None
    basis: str


# A basis names the memory rows after this, following the timed rows (bounds_for).
MEMORY_BASIS = "memory: "


def memory_basis(basis: str) -> str:
    """The runs a basis's memory bounds rest on ('' where none reports a peak)."""
    return basis.partition(MEMORY_BASIS)[2]


def bounds_for(regime: Regime, residuals: Sequence[Residual]) -> Bounds | None:
    """The bounds `residuals` give an estimate of `regime`; None where none bears on time."""
    timed = [r for r in residuals if r.mfu_points is not None and r.step_ratio is not None]
    if not timed:
        return None
    rows_regime, rows = nearest(timed, regime)
    basis = f"{len(rows)} published runs ({rows_regime.words()})"
    memory = [r for r in residuals if r.memory_ratio is not None]
    memory_ratio = None
    if memory:
        memory_regime, memory_rows = nearest(memory, regime)
        memory_ratio = bounds_of(memory_rows, "memory_ratio")
        basis += f"; {MEMORY_BASIS}{len(memory_rows)} with a peak ({memory_regime.words()})"
    return Bounds(bounds_of(rows, "mfu_points"), bounds_of(rows, "step_ratio"), memory_ratio, basis)


def interval_of(
    estimate: Estimate, regime: Regime, residuals: Sequence[Residual]
) -> Interval | None:
    """The estimate's interval from `residuals`, None where there are none."""
    return applied(estimate, bounds_for(regime, residuals))


def applied(estimate: Estimate, bounds: Bounds | None) -> Interval | None:
    """`bounds` laid around the estimate's figures."""
    if bounds is None:
        return None
    mfu_lo, mfu_hi = bounds.mfu_points
    step_lo, step_hi = bounds.step_ratio
    memory_gb = None
    if bounds.memory_ratio is not None:
        total_gb = estimate.memory.total / 1e9
        memory_gb = (total_gb * bounds.memory_ratio[0], total_gb * bounds.memory_ratio[1])
    return Interval(
        step_time_s=(estimate.step_time_s * step_lo, estimate.step_time_s * step_hi),
        mfu=(max(0.0, estimate.mfu + mfu_lo), estimate.mfu + mfu_hi),
        memory_gb=memory_gb,
        coverage=COVERAGE,
        basis=bounds.basis,
    )


@cache
def published_bounds(regime: Regime) -> Bounds | None:
    """The shipped residuals' bounds for `regime` (worked out once per regime a process sees)."""
    return bounds_for(regime, published_residuals())


def memory_upper_ratio(
    job: TrainingJob, engine: str | None, precision: str
) -> tuple[float, str] | None:
    """The upper end of the memory interval over the point estimate for jobs of this regime,
    and the runs it rests on; None where no published run of a like regime reports a peak.
    Known before any layout is priced: the searches hold the point estimate under the limit
    over it (optimizer.memory_fit)."""
    bounds = published_bounds(regime_of(job, engine, precision))
    if bounds is None or bounds.memory_ratio is None:
        return None
    return bounds.memory_ratio[1], memory_basis(bounds.basis)


def with_interval(
    estimate: Estimate, job: TrainingJob, engine: str | None, precision: str
) -> Estimate:
    """`estimate` with its interval from the published residuals of its regime."""
    regime = regime_of(job, engine, precision)
    return replace(estimate, interval=applied(estimate, published_bounds(regime)))


# --- the data file --------------------------------------------------------------------------


def residuals_json(residuals: Iterable[Residual]) -> str:
    """The residuals as `models/presets/residuals.json` holds them."""
    rows = [asdict(r) | {"regime": asdict(r.regime)} for r in residuals]
    about = (
        "Written by `layoutopt validate --residuals` (make validate): each priced published "
        "run's miss, as optimizer/validation/intervals.py reads them. Do not edit by hand."
    )
    return json.dumps({"_about": about, "residuals": rows}, indent=1) + "\n"


def parse_residuals(text: str) -> tuple[Residual, ...]:
    rows = json.loads(text)["residuals"]
    return tuple(Residual(**(row | {"regime": Regime(**row["regime"])})) for row in rows)


@cache
def published_residuals() -> tuple[Residual, ...]:
    """The residuals file as shipped (read once per process)."""
    path = resources.files("models").joinpath(RESIDUALS_FILE)
    return parse_residuals(path.read_text()) if path.is_file() else ()
