"""The calibration procedure over `fit.py`'s parts: choose what the runs can identify, keep
only what predicts a run left out better (`select`), fit and shrink, and score each run by the
fit of the others, with the same choices made on those others (leave-one-out). Where that
score is no better than the defaults' error on the runs, nothing fitted is kept
(`worse_than_defaults`): a calibration never predicts the runs worse than no calibration."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from optimizer.calibration.fit import (
    MAX_RUNS,
    NOT_EXAMINED,
    FitOutOfTime,
    FitSettings,
    choose,
    fit_inside_bounds,
    fit_shrunk,
    shrunk,
)
from optimizer.calibration.parameters import PARAMETERS, Parameter
from optimizer.calibration.results import (
    Calibration,
    LeftOut,
    ParameterFit,
    RunFit,
    Shrinkage,
    rms,
)
from optimizer.calibration.runs import MeasuredRun, configuration

# Of the time a calibration has, what choosing and selecting the parameters may take: the fit
# of all the runs gets the rest, the leave-one-out refits what that fit leaves.
SELECT_SHARE = 0.5
# Kept back from the fit for pricing each run under it (two step-time estimates, ~15 ms each)
# and the fit's last evaluation, which the time limit does not interrupt.
FINISH_S_PER_RUN = 0.05
NOT_SCORED = (
    "not scored: the time limit ran out before its leave-one-out score was worked out; "
    "kept at its default"
)
NOT_CONVERGED = "the time limit ran out before its fit converged; kept at its default"
# A fit must lower a leave-one-out error by more than this share of it to count as lowering it.
NOISE = 1e-3


def _prefix_loo_error(
    runs: list[MeasuredRun],
    freed: list[Parameter],
    settings: FitSettings,
    starts: list[dict[str, float]],
) -> tuple[float, list[dict[str, float]]]:
    """(RMS log error of each run predicted by the fit of `freed` to the others, unshrunk;
    those fits). A run's squared log error is (nearly) convex in the move from the
    defaults, so where the whole move predicts better than none, the shrunk one, between the
    two, does too; the converse fails (a move shrunk enough passes where the runs' own fit
    does not, and carries what they share, not what the model misses, to other layouts).
    The fit without run i starts at `starts[i]`, the shorter prefix's fit of the same runs."""
    errors, fits = [], []
    for i, run in enumerate(runs):
        others = runs[:i] + runs[i + 1 :]
        values, _, _ = fit_inside_bounds(others, freed, replace(settings, start=starts[i]))
        errors.append(math.log(run.estimate(values).step_time_s / run.step_time_s))
        fits.append(values)
    return rms(errors), fits


def select(
    runs: list[MeasuredRun], freed: list[Parameter], settings: FitSettings
) -> tuple[list[Parameter], dict[str, str]]:
    """(the prefix of `freed` kept, why each other one is pinned): the shortest prefix with
    the least leave-one-out error; all of `freed` with a single run (nothing to score on).
    Prefixes the time (`settings.out_of_time`) leaves unscored are not kept."""
    if len(runs) < 2 or not freed:
        return freed, {}
    scores: list[float] = []
    fits: list[dict[str, float]] = [{} for _ in runs]
    try:
        for k in range(len(freed) + 1):  # the empty prefix fits nothing: always scored
            score, fits = _prefix_loo_error(runs, freed[:k], settings, fits)
            scores.append(score)
    except FitOutOfTime:
        pass
    # a longer prefix must beat the shorter by more than noise
    keep = 0
    for k in range(1, len(scores)):
        if scores[k] < scores[keep] * (1 - NOISE):
            keep = k
    pinned = {
        p.name: (
            f"freeing it does not lower the leave-one-out error of the {len(runs)} runs "
            f"(RMS log error {scores[keep]:.4f} with {keep} freed, {scores[i + 1]:.4f} with "
            f"{i + 1}): the runs would fit it without predicting better"
        )
        for i, p in enumerate(freed)
        if keep <= i < len(scores) - 1
    }
    pinned |= {p.name: NOT_SCORED for p in freed[len(scores) - 1 :]}
    return freed[:keep], pinned


def _past(deadline: float | None) -> Callable[[], bool] | None:
    return None if deadline is None else lambda: time.perf_counter() > deadline


def calibrate(
    runs: list[MeasuredRun],
    candidates: tuple[Parameter, ...] = PARAMETERS,
    regularisation: float | None = None,
    leave_one_out: bool = True,
    stop: Callable[[], bool] | None = None,
    deadline: float | None = None,
) -> Calibration:
    """Fit the identifiable candidates to the runs; with `leave_one_out`, also predict each
    run from the fit of the others. `deadline` (a time.perf_counter() value) bounds the
    whole call: choosing and selecting get SELECT_SHARE of it (what they leave unexamined
    is pinned, said why), the fit the rest (cut short: its best point, said not converged),
    the refits what is left (the note says how many were done); `complete` is False then."""
    if not runs:
        raise ValueError("calibration needs at least one measured run")
    if len(runs) > MAX_RUNS:
        raise ValueError(f"at most {MAX_RUNS} runs, got {len(runs)}")
    now = time.perf_counter()
    if deadline is not None:
        deadline -= FINISH_S_PER_RUN * len(runs)
    selecting = _past(None if deadline is None else now + SELECT_SHARE * (deadline - now))
    freed, defaults, pinned = choose(runs, candidates, selecting, stop)
    settings = FitSettings(defaults, regularisation, stop, selecting)
    freed, unhelpful = select(runs, freed, settings)
    pinned |= unhelpful
    settings = replace(settings, out_of_time=_past(deadline))
    values, runs_values, info, fit_cut = _fit(runs, freed, settings, pinned)
    left_out, note = _leave_one_out(runs, candidates, settings, leave_one_out)
    if (worse := worse_than_defaults(runs, left_out, values)) is not None:
        pinned |= dict.fromkeys(values, worse)
        values = {}
    parameters = tuple(
        ParameterFit(
            name=p.name,
            default=defaults[p.name],
            lower=p.lower,
            upper=p.upper,
            what=p.what,
            value=values.get(p.name),
            pinned=pinned.get(p.name),
            runs_value=runs_values.get(p.name),
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
    cut_short = fit_cut or any(why in (NOT_SCORED, NOT_EXAMINED) for why in pinned.values())
    complete = not cut_short and not (note or "").startswith("out of time")
    shrinkage = Shrinkage(len({configuration(r) for r in runs}), settings.kept_share(runs))
    return Calibration(parameters, fits, left_out, info, note, complete, shrinkage)


def _fit(
    runs: list[MeasuredRun], freed: list[Parameter], settings: FitSettings, pinned: dict[str, str]
) -> tuple[dict[str, float], dict[str, float], dict[str, Any], bool]:
    """(the values kept, those the runs alone gave, the fit's information, whether the time
    cut it short); `pinned` gains those pinned at a bound, or left unconverged."""
    try:
        values, runs_values, info, at_bound = fit_shrunk(runs, freed, settings)
    except FitOutOfTime as cut:  # the best point seen; those pinned at a bound meanwhile too
        pinned |= {p.name: NOT_CONVERGED for p in freed if p.name not in cut.values}
        info = {"success": False, "message": f"{cut}: the best point seen, not converged"}
        return shrunk(cut.values, runs, settings), cut.values, info, True
    pinned |= at_bound
    return values, runs_values, info, False


def worse_than_defaults(
    runs: list[MeasuredRun], left_out: tuple[LeftOut, ...] | None, values: dict[str, float]
) -> str | None:
    """Why the fit is dropped where each run predicted by the fit of the others (the whole
    procedure, on them) misses more than the defaults miss it; None where it does better, or
    nothing was fitted, or nothing was left out."""
    if left_out is None or not values:
        return None
    fitted = rms([left.log_error for left in left_out])
    defaults = rms([math.log(run.estimate().step_time_s / run.step_time_s) for run in runs])
    if fitted < defaults * (1 - NOISE):
        return None
    return (
        f"the calibration as a whole predicts each run from the others no better than the "
        f"defaults do (leave-one-out RMS log error {fitted:.4f} fitted, {defaults:.4f} with "
        "the defaults): what the runs ask for does not carry to another layout; kept at its "
        "default"
    )


def _leave_one_out(
    runs: list[MeasuredRun],
    candidates: tuple[Parameter, ...],
    settings: FitSettings,
    asked: bool,
) -> tuple[tuple[LeftOut, ...] | None, str | None]:
    """Each run predicted by the fit of the others, while the time lasts; or why not."""
    if not asked:
        return None, "not asked for"
    if len(runs) == 1:
        return None, (
            "one run: nothing is left to predict it from, so nothing checks the fit against "
            "the defaults but its shrinkage"
        )
    done = []
    out_of_time = settings.out_of_time or (lambda: False)
    for i in range(len(runs)):
        try:
            left = None if out_of_time() else _left_out(runs, i, candidates, settings)
        except FitOutOfTime:
            left = None
        if left is None or out_of_time():  # a refit the time cut may have been cut short
            return None, f"out of time after {i} of {len(runs)} refits: ask with fewer runs"
        done.append(left)
    return tuple(done), None


def _left_out(
    runs: list[MeasuredRun], index: int, candidates: tuple[Parameter, ...], settings: FitSettings
) -> LeftOut:
    """Run `index` predicted by the fit of the others, the same rules on them (their own
    defaults: a GPU only the left-out run has no longer splits them)."""
    others = runs[:index] + runs[index + 1 :]
    freed, defaults, _ = choose(others, candidates, settings.out_of_time, settings.stop)
    settings = replace(settings, defaults=defaults)
    freed, _ = select(others, freed, settings)  # as the whole fit does
    values, _, _, _ = fit_shrunk(others, freed, settings)
    est = runs[index].estimate(values)
    return LeftOut(runs[index], est.step_time_s, est.mfu, tuple(values))
