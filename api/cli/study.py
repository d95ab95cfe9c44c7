"""`layoutopt study SPEC --out FILE` and `layoutopt scaling`, registered in api/cli/main.py.

A study runs its scenarios on a local process pool (`--workers`, one CP-SAT worker each) or
a Dask cluster (`--executor dask://HOST:PORT`, or $DASK_SCHEDULER_ADDRESS), writes each row
as it finishes, and with `--resume` skips the scenarios the output already holds (by key):
an interrupted study loses nothing and repeats nothing. Ctrl-C (exit 130) and SIGTERM
(`kill PID`, exit 143) stop it alike: the workers ended, the rows so far kept. A worker
ends with the CLI however the CLI ends, kill -9 included.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from api.cli.common import BadRequest, add_job_flags, at_least_one, emit, read_json, request_data
from api.cli.search import _SEARCH_FLAGS, DEFAULT_TIME_LIMIT_S, add_search_flags
from api.errors import EXIT_BAD_REQUEST, EXIT_INFEASIBLE, EXIT_INTERNAL, EXIT_OK, EXIT_UNKNOWN
from api.scenarios import scenario_request
from api.schemas import ScalingOut, ScalingRequest, scaling_out
from optimizer import SolveSettings
from optimizer.studies import (
    FAILED,
    ExecutorError,
    Mode,
    Row,
    RowWriter,
    Scenario,
    StudyError,
    StudySpec,
    check_count,
    check_values,
    columns,
    dask_executor,
    existing_rows,
    expand,
    in_flight_for,
    keys_of,
    local_executor,
    output_format,
    plot_study,
    proved,
    run_settings,
    run_study,
    scaling_curve,
    scheduler_address,
    status_counts,
    usable_cores,
)
from optimizer.studies.execute import Terminated, terminate_as_interrupt

# The shell's statuses for a command ended by a signal: 128 + SIGINT, 128 + SIGTERM.
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM
INSTALL_HINT = "pip install 'layoutopt[studies]'"
# YAML 1.1 reads 15e12 as text; studies write token counts that way, so read it as 1.2 does.
_YAML_FLOAT = re.compile(r"^[-+]?(\d[\d_]*)?(\.\d*)?[eE][-+]?\d+$")


def _needed_modules(args: argparse.Namespace) -> list[str]:
    """What this run will import, checked before any scenario runs (not after hours)."""
    needed = ["tqdm"]
    needed += ["yaml"] if args.spec.suffix.lower() in (".yaml", ".yml") else []
    needed += ["pyarrow"] if args.out.suffix.lower() == ".parquet" else []
    needed += ["matplotlib"] if args.plot is not None else []
    needed += ["distributed"] if scheduler_address(_executor_name(args)) else []
    return needed


def missing_extra(args: argparse.Namespace) -> str | None:
    for name in _needed_modules(args):
        if not _importable(name):
            return f"layoutopt study needs the studies extras ({name} is not installed): {INSTALL_HINT}"
    return None


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a finder that refuses it, or a half-installed package
        return False


def load_spec(path: Path) -> StudySpec:
    """A YAML or JSON study spec, validated (a ValidationError names the field)."""
    yaml_file = path.suffix.lower() in (".yaml", ".yml")
    data = _read_yaml(path) if yaml_file else read_json(path)
    if not isinstance(data, dict):
        raise BadRequest(f"{path} must hold an object: base, grid, scenarios, compute, ...")
    return StudySpec.model_validate(data)


def _read_yaml(path: Path) -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_FLOAT, list("-+0123456789."))
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)  # noqa: S506 (safe)
    except OSError as error:
        raise BadRequest(f"cannot read {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise BadRequest(f"{path} is not valid YAML: {error}") from None


def _executor_name(args: argparse.Namespace) -> str:
    return args.executor or os.environ.get("DASK_SCHEDULER_ADDRESS") or "local"


@contextmanager
def executor_for(args: argparse.Namespace) -> Iterator[tuple[Executor, int]]:
    """The executor and how many scenarios it runs at once."""
    address = scheduler_address(_executor_name(args))
    if address is None:
        with local_executor(args.workers) as pool:
            yield pool, args.workers
    else:
        with dask_executor(address) as (executor, threads):
            yield executor, threads


def _progress(total: int, done: int) -> Any:
    from tqdm import tqdm

    # Quiet unless a person watches: no bar in logs, pipes or CI.
    return tqdm(
        total=total,
        initial=done,
        unit="scenario",
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
        dynamic_ncols=True,
    )


def _run(
    todo: list[Scenario], args: argparse.Namespace, spec: StudySpec, writer: RowWriter, done: int
) -> Counter[str]:
    settings = run_settings(spec, scenario_request)
    tally: Counter[str] = Counter()
    with executor_for(args) as (executor, workers), _progress(done + len(todo), done) as bar:
        for row in run_study(todo, settings, executor, in_flight_for(workers)):
            writer.write(row)
            tally[str(row["status"])] += 1
            bar.update(1)
            bar.set_postfix(failed=sum(tally[s] for s in FAILED), refresh=False)
    return tally


def run_study_command(args: argparse.Namespace) -> int:
    args.spec = args.spec or args.spec_flag
    if args.spec is None:
        raise BadRequest("layoutopt study needs a spec: layoutopt study SPEC.yaml --out FILE")
    missing = missing_extra(args)
    if missing is not None:
        print(f"layoutopt: error: {missing}", file=sys.stderr)
        return EXIT_INTERNAL
    start = time.perf_counter()
    try:
        output_format(args.out)
        scheduler_address(_executor_name(args))
        spec = load_spec(args.spec)
        check_count(spec)  # before the values: counting is free, checking is not
        check_values(spec, scenario_request)
        scenarios = expand(spec)
        mode: Mode = "resume" if args.resume else "overwrite" if args.force else "new"
        writer = RowWriter(args.out, columns(spec.override_paths()), mode)
    except StudyError as error:
        raise BadRequest(error.message) from None
    with writer:
        done = set(keys_of(existing_rows(args.out)))
        todo = [scenario for scenario in scenarios if scenario.key not in done]
        try:
            with terminate_as_interrupt():
                tally = _run(todo, args, spec, writer, len(scenarios) - len(todo))
        except KeyboardInterrupt as stop:
            how = "terminated" if isinstance(stop, Terminated) else "interrupted"
            print(
                f"layoutopt: {how}; the rows so far are in {writer.target}: rerun with --resume",
                file=sys.stderr,
            )
            return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
        except ExecutorError as error:
            print(f"layoutopt: error: {error}", file=sys.stderr)
            return EXIT_INTERNAL
        writer.finish()
    summary = f"{len(todo)} run, {len(scenarios) - len(todo)} already in {args.out}"
    print(
        f"study: {len(scenarios)} scenarios ({summary}): {_counts(tally)}; {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
    if args.plot is not None:
        _plot(args)
    return EXIT_OK


def _counts(tally: Counter[str]) -> str:
    return ", ".join(f"{n} {status}" for status, n in tally.most_common()) or "nothing to run"


def _plot(args: argparse.Namespace) -> None:
    rows: list[Row] = existing_rows(args.out)
    written = plot_study(rows, args.plot, source=args.spec.name)
    if written:
        print(f"plots: {', '.join(str(path) for path in written)}", file=sys.stderr)
    else:
        print(
            f"plots: none drawn, no scenario has a layout ({status_counts(rows)})", file=sys.stderr
        )


def _gpu_counts(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected GPU counts like 64,128,256, got {text!r}"
        ) from None


def _gpu_range(text: str) -> dict[str, int]:
    low, sep, high = text.partition(":")
    try:
        return {"min_gpus": int(low), "max_gpus": int(high)}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected MIN:MAX GPUs like 64:1024, got {text!r}"
        ) from None


def run_scaling(args: argparse.Namespace) -> int:
    data = request_data(args, {"search": _SEARCH_FLAGS})
    data.setdefault("cluster", {})
    for name in ("gpu_counts", "gpu_range", "time_limit_s", "explain"):
        if getattr(args, name) is not None:
            data[name] = getattr(args, name)
    request = ScalingRequest.model_validate(data)
    try:
        counts = request.counts()
    except StudyError as error:
        raise BadRequest(error.message) from None
    start = time.perf_counter()
    budget = SolveSettings(request.time_limit_s or DEFAULT_TIME_LIMIT_S, args.workers)
    points = scaling_curve(request.to_request(), counts, budget)
    answer = scaling_out(points, proved(points), time.perf_counter() - start)
    emit(answer, args.json, scaling_text)
    return scaling_exit(answer)


def scaling_exit(answer: ScalingOut) -> int:
    """0 when any count has a layout; else what the points proved (4 before 3: a time-out
    elsewhere means infeasibility is not proved for the whole curve), 2 if every count was
    refused."""
    statuses = {point.status for point in answer.points}
    if statuses & {"optimal", "feasible"}:
        return EXIT_OK
    if "unknown" in statuses:
        return EXIT_UNKNOWN
    return EXIT_INFEASIBLE if "infeasible" in statuses else EXIT_BAD_REQUEST


SCALING_HEADER = (
    "gpus",
    "nodes",
    "status",
    "tp",
    "pp",
    "cp",
    "dp",
    "vpp",
    "MFU",
    "tokens/s/GPU",
    "tokens/s",
    "step s",
)


def scaling_text(answer: ScalingOut) -> str:
    """The curve as a table, one GPU count a line."""
    lines = [SCALING_HEADER]
    for point in answer.points:
        lay = None if point.best is None else point.best.layout
        degrees = (
            ("-",) * 5
            if lay is None
            else (str(lay.tp), str(lay.pp), str(lay.cp), str(lay.dp), str(lay.vpp))
        )
        figures = (
            ("-",) * 4
            if point.best is None
            else (
                f"{100 * point.best.mfu:.2f}%",
                f"{point.best.tokens_per_s_per_gpu:,.1f}",
                f"{point.tokens_per_s or 0:,.0f}",
                f"{point.best.step_time_s:.3f}",
            )
        )
        lines.append((f"{point.gpus:,}", f"{point.nodes:,}", point.status, *degrees, *figures))
    widths = [max(len(row[i]) for row in lines) for i in range(len(SCALING_HEADER))]
    text = [
        "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
        for row in lines
    ]
    errors = [f"{point.gpus} GPUs: {point.error}" for point in answer.points if point.error]
    state = "every point proved" if answer.complete else "not every point proved (time limit)"
    return "\n".join([*text, *errors, "", f"{state}; {answer.wall_s:.2f} s"])


def register_study_commands(commands: Any) -> None:
    study = commands.add_parser(
        "study",
        help="a batch of what-if scenarios: one row each, streamed to CSV, Parquet or JSONL",
        description="Runs every scenario of a study spec (YAML or JSON: base, grid, scenarios, "
        "compute, train_tokens, gpu_hour_cost) and writes one row per scenario as it finishes.",
    )
    study.add_argument("spec", type=Path, nargs="?", help="the study spec, .yaml/.yml or .json")
    study.add_argument("--spec", type=Path, dest="spec_flag", help="the same, as a flag")
    study.add_argument("--out", type=Path, required=True, help="results: .csv, .parquet or .jsonl")
    study.add_argument("--resume", action="store_true", help="skip the scenarios --out holds")
    study.add_argument("--force", action="store_true", help="replace an existing --out")
    study.add_argument("--plot", type=Path, metavar="DIR", help="draw the standard plots here")
    study.add_argument(
        "--executor",
        help="local (default) or dask://HOST:PORT (default $DASK_SCHEDULER_ADDRESS if set)",
    )
    study.add_argument(
        "--workers",
        type=at_least_one("--workers"),
        default=usable_cores(),
        help="local processes (default: cores)",
    )
    study.set_defaults(run=run_study_command)

    scaling = commands.add_parser(
        "scaling", help="one job's best layout and throughput at each GPU count (for schedulers)"
    )
    add_job_flags(scaling)
    add_search_flags(scaling)
    scaling.add_argument(
        "--gpu-counts", type=_gpu_counts, dest="gpu_counts", help="e.g. 64,128,256"
    )
    scaling.add_argument(
        "--gpu-range",
        type=_gpu_range,
        dest="gpu_range",
        help="every whole-node count, e.g. 64:1024",
    )
    scaling.set_defaults(run=run_scaling)
