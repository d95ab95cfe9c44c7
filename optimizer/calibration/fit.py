"""Fit the cost model's named assumptions to measured runs, as Pollux/AdaptDL fits its
throughput model (adaptdl/goodput.py): minimise the RMS log error of step times with
scipy.optimize, within bounds, pulled towards the defaults as a prior would (the fewer the
runs, the harder: `prior_weight`), and pin what the runs cannot identify.

Which assumptions are fitted is decided before the fit, from the runs alone:

1. an assumption a run's request sets is a fact of that run: pinned;
2. one no run's step time depends on (over its whole range) is pinned: nothing measures it;
3. one whose knob the runs do not vary (a dp overlap from runs at one dp) is pinned;
4. n runs fit at most n - 1 assumptions (one with a single run: `most_freed`), freed in
   PARAMETERS' order: a fit with as many unknowns as runs passes through every run whatever
   else the model misses, and so absorbs it;
5. one whose effect on the runs is (nearly) a combination of those already freed is pinned:
   the runs cannot tell them apart;
6. of those freed, only as many (in order) as lower the leave-one-out error are kept: with
   two or more runs, each prefix of the freed list is fitted to all runs but one and scored
   on the one left out, and a parameter that does not improve that score is pinned (three
   runs fitted with three parameters fit themselves, and predict others worse than the
   defaults).

After the fit, an assumption left at one of its bounds is pinned and the others fitted again
(`fit_inside_bounds`): a bound is where the runs wanted to go further than the assumption can,
which says the misfit lies elsewhere. What is fitted is then shrunk towards its default by
n / (n + k) (`fit_shrunk`; parameters.py states k and why). Step 6 scores the unshrunk fit,
the stricter test (procedure._prefix_loo_error says why); the leave-one-out error reported,
and the check of the whole fit against the defaults, score the values kept, shrunk.

Leave-one-out: each run is predicted by the fit of the others (the same rules on n-1 runs),
the error of a prediction rather than of a fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from optimizer.calibration.parameters import (
    PARAMETERS,
    Parameter,
    default_value,
    most_freed,
    prior_weight,
    shrink_weight,
)
from optimizer.calibration.runs import MeasuredRun, configuration
from optimizer.costmodel import CostAssumptions

# An assumption moving a run's step time by less than this (log) over its range is not seen.
MIN_EFFECT = 1e-3
# A freed assumption's effect must keep this share of its norm off the span of those already
# freed, else the runs cannot tell it from them.
MIN_INDEPENDENCE = 0.15
MAX_RUNS = 32
NOT_EXAMINED = "not examined: the time limit ran out first; kept at its default"
# Step-time evaluations one fit may spend, per freed parameter.
MAX_EVALUATIONS_PER_PARAMETER = 100


class CalibrationUnavailable(Exception):
    """scipy, which the fit needs, is not installed (the `calibration` extra)."""


class CalibrationStopped(Exception):
    """The caller asked the fit to stop (a client that went away)."""


class FitOutOfTime(Exception):
    """The caller's time ran out mid-fit; `values`: the best point the fit had seen (not
    converged), for a caller that must answer with something."""

    def __init__(self, values: dict[str, float], evaluations: int) -> None:
        super().__init__(f"the time limit ran out after {evaluations} evaluations")
        self.values, self.evaluations = values, evaluations


@dataclass(frozen=True)
class FitSettings:
    """What every fit of one calibration shares: each candidate's default (the prior's
    centre and the fit's start), the pull towards it (None: the prior's, `prior_weight` of
    the runs fitted, and the shrinkage after the fit; 0: neither), the caller's request to
    stop, and its time running out (each checked before every step-time evaluation).
    `start`, where given, is where a fit starts instead of the defaults: a refit of nearly
    the same runs starts at their fit, a few steps from its own optimum, and reaches the
    same optimum (the pull is still towards the defaults)."""

    defaults: dict[str, float | None]
    regularisation: float | None = None
    stop: Callable[[], bool] | None = None
    out_of_time: Callable[[], bool] | None = None
    start: dict[str, float] | None = None

    def kept_share(self, runs: list[MeasuredRun]) -> float:
        """The share of its move a fitted value keeps (`shrink_weight` of the runs' distinct
        configurations); all of it where no pull towards the defaults is asked for
        (`regularisation` 0: the fit's own mechanics)."""
        if self.regularisation == 0:
            return 1.0
        return shrink_weight(len({configuration(run) for run in runs}))


def _scipy_optimize() -> Any:
    try:
        from scipy import optimize
    except ModuleNotFoundError as missing:
        raise CalibrationUnavailable(
            f"calibration needs scipy ({missing.name} is not installed): "
            "pip install 'layoutopt[calibration]'"
        ) from None
    return optimize


def _log_steps(runs: list[MeasuredRun], values: dict[str, float]) -> np.ndarray:
    return np.array([math.log(run.estimate(values).step_time_s) for run in runs])


def choose(
    runs: list[MeasuredRun],
    candidates: tuple[Parameter, ...] = PARAMETERS,
    out_of_time: Callable[[], bool] | None = None,
    stop: Callable[[], bool] | None = None,
) -> tuple[list[Parameter], dict[str, float | None], dict[str, str]]:
    """(freed parameters, every candidate's default, why each other one is pinned); the
    candidates `out_of_time` leaves no time to examine are pinned and said so;
    CalibrationStopped once `stop()` says so (checked candidate by candidate)."""
    freed: list[Parameter] = []
    columns: list[np.ndarray] = []
    defaults: dict[str, float | None] = {}
    pinned: dict[str, str] = {}
    for p in candidates:
        defaults[p.name] = default = default_value(p, runs)
        if p.name not in CostAssumptions.model_fields:
            pinned[p.name] = "not an assumption of this cost model"
            continue
        stating = [r.name for r in runs if p.name in r.stated]
        if stating:
            pinned[p.name] = f"stated by the request of {', '.join(stating)}: a fact, not fitted"
            continue
        if default is None:
            pinned[p.name] = (
                "the runs' GPUs give it different defaults: one value cannot stand for them"
            )
            continue
        if stop is not None and stop():
            raise CalibrationStopped()
        if out_of_time is not None and out_of_time():
            pinned[p.name] = NOT_EXAMINED
            continue
        effect = _log_steps(runs, {p.name: p.upper}) - _log_steps(runs, {p.name: p.lower})
        seen = np.abs(effect) >= MIN_EFFECT
        if not seen.any():
            pinned[p.name] = f"no run's step time depends on it ({p.absent})"
            continue
        if p.varies is not None:
            label, knob = p.varies
            values = {knob(run) for run, s in zip(runs, seen, strict=True) if s}
            if len(values) < 2:
                (value,) = values
                pinned[p.name] = (
                    f"the runs that depend on it do not vary {label} (all {value}): "
                    f"it cannot be told from the kernel efficiency"
                )
                continue
        if len(freed) >= most_freed(len(runs)):
            pinned[p.name] = _too_many(len(runs), freed)
            continue
        if columns:
            basis = np.column_stack(columns)
            coef, *_ = np.linalg.lstsq(basis, effect, rcond=None)
            residual = effect - basis @ coef
            if np.linalg.norm(residual) < MIN_INDEPENDENCE * np.linalg.norm(effect):
                closest = max(
                    range(len(columns)),
                    key=lambda i: (
                        abs(float(columns[i] @ effect)) / float(np.linalg.norm(columns[i]))
                    ),
                )
                pinned[p.name] = (
                    f"its effect on these runs is nearly that of {freed[closest].name}: "
                    "the runs cannot tell them apart"
                )
                continue
        freed.append(p)
        columns.append(effect)
    return freed, defaults, pinned


def _too_many(runs: int, freed: list[Parameter]) -> str:
    most = most_freed(runs)
    return (
        f"{runs} run{'s' if runs > 1 else ''} fit at most {most} "
        f"assumption{'s' if most > 1 else ''}, freed in order "
        f"({', '.join(f.name for f in freed)})"
        + (", so that the fit is not exact and what it misses can be seen" if most < runs else "")
    )


def fit_values(
    runs: list[MeasuredRun], freed: list[Parameter], settings: FitSettings
) -> tuple[dict[str, float], dict[str, Any]]:
    """The freed parameters' values minimising mean squared log error plus the pull towards
    the defaults (`settings.regularisation`; None: the prior's, prior_weight)."""
    defaults, stop = settings.defaults, settings.stop
    regularisation = settings.regularisation
    if regularisation is None:
        regularisation = prior_weight(len(runs))
    if not freed:
        return {}, {"success": True, "message": "nothing to fit", "evaluations": 0}
    optimize = _scipy_optimize()
    measured = np.array([math.log(r.step_time_s) for r in runs])
    span = np.array([p.upper - p.lower for p in freed])
    lower = np.array([p.lower for p in freed])
    centre_values = {p.name: float(defaults[p.name] or p.lower) for p in freed}
    centre = _scaled(freed, centre_values)
    start = _scaled(freed, centre_values | (settings.start or {}))
    evaluations = 0
    least: tuple[float, np.ndarray] = (math.inf, start)  # the least cost seen, and where

    def values_at(z: np.ndarray) -> dict[str, float]:
        theta = lower + np.clip(z, 0.0, 1.0) * span
        return {p.name: float(t) for p, t in zip(freed, theta, strict=True)}

    def residuals(z: np.ndarray) -> np.ndarray:
        nonlocal evaluations, least
        if stop is not None and stop():
            raise CalibrationStopped()
        if settings.out_of_time is not None and settings.out_of_time():
            raise FitOutOfTime(values_at(least[1]), evaluations)
        evaluations += 1
        errors = (_log_steps(runs, values_at(z)) - measured) / math.sqrt(len(runs))
        pull = math.sqrt(regularisation) * (np.clip(z, 0, 1) - centre)
        found = np.concatenate([errors, pull])
        if (cost := float(found @ found)) < least[0]:
            least = (cost, np.array(z))
        return found

    # least squares of [errors / sqrt(n), sqrt(reg) * pull]: mean squared log error plus the
    # pull; trust-region reflective keeps every parameter within its bounds
    best = optimize.least_squares(
        residuals,
        start,
        bounds=(0.0, 1.0),
        method="trf",
        diff_step=1e-3,
        xtol=1e-6,
        ftol=1e-10,
        max_nfev=MAX_EVALUATIONS_PER_PARAMETER * len(freed),
    )
    return values_at(best.x), {
        "success": bool(best.success),
        "method": "scipy.optimize.least_squares (trf, bounded)",
        "message": str(best.message),
        "evaluations": evaluations,
        "objective": float(2 * best.cost),
    }


def _scaled(freed: list[Parameter], values: dict[str, float]) -> np.ndarray:
    """The values as shares of each parameter's range, the fit's coordinates."""
    return np.clip([(values[p.name] - p.lower) / (p.upper - p.lower) for p in freed], 0.0, 1.0)


# A fitted value this close to a bound (share of its range) is taken as at the bound.
AT_BOUND = 1e-3


def fit_inside_bounds(
    runs: list[MeasuredRun], freed: list[Parameter], settings: FitSettings
) -> tuple[dict[str, float], dict[str, Any], dict[str, str]]:
    """fit_values, then pin each parameter the fit left at a bound and fit the others again:
    (values, the last fit's information, why each was pinned). A value at its bound is no
    estimate: the runs ask for more than the assumption can physically give (a kernel
    efficiency under any measured large GEMM's, a network at 20% of its line rate), so the
    misfit lies in something else, and a fitted bound would carry it to every other layout."""
    pinned: dict[str, str] = {}
    while True:
        values, info = fit_values(runs, freed, settings)
        at_bound = {p.name: side for p in freed if (side := _bound_side(p, values[p.name]))}
        if not at_bound:
            return values, info, pinned
        for name, side in at_bound.items():
            pinned[name] = (
                f"the runs push it to its {side} bound ({values[name]:.4g}): they ask for more "
                "than it can give, so what they miss lies elsewhere; kept at its default"
            )
        freed = [p for p in freed if p.name not in at_bound]
        settings = replace(settings, start=values)  # the others start where they were


def _bound_side(parameter: Parameter, value: float) -> str | None:
    margin = AT_BOUND * (parameter.upper - parameter.lower)
    if value <= parameter.lower + margin:
        return "lower"
    if value >= parameter.upper - margin:
        return "upper"
    return None


def shrunk(
    values: dict[str, float], runs: list[MeasuredRun], settings: FitSettings
) -> dict[str, float]:
    """Each fitted value moved back towards its default, keeping `settings.kept_share` of
    the way the runs asked for."""
    share = settings.kept_share(runs)
    out = {}
    for name, value in values.items():
        default = settings.defaults[name]
        out[name] = value if default is None else default + share * (value - default)
    return out


def fit_shrunk(
    runs: list[MeasuredRun], freed: list[Parameter], settings: FitSettings
) -> tuple[dict[str, float], dict[str, float], dict[str, Any], dict[str, str]]:
    """fit_inside_bounds, its values shrunk: (the values kept, the values the runs alone
    gave, the last fit's information, why each was pinned at a bound)."""
    values, info, pinned = fit_inside_bounds(runs, freed, settings)
    return shrunk(values, runs, settings), values, info, pinned
