"""The calibration procedure over `fit.py`'s parts: choose what the runs can identify, keep
only what predicts a run left out better (`select`), fit, and score each run by the fit of
the others, with the same choices made on those others (leave-one-out)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from optimizer.calibration.fit import MAX_RUNS, FitSettings, choose, fit_inside_bounds
from optimizer.calibration.parameters import PARAMETERS, Parameter
from optimizer.calibration.results import Calibration, LeftOut, ParameterFit, RunFit, rms
from optimizer.calibration.runs import MeasuredRun


def _prefix_loo_error(
    runs: list[MeasuredRun], freed: list[Parameter], settings: FitSettings
) -> float:
    """RMS log error of each run predicted by the fit of `freed` to the others."""
    errors = []
    for i, run in enumerate(runs):
        others = runs[:i] + runs[i + 1 :]
        values, _, _ = fit_inside_bounds(others, freed, settings)
        errors.append(math.log(run.estimate(values).step_time_s / run.step_time_s))
    return rms(errors)


def select(
    runs: list[MeasuredRun], freed: list[Parameter], settings: FitSettings
) -> tuple[list[Parameter], dict[str, str]]:
    """(the prefix of `freed` kept, why each other one is pinned): the shortest prefix with
    the least leave-one-out error; all of `freed` with a single run (nothing to score on)."""
    if len(runs) < 2 or not freed:
        return freed, {}
    scores = [_prefix_loo_error(runs, freed[:k], settings) for k in range(len(freed) + 1)]
    # a longer prefix must beat the shorter by more than noise (0.1% of the error)
    keep = 0
    for k in range(1, len(scores)):
        if scores[k] < scores[keep] * (1 - 1e-3):
            keep = k
    pinned = {
        p.name: (
            f"freeing it does not lower the leave-one-out error of the {len(runs)} runs "
            f"(RMS log error {scores[keep]:.4f} with {keep} freed, {scores[i + 1]:.4f} with "
            f"{i + 1}): the runs would fit it without predicting better"
        )
        for i, p in enumerate(freed)
        if i >= keep
    }
    return freed[:keep], pinned


def calibrate(
    runs: list[MeasuredRun],
    candidates: tuple[Parameter, ...] = PARAMETERS,
    regularisation: float | None = None,
    leave_one_out: bool = True,
    stop: Callable[[], bool] | None = None,
    deadline: Callable[[], bool] | None = None,
) -> Calibration:
    """Fit the identifiable candidates to the runs; with `leave_one_out`, also predict each
    run from the fit of the others, unless `deadline()` says the time is up first (the fit
    itself always finishes: its evaluations are bounded)."""
    if not runs:
        raise ValueError("calibration needs at least one measured run")
    if len(runs) > MAX_RUNS:
        raise ValueError(f"at most {MAX_RUNS} runs, got {len(runs)}")
    freed, defaults, pinned = choose(runs, candidates)
    settings = FitSettings(defaults, regularisation, stop)
    freed, unhelpful = select(runs, freed, settings)
    pinned |= unhelpful
    values, info, at_bound = fit_inside_bounds(runs, freed, settings)
    pinned |= at_bound
    parameters = tuple(
        ParameterFit(
            name=p.name,
            default=defaults[p.name],
            lower=p.lower,
            upper=p.upper,
            what=p.what,
            value=values.get(p.name),
            pinned=pinned.get(p.name),
        )
        for p in candidates
    )
    fits = tuple(
        RunFit(
            run=run,
            predicted_before_s=run.estimate().step_time_s,
            predicted_s=(est := run.estimate(values)).step_time_s,
            predicted_mfu=est.mfu,
            predicted_memory_gb=est.memory.allocator / 1e9,
        )
        for run in runs
    )
    left_out, note = None, None
    if not leave_one_out:
        note = "not asked for"
    elif len(runs) == 1:
        note = "one run: nothing is left to predict it from"
    else:
        done = []
        for i in range(len(runs)):
            if deadline is not None and deadline():
                note = f"out of time after {i} of {len(runs)} refits: ask with fewer runs"
                break
            done.append(_left_out(runs, i, candidates, settings))
        else:
            left_out = tuple(done)
    return Calibration(parameters, fits, left_out, info, note)


def _left_out(
    runs: list[MeasuredRun], index: int, candidates: tuple[Parameter, ...], settings: FitSettings
) -> LeftOut:
    """Run `index` predicted by the fit of the others, the same rules on them (their own
    defaults: a GPU only the left-out run has no longer splits them)."""
    others = runs[:index] + runs[index + 1 :]
    freed, defaults, _ = choose(others, candidates)
    settings = replace(settings, defaults=defaults)
    freed, _ = select(others, freed, settings)  # as the whole fit does
    values, _, _ = fit_inside_bounds(others, freed, settings)
    est = runs[index].estimate(values)
    return LeftOut(runs[index], est.step_time_s, est.mfu, tuple(values))
