"""`layoutopt calibrate RUNS.jsonl --out FILE.json`: fit the cost model's assumptions to
measured runs.

Each line of RUNS.jsonl is one run, `{"request": ..., "measured": ...}` (api/schemas/
calibration.py), or `{"request": ..., "log": "trial-1.log"}`, measured by its training log
(api/cli/training_logs.py). A `.csv` file holds the same runs a row each, under headers that
are the request's dotted paths (`model`, `cluster.gpus`, `layout.tp`, as a study's grid names
them) and the measured figures' (`measured.step_time_s`) or the log's (`log`, `log.format`),
with `name` for the run's label; an empty cell leaves its field unset. `--log FILE --request
TRIAL.json` (repeatable) adds a run measured by a log, with or without RUNS. `--out` receives the fitted assumptions, a JSON object any request takes as
its `assumptions` as it stands (without `--out` it goes to standard output); the fit's
residuals, what was pinned and why, and the leave-one-out error go to standard error. `--json`
prints the whole answer of `POST /v1/calibrate` instead.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from api.cli.common import STDIN, BadRequest
from api.cli.training_logs import run_of_log, with_log_read
from api.errors import EXIT_INTERNAL, EXIT_OK, detail_from_validation
from api.schemas import CalibrateOut, CalibrateRequest, calibrate_out
from models.errors import InvalidSpec
from optimizer.calibration import FORMATS, CalibrationUnavailable, MeasuredRun, calibrate
from optimizer.studies import ScenarioError, with_overrides


@dataclass(frozen=True)
class RunLines:
    """The runs to fit, each with where it came from, for errors that name it."""

    runs: list[Any]
    sources: list[str]  # "runs.jsonl line 3", "trial-1.log"


def read_runs(path: Path) -> RunLines:
    """The runs of a JSONL file (blank lines skipped) or, by its suffix, a CSV file, their
    logs read in; each error names its line."""
    where = "standard input" if path == STDIN else str(path)
    try:
        text = sys.stdin.read() if path == STDIN else path.read_text(encoding="utf-8")
    except OSError as error:
        raise BadRequest(f"cannot read {where}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise BadRequest(f"{where} is not UTF-8 text (byte {error.start})") from None
    runs = csv_runs(text, where) if path.suffix.lower() == ".csv" else jsonl_runs(text, where)
    if not runs:
        raise BadRequest(f"{where} holds no runs")
    folder = Path.cwd() if path == STDIN else path.parent
    read = RunLines([], [])
    for line, run in runs.items():
        with_log, log = with_log_read(run, folder)
        read.runs.append(with_log)
        read.sources.append(f"{where} line {line}" + (f" (log {log})" if log else ""))
    return read


def collect_runs(args: argparse.Namespace) -> RunLines:
    """The runs of RUNS, if given, then one per `--log` with its `--request`."""
    if len(args.log) != len(args.requests):
        raise BadRequest(
            f"each --log needs its --request, in order: {len(args.log)} --log, "
            f"{len(args.requests)} --request"
        )
    if args.runs is None and not args.log:
        raise BadRequest("give RUNS (JSONL or CSV), or --log FILE --request TRIAL.json")
    read = read_runs(args.runs) if args.runs is not None else RunLines([], [])
    for log, trial in zip(args.log, args.requests, strict=True):
        read.runs.append(run_of_log(log, trial, args.log_format))
        read.sources.append(str(log))
    return read


def jsonl_runs(text: str, where: str) -> dict[int, Any]:
    runs = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            runs[number] = json.loads(line)
        except (json.JSONDecodeError, RecursionError, ValueError) as error:
            raise BadRequest(f"{where} line {number} is not a JSON object: {error}") from None
    return runs


def csv_runs(text: str, where: str) -> dict[int, Any]:
    """A run a row: each header a dotted path into the run (`name`, `measured.step_time_s`,
    `log`) or, otherwise, into its request (`cluster.gpus`); numbers and true/false as such,
    a cell opening with [ or { as JSON, an empty cell left out."""
    reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff")))  # a spreadsheet's BOM
    headers = [header.strip() for header in reader.fieldnames or []]
    if not headers or not all(headers):
        raise BadRequest(f"{where} needs a header row naming every column (model, cluster.gpus)")
    measures = any(header.startswith("measured.") for header in headers)
    runs = {}
    for row in reader:
        line = reader.line_num
        if None in row:
            raise BadRequest(f"{where} line {line} has more cells than the header has names")
        # a row shorter than the header leaves its last fields unset (DictReader gives None)
        stripped = zip(headers, ((cell or "").strip() for cell in row.values()), strict=True)
        cells = {header: cell for header, cell in stripped if cell}
        try:
            values = {header: csv_value(cell) for header, cell in cells.items()}
        except ValueError as error:
            raise BadRequest(f"{where} line {line}: a cell is not JSON: {error}") from None
        if not values:
            continue
        # the name and log path as written (a run named 8 stays "8"); `log` is the log's path
        own = {h: cells[h] if h in ("name", "log") else v for h, v in values.items() if _own(h)}
        own = {("log.path" if h == "log" else h): v for h, v in own.items()}
        request = {h: v for h, v in values.items() if not _own(h)}
        try:
            run = with_overrides({"measured": {}} if measures and "log" not in cells else {}, own)
            run["request"] = with_overrides({}, request)
        except ScenarioError as error:
            raise BadRequest(f"{where} line {line}: {error}") from None
        runs[line] = run
    return runs


def _own(header: str) -> bool:
    """A CSV header of the run itself rather than of its request."""
    return header in ("name", "log") or header.startswith(("measured.", "log."))


def csv_value(cell: str) -> Any:
    """A CSV cell as JSON would give it: an integer, a number, true or false, a list or
    object written as JSON, or the text as it stands."""
    if cell[0] in "[{":
        return json.loads(cell)
    if cell.lower() in ("true", "false"):
        return cell.lower() == "true"
    for number in (int, float):
        try:
            return number(cell)
        except ValueError:
            pass
    return cell


def build_request(read: RunLines, leave_one_out: bool) -> CalibrateRequest:
    """The HTTP request of the runs; an invalid run's error names where it came from."""
    for source, run in zip(read.sources, read.runs, strict=True):
        if not isinstance(run, dict):
            kind = type(run).__name__
            raise BadRequest(f"{source}: a run must be a JSON object, not {kind}")
    body = {"runs": read.runs, "leave_one_out": leave_one_out}
    try:
        return CalibrateRequest.model_validate(body)
    except ValidationError as error:
        raise BadRequest(named(detail_from_validation(error).message, read)) from None


def measured_runs(request: CalibrateRequest, read: RunLines) -> list[MeasuredRun]:
    """The request's runs as the fit takes them; a log refused names its file (a measurement
    refused names its run as the HTTP answer does, `runs.2.measured.step_time_s`)."""
    try:
        return request.measured_runs()
    except InvalidSpec as error:
        if error.field != "runs.log":
            raise
        raise BadRequest(named(error.message, read)) from None


def named(message: str, read: RunLines) -> str:
    """`message` with its leading `runs.N.` (and a log's `log: `) as the run's source."""
    at = re.match(r"runs\.(\d+)\.?(?:log: )?", message)
    if at is None or int(at.group(1)) >= len(read.sources):
        return message
    return f"{read.sources[int(at.group(1))]}: {message[at.end() :]}"


def report_text(answer: CalibrateOut) -> str:
    fit = answer.fit
    lines = [f"calibration of profile {fit.profile} on {len(fit.runs)} run(s):"]
    for p in fit.parameters:
        if p.status == "fitted":
            bound = f", at its {p.at_bound} bound" if p.at_bound else ""
            lines.append(
                f"  fitted {p.name} = {p.value:g} (default {p.default}{bound}; the runs alone: "
                f"{p.runs_value:g}; {p.what})"
            )
            lines.append(f"    applies to {p.applies_to}; elsewhere its default")
    if fit.shrinkage is not None and any(p.status == "fitted" for p in fit.parameters):
        shrink = fit.shrinkage
        lines.append(
            f"  each fitted value keeps {shrink.weight:.0%} of its move from its default: n / "
            f"(n + k) with n = {shrink.configurations} distinct configurations, k = {shrink.k:g}"
        )
    for p in fit.parameters:
        if p.status == "pinned":
            lines.append(f"  pinned {p.name} at {p.value}: {p.reason}")
    lines.append(
        f"  RMS log error of step times: {fit.rms_log_error_before:.4f} with the defaults, "
        f"{fit.rms_log_error:.4f} fitted"
    )
    for run in fit.runs:
        memory = ""
        if run.memory_error is not None:
            memory = (
                f"; memory {run.predicted_memory_gb} GB predicted, {run.peak_memory_gb} GB "
                f"measured ({100 * run.memory_error:+.1f}%)"
            )
        lines.append(
            f"  {run.name} ({run.engine}): step {run.measured_step_time_s:.4g} s measured, "
            f"{run.predicted_step_time_s_before:.4g} s by the defaults, "
            f"{run.predicted_step_time_s:.4g} s fitted (log error {run.log_error:+.4f}); MFU "
            f"{100 * run.measured_mfu:.1f}% measured, {100 * run.predicted_mfu:.1f}% fitted"
            f"{memory}"
        )
        if run.log is not None:
            lines.append(f"    read from its {run.log.summary}")
    loo = fit.leave_one_out
    if loo is None:
        lines.append(f"  leave-one-out: {fit.leave_one_out_note}")
    else:
        lines.append(
            f"  leave-one-out: RMS log error {loo.rms_log_error:.4f} calibrated, "
            f"{loo.rms_log_error_uncalibrated:.4f} uncalibrated; mean absolute MFU error "
            f"{100 * loo.mean_abs_mfu_error:.2f} points calibrated, "
            f"{100 * loo.mean_abs_mfu_error_uncalibrated:.2f} uncalibrated"
        )
        for left in loo.runs:
            lines.append(
                f"    {left.name}: {left.predicted_step_time_s:.4g} s predicted by the others "
                f"(log error {left.log_error:+.4f}, uncalibrated {left.log_error_uncalibrated:+.4f}"
                f"; MFU {100 * left.mfu_error:+.2f} points)"
            )
    lines += [f"  note: {note}" for note in fit.notes]
    return "\n".join(lines)


def run_calibrate(args: argparse.Namespace) -> int:
    read = collect_runs(args)
    request = build_request(read, not args.no_loo)
    runs = measured_runs(request, read)
    try:
        result = calibrate(runs, leave_one_out=request.leave_one_out)
    except CalibrationUnavailable as missing:
        print(f"layoutopt: error: {missing}", file=sys.stderr)
        return EXIT_INTERNAL
    answer = calibrate_out(result)
    assumptions = json.dumps(answer.assumptions, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(assumptions + "\n")
    if args.json:
        print(json.dumps(answer.model_dump(mode="json"), indent=2))
        return EXIT_OK
    if args.out is None:
        print(assumptions)
    print(report_text(answer), file=sys.stderr)
    if args.out is not None:
        print(f"wrote {args.out}", file=sys.stderr)
    return EXIT_OK


def register_calibrate_command(commands: Any) -> None:
    cmd = commands.add_parser(
        "calibrate",
        help="fit the cost model's assumptions to measured runs (RUNS.jsonl or .csv)",
        description="Fit efficiencies and overlaps to measured runs; write them as an "
        "`assumptions` object any request takes.",
    )
    cmd.add_argument(
        "runs",
        type=Path,
        nargs="?",
        help='JSONL, one run a line: {"request": ..., "measured": {"step_time_s": ...}} '
        "(or tokens_per_s_per_gpu, samples_per_s, mfu; optionally peak_memory_gb), or "
        '{"request": ..., "log": "trial-1.log"}; or a .csv file, a run a row, its headers the '
        "same fields' dotted paths (model, cluster.gpus, layout.tp, measured.step_time_s, log, "
        "name); - for standard input (JSONL)",
    )
    cmd.add_argument(
        "--log",
        type=Path,
        action="append",
        default=[],
        help="a training log (Megatron-LM, NeMo / Megatron-Bridge, torchtitan, DeepSpeed) "
        "measuring a run; repeatable, each with its --request",
    )
    cmd.add_argument(
        "--request",
        type=Path,
        action="append",
        default=[],
        dest="requests",
        metavar="TRIAL.json",
        help="the request the --log of the same place ran (an evaluate request with its "
        'layout and engine, or {"name": ..., "request": ...})',
    )
    cmd.add_argument(
        "--log-format",
        choices=FORMATS,
        help="the engine that printed every --log (default: detected from its lines)",
    )
    cmd.add_argument("--out", type=Path, help="write the fitted assumptions (JSON) here")
    cmd.add_argument("--no-loo", action="store_true", help="skip the leave-one-out refits")
    cmd.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    cmd.set_defaults(run=run_calibrate)
