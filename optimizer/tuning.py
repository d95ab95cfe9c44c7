"""The loop in one command (`layoutopt tune`): optimise, plan the trials that settle the
layouts tied with the optimum, wait for their training logs, calibrate on them, optimise
again under the calibrated assumptions, and say what changed.

Each stage leaves a file in a work folder (`TuneFolder`), and a stage whose file is there is
not run again, so the command resumes where it stopped: after a crash, after the time it was
given to wait ran out, or when a launcher script runs the trials between two calls. A trial's
log counts once it reports the trial's last step (`log_state`): a log still being written is
not read into a calibration. The calibration is redone when a log changes (`fingerprint`).

This module holds the loop's decisions (what each stage is, when a log has arrived, how long
to wait, what changed between the two optima); the front door writes and reads each stage's
file in the answer's own JSON. Nothing is modelled here: the searches, trial plans and the
calibration are optimizer.searches, optimizer.trials and optimizer.calibration.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from models.errors import InvalidSpec
from models.layout import Layout
from optimizer.calibration import read_log
from optimizer.costmodel import Estimate
from optimizer.request import Request
from optimizer.results import OptimizeResult
from optimizer.search import SolveSettings
from optimizer.searches import evaluate_on, optimize
from optimizer.ties import deciding_mechanism

# The log a trial's run writes, in its trial's folder.
LOG_NAME = "train.log"
# What waiting for the logs may take by default (trials queue on a busy cluster), and how
# often the folder is looked at.
DEFAULT_WAIT_S = 24 * 3600.0
DEFAULT_POLL_S = 30.0
MIN_POLL_S = 1.0  # a shorter poll would only spin
# What a calibration may take: its fit and the leave-one-out refits of a few trial runs take
# seconds; a bound keeps a pathological fit from holding the loop.
CALIBRATION_TIME_S = 300.0


@dataclass(frozen=True)
class TuneFolder:
    """Where each stage of a tune leaves its result."""

    root: Path

    @property
    def request(self) -> Path:
        return self.root / "request.json"  # the request tuned, as given (checked on a rerun)

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"  # the optimum by the defaults and its trials

    @property
    def trials(self) -> Path:
        return self.root / "trials"  # a folder per trial: its artefact, trial.json, its log

    def trial(self, name: str) -> Path:
        return self.trials / name.replace(" ", "-")

    def log(self, name: str) -> Path:
        return self.trial(name) / LOG_NAME

    @property
    def logs(self) -> Path:
        return self.root / "logs.json"  # which logs the calibration read (their fingerprints)

    @property
    def assumptions(self) -> Path:
        return self.root / "assumptions.json"  # the calibrated assumptions, as any request takes

    @property
    def calibration(self) -> Path:
        return self.root / "calibration.json"  # the fit: what was fitted, pinned, and why

    @property
    def calibrated_request(self) -> Path:
        return self.root / "calibrated-request.json"  # the request under the calibration

    @property
    def answer(self) -> Path:
        return self.root / "answer.json"  # the optimum before and after, and what changed


@dataclass(frozen=True)
class LogState:
    """Whether a trial's log has arrived: it reports the trial's last step."""

    trial: str
    arrived: bool
    why: str  # what was found: no log yet, the last step so far, or the reading


def log_state(trial: str, steps: int, text: str | None) -> LogState:
    """The state of `trial`'s log (`text`, None when there is no file yet), which runs
    `steps` steps: arrived once a steady step at or past the last is read."""
    if text is None:
        return LogState(trial, False, f"no {LOG_NAME} yet")
    try:
        reading = read_log(text)
    except InvalidSpec as error:  # not yet past warm-up, or not a log the readers know
        return LogState(trial, False, f"not readable yet: {error.message}")
    last = reading.steps_used[-1]
    if last < steps:
        return LogState(trial, False, f"at step {last} of {steps}")
    return LogState(trial, True, reading.summary)


def fingerprint(text: str) -> str:
    """What a calibration records of a log it read, to be redone when the log changes."""
    return hashlib.sha256(text.encode()).hexdigest()


def wait_for_logs(
    look: Callable[[], list[LogState]],
    wait_s: float,
    poll_s: float,
    progress: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[LogState]:
    """The logs' states once every one has arrived, or when `wait_s` has passed (then some
    have not), looking every `poll_s` (MIN_POLL_S at least); `progress` hears of each change
    in what is missing."""
    deadline = clock() + wait_s
    said = None
    while True:
        states = look()
        missing = [state for state in states if not state.arrived]
        if not missing or clock() >= deadline:
            return states
        news = tuple((state.trial, state.why) for state in missing)
        if news != said:
            progress(waiting_words(states))
            said = news
        sleep(max(0.0, min(max(poll_s, MIN_POLL_S), deadline - clock())))


def waiting_words(states: Sequence[LogState]) -> str:
    missing = [state for state in states if not state.arrived]
    return f"waiting for {len(missing)} of {len(states)} trial logs: " + "; ".join(
        f"{state.trial} ({state.why})" for state in missing
    )


@dataclass(frozen=True)
class Retune:
    """The search again under the calibrated assumptions, beside the optimum by the defaults."""

    before: Estimate  # the optimum by the defaults, priced by them
    before_calibrated: Estimate  # the same layout priced under the calibration
    after: OptimizeResult  # the search under the calibration
    changes: tuple[str, ...]  # what changed, in words


def retune(optimum: Request, calibrated: Request, budget: SolveSettings | None = None) -> Retune:
    """Search `calibrated` (the tuned request, its assumptions calibrated) and compare its
    optimum with `optimum` (the tuned request at the optimum by the defaults, its layout
    named), priced both ways."""
    if optimum.layout is None:
        raise InvalidSpec("the optimum by the defaults names its layout", "layout")
    before = evaluate_on(optimum)
    before_calibrated = evaluate_on(replace(calibrated, layout=optimum.layout))
    after = optimize(calibrated, budget)
    return Retune(before, before_calibrated, after, what_changed(before, before_calibrated, after))


def what_changed(before: Estimate, before_now: Estimate, after: OptimizeResult) -> tuple[str, ...]:
    """The optimum before and after calibration in words: whether it moved, by which knobs,
    what the calibrated model says the move buys, and which mechanism it rests on."""
    was = (
        f"by the defaults the optimum was {before.summary()} at {_pct(before.mfu)} MFU; the "
        f"calibrated model prices it at {_pct(before_now.mfu)}"
    )
    if after.best is None:
        return (was, f"under the calibration the search finds no layout ({after.status})")
    new = after.best
    if new.layout == before.layout:
        return (was, f"the optimum stands under the calibration: {new.summary()}")
    mechanism, old_charge, new_charge = deciding_mechanism(before_now, new)
    return (
        was,
        f"the optimum moved to {new.summary()} ({knob_changes(before.layout, new.layout)}) at "
        f"{_pct(new.mfu)}: {100 * (new.mfu - before_now.mfu):+.2f} points over the old one "
        "under the calibration",
        f"the two differ most in {mechanism}: {100 * old_charge:.1f} points charged to the "
        f"old optimum, {100 * new_charge:.1f} to the new, under the calibration",
    )


KNOBS = ("tp", "pp", "cp", "dp", "vpp", "ep", "micro_batch", "zero", "recompute", "schedule")


def knob_changes(old: Layout, new: Layout) -> str:
    """The knobs that differ, `tp 2 -> 4, pp 4 -> 2`."""
    moved = []
    for knob in KNOBS:
        a, b = getattr(old, knob), getattr(new, knob)
        if a != b:
            moved.append(f"{knob.replace('_', '-')} {_value(a)} -> {_value(b)}")
    return ", ".join(moved) or "placement only"


def _value(value: object) -> str:
    return str(getattr(value, "value", value))


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.2f}%"
