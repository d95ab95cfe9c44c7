"""`layoutopt tune SPEC --dir DIR`: optimise, plan the trials, wait for their logs, calibrate,
optimise again (optimizer.tuning holds the loop's decisions; this module reads and writes
each stage's file in the folder, in the answers' own JSON).

Resumable: a stage whose file is in DIR is not run again, so a second call (SPEC may then be
left out) carries on where the first stopped. `--no-wait` (or a wait that runs out) exits 5
listing, one a line on standard output, the trial folders whose log is missing: a launcher
script runs each (its artefact is in its folder, its output goes to `train.log` there) and
calls tune again. Progress goes to standard error, a line a stage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from api.cli.calibrate import RunLines, measured_runs
from api.cli.common import BadRequest, add_job_flags, emit
from api.cli.render import layout_line, optimize_text
from api.cli.search import (
    DEFAULT_TIME_LIMIT_S,
    add_search_flags,
    exit_status,
    search_data,
    write_trials,
)
from api.cli.training_logs import log_text, run_of_log
from api.errors import EXIT_INTERNAL, EXIT_WAITING
from api.schemas import (
    CalibrateOut,
    CalibrateRequest,
    EvaluateRequest,
    SearchRequest,
    TrialsOut,
    TrialsRequest,
    TuneOut,
    calibrate_out,
    trials_out,
    tune_out,
    waiting_out,
)
from optimizer import SolveSettings
from optimizer.calibration import CalibrationUnavailable, calibrate
from optimizer.trials import DEFAULT_TRIALS, plan_trials
from optimizer.tuning import (
    CALIBRATION_TIME_S,
    DEFAULT_POLL_S,
    DEFAULT_WAIT_S,
    LogState,
    TuneFolder,
    fingerprint,
    log_state,
    retune,
    wait_for_logs,
    waiting_words,
)


def progress(line: str) -> None:
    print(f"tune: {line}", file=sys.stderr, flush=True)


def write_json(path: Path, value: Any) -> None:
    """`value` as JSON at `path`, whole or not at all (a stage's file is its mark of done)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=2) + "\n")
    os.replace(partial, path)


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"{path} is unreadable ({error}): delete it to redo its stage") from None


# --- the request -------------------------------------------------------------------------


def tune_request(args: argparse.Namespace, folder: TuneFolder) -> TrialsRequest:
    """The request given (SPEC and flags), or the folder's where none is; a request other
    than the folder's is refused (one folder, one tune)."""
    if args.spec_file is not None:
        if args.spec is not None:
            raise BadRequest("give the request once: SPEC or --spec, not both")
        args.spec = args.spec_file
    data = search_data(args)
    stored = read_json_file(folder.request) if folder.request.exists() else None
    if not data:
        if stored is None:
            raise BadRequest(f"give the request to tune (SPEC, or flags): no {folder.request}")
        data = stored["request"]
    k = args.k if args.k is not None else (stored or {}).get("k", DEFAULT_TRIALS)
    request = TrialsRequest.model_validate(data | {"k": k})
    given = {"request": request.model_dump(mode="json", exclude_unset=True, exclude={"k"}), "k": k}
    if stored is not None and stored != given:
        raise BadRequest(
            f"{folder.root} holds the tune of another request ({folder.request}): give that "
            "request (or none), or another --dir"
        )
    if stored is None:
        write_json(folder.request, given)
    return request


# --- the stages ----------------------------------------------------------------------------


def planned(request: TrialsRequest, folder: TuneFolder, budget: SolveSettings) -> TrialsOut:
    """The optimum by the defaults and its trials (plan.json), each in its folder."""
    if folder.plan.exists():
        plan = TrialsOut.model_validate(read_json_file(folder.plan))
        progress(f"plan: {folder.plan} (done before)")
        return plan
    progress("plan: the optimum by the defaults, and the trials that settle its ties")
    plan = trials_out(plan_trials(request.to_request(), request.k, budget))
    write_trials(plan, request, folder.trials)
    write_json(folder.plan, plan.model_dump(mode="json"))
    if plan.trials:
        best = plan.trials[0].estimate
        progress(
            f"optimum by the defaults: {layout_line(best)} at {100 * best.mfu:.2f}% MFU; "
            f"{plan.tied} layouts tied with it, {len(plan.trials)} trials in {folder.trials}"
        )
    return plan


def log_states(plan: TrialsOut, folder: TuneFolder) -> list[LogState]:
    states = []
    for trial in plan.trials:
        path = folder.log(trial.name)
        text = log_text(path) if path.is_file() else None
        states.append(log_state(trial.name, trial.steps, text))
    return states


def logs_read(plan: TrialsOut, folder: TuneFolder) -> dict[str, str]:
    """Each trial's log fingerprint: what a calibration was made on."""
    return {t.name: fingerprint(log_text(folder.log(t.name))) for t in plan.trials}


def calibrated(plan: TrialsOut, folder: TuneFolder) -> tuple[CalibrateOut, bool]:
    """The calibration on the trials' logs (calibration.json, assumptions.json), and whether
    it was made now (a log that changed since the last one redoes it)."""
    prints = logs_read(plan, folder)
    done = folder.logs.exists() and read_json_file(folder.logs) == prints
    if done and folder.calibration.exists():
        progress(f"calibration: {folder.calibration} (done before, on the same logs)")
        return CalibrateOut.model_validate(read_json_file(folder.calibration)), False
    folder.logs.unlink(missing_ok=True)
    folder.answer.unlink(missing_ok=True)
    progress(f"calibration on the {len(plan.trials)} trial logs")
    names = [trial.name for trial in plan.trials]
    runs = [run_of_log(folder.log(n), folder.trial(n) / "trial.json", None) for n in names]
    request = CalibrateRequest.model_validate({"runs": runs})
    fitting = measured_runs(request, RunLines(runs, [str(folder.log(n)) for n in names]))
    result = calibrate(fitting, deadline=time.perf_counter() + CALIBRATION_TIME_S)
    answer = calibrate_out(result)
    write_json(folder.calibration, answer.model_dump(mode="json"))
    write_json(folder.assumptions, answer.assumptions)
    write_json(folder.logs, prints)
    for p in answer.fit.parameters:
        if p.status == "fitted":
            progress(f"fitted {p.name} = {p.value:g} (default {p.default:g})")
    if not any(p.status == "fitted" for p in answer.fit.parameters):
        progress("nothing fitted: every assumption kept at its default (calibration.json says why)")
    return answer, True


def answered(
    request: TrialsRequest, folder: TuneFolder, calibration: CalibrateOut, budget: SolveSettings
) -> TuneOut:
    """The search again under the calibration (answer.json), beside the optimum before."""
    if folder.answer.exists():
        progress(f"answer: {folder.answer} (done before)")
        return TuneOut.model_validate(read_json_file(folder.answer))
    progress("the search again under the calibrated assumptions")
    body = request.model_dump(mode="json", exclude_unset=True, exclude={"k"})
    own = body.get("assumptions", {})
    body["assumptions"] = own | calibration.assumptions
    write_json(folder.calibrated_request, body)
    record = read_json_file(folder.trial("optimum") / "trial.json")
    optimum = EvaluateRequest.model_validate(record["request"]).to_request()
    retuned = retune(optimum, SearchRequest.model_validate(body).to_request(), budget)
    names = [trial.name for trial in TrialsOut.model_validate(read_json_file(folder.plan)).trials]
    answer = tune_out(retuned, calibration.assumptions, calibration.fit, body, names)
    write_json(folder.answer, answer.model_dump(mode="json"))
    return answer


def tune_text(answer: TuneOut) -> str:
    fit = answer.calibration
    lines = [
        f"before   {layout_line(answer.before)}",
        f"         MFU {100 * answer.before.mfu:.2f}% by the defaults, "
        f"{100 * answer.before_calibrated.mfu:.2f}% under the calibration",
    ]
    if answer.after.best is not None:
        after = answer.after.best
        lines += [
            f"after    {layout_line(after)}",
            f"         MFU {100 * after.mfu:.2f}% under the calibration ({answer.status})",
        ]
    fitted = [p for p in fit.parameters if p.status == "fitted"]
    lines.append(
        f"calibrated on {len(answer.trials)} trial logs: "
        + (
            ", ".join(f"{p.name} {p.default:g} -> {p.value:g}" for p in fitted)
            if fitted
            else "nothing fitted, every assumption kept at its default"
        )
    )
    if fit.leave_one_out is not None:
        loo = fit.leave_one_out
        lines.append(
            f"         leave-one-out RMS log error {loo.rms_log_error:.4f} calibrated, "
            f"{loo.rms_log_error_uncalibrated:.4f} uncalibrated"
        )
    lines += [f"  - {change}" for change in answer.changes]
    lines += ["", "the search under the calibration:", optimize_text(answer.after)]
    return "\n".join(lines)


def run_tune(args: argparse.Namespace) -> int:
    folder = TuneFolder(args.dir)
    request = tune_request(args, folder)
    budget = SolveSettings(request.time_limit_s or DEFAULT_TIME_LIMIT_S, args.workers)
    plan = planned(request, folder, budget)
    if not plan.trials:  # infeasible, or out of time: nothing to run
        emit(plan, args.json, lambda p: f"no optimum to tune ({p.status})")
        return exit_status(plan.status)
    wait_s = 0.0 if args.no_wait else args.wait_seconds
    states = wait_for_logs(lambda: log_states(plan, folder), wait_s, args.poll_seconds, progress)
    missing = [state for state in states if not state.arrived]
    if missing:
        progress(waiting_words(states))
        progress(
            f"run each trial (its artefact is in its folder), its output to {folder.log('*').name} "
            "there, and call tune again; exit status 5"
        )
        folders = [(state, str(folder.trial(state.trial))) for state in missing]
        emit(waiting_out(folders), args.json, lambda w: "\n".join(m.folder for m in w.waiting_for))
        return EXIT_WAITING
    try:
        calibration, _ = calibrated(plan, folder)
    except CalibrationUnavailable as missing_scipy:
        print(f"layoutopt: error: {missing_scipy}", file=sys.stderr)
        return EXIT_INTERNAL
    answer = answered(request, folder, calibration, budget)
    emit(answer, args.json, tune_text)
    return exit_status(answer.status)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= value <= 30 * 24 * 3600:
        raise argparse.ArgumentTypeError(f"seconds must be 0 to 30 days, got {value:g}")
    return value


def register_tune_command(commands: Any) -> None:
    cmd = commands.add_parser(
        "tune",
        help="the loop: optimize, trials, wait for their logs, calibrate, optimize again",
        description="Optimise, plan the trials, wait for their training logs in DIR, "
        "calibrate on them and optimise again; resumable (a stage done is not redone).",
    )
    cmd.add_argument("spec_file", type=Path, nargs="?", metavar="SPEC", help="request JSON")
    add_job_flags(cmd)
    add_search_flags(cmd)
    cmd.add_argument("--dir", type=Path, required=True, help="the work folder (created)")
    cmd.add_argument("--k", type=int, help="at most this many trials (default 3)")
    cmd.add_argument(
        "--no-wait",
        action="store_true",
        help="exit 5 at once when logs are missing, listing the trial folders to run",
    )
    cmd.add_argument(
        "--wait-seconds",
        type=_seconds,
        default=DEFAULT_WAIT_S,
        help="how long to wait for the logs (default a day), then exit 5",
    )
    cmd.add_argument(
        "--poll-seconds",
        type=_seconds,
        default=DEFAULT_POLL_S,
        help="how often to look for them (default 30)",
    )
    cmd.set_defaults(run=run_tune)
