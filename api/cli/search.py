"""`layoutopt optimize`, `pareto` and `trials`: the search commands, registered in api/cli/main.py.

Same request as POST /v1/optimize and /v1/pareto (`--spec FILE.json`), with flags for the
job and for the `search` object laid over it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.cli.common import BadRequest, add_job_flags, emit, request_data
from api.cli.render import optimize_text, pareto_text, trials_text
from api.errors import EXIT_INFEASIBLE, EXIT_OK, EXIT_UNKNOWN
from api.schemas import (
    SearchRequest,
    TrialsOut,
    TrialsRequest,
    optimize_out,
    pareto_out,
    trials_out,
)
from optimizer import SolveSettings
from optimizer.searches import optimize, pareto
from optimizer.trials import plan_trials

DEFAULT_TIME_LIMIT_S = 10.0
_SEARCH_FLAGS = (
    "tp",
    "pp",
    "cp",
    "vpp",
    "max_vpp",
    "zero_stages",
    "recompute",
    "micro_batches",
    "memory_limit_gb",
    "memory_fit",
    "require_tp_divides_kv_heads",
    "even_stages",
    "min_interleaved_pp",
    "placement",
    "schedules",
    "ep",
)


def _comma_list(item: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        try:
            return [item(part.strip()) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list, got {text!r}"
            ) from None

    return parse


def add_search_flags(parser: argparse.ArgumentParser) -> None:
    for name in ("tp", "pp", "cp", "vpp", "ep"):
        parser.add_argument(f"--{name}", type=int, help=f"fix {name}")
    parser.add_argument(
        "--max-vpp",
        type=int,
        dest="max_vpp",
        help="most interleaved chunks (default: workshop 4, standard 8)",
    )
    parser.add_argument(
        "--zero-stages", type=_comma_list(int), dest="zero_stages", help="allowed, e.g. 1,2"
    )
    parser.add_argument("--recompute", type=_comma_list(str), help="allowed, e.g. none,full")
    parser.add_argument(
        "--schedules",
        type=_comma_list(str),
        help="allowed pipeline schedules, e.g. 1f1b,zero-bubble,dualpipe (default: all priced)",
    )
    parser.add_argument(
        "--micro-batches", type=_comma_list(int), dest="micro_batches", help="allowed sizes"
    )
    parser.add_argument(
        "--memory-limit-gb", type=float, dest="memory_limit_gb", help="default: GPU capacity"
    )
    parser.add_argument(
        "--memory-fit",
        choices=("interval", "point"),
        dest="memory_fit",
        help="what must be under the limit: the memory interval's upper end (default) or the "
        "estimate alone",
    )
    parser.add_argument(
        "--allow-tp-beyond-kv-heads",
        action="store_const",
        const=False,
        dest="require_tp_divides_kv_heads",
        help="let tp not divide the KV heads (engines such as Megatron-LM refuse it)",
    )
    parser.add_argument(
        "--even-stages",
        action="store_const",
        const=True,
        dest="even_stages",
        help="every pipeline chunk the same number of layers (engines without uneven splits)",
    )
    parser.add_argument(
        "--min-interleaved-pp",
        type=int,
        dest="min_interleaved_pp",
        help="the fewest pipeline stages interleaving may run on (3 where Megatron-LM asserts pp > 2)",
    )
    parser.add_argument(
        "--placement", type=_comma_list(str), help="fix the order, innermost first: tp,cp,pp,dp"
    )
    parser.add_argument("--time-limit-s", type=float, dest="time_limit_s", help="default 10")
    parser.add_argument(
        "--no-explain",
        action="store_false",
        dest="explain",
        default=None,
        help="the layout alone: skip what binds it and what each choice buys (cheaper)",
    )
    parser.add_argument("--workers", type=int, default=1, help="CP-SAT workers (default 1)")


def search_data(args: argparse.Namespace) -> dict[str, Any]:
    """The search request's body: the spec file with the job and search flags laid over it."""
    data = request_data(args, {"search": _SEARCH_FLAGS})
    if args.time_limit_s is not None:
        data["time_limit_s"] = args.time_limit_s
    if args.explain is not None:
        data["explain"] = args.explain
    if args.workers < 1:
        raise BadRequest(f"--workers must be at least 1, got {args.workers}")
    return data


def search_request(args: argparse.Namespace) -> SearchRequest:
    return SearchRequest.model_validate(search_data(args))


def _run_search(
    args: argparse.Namespace,
    search: Callable[..., Any],
    to_out: Callable[[Any], Any],
    text: Callable[[Any], str],
) -> int:
    request = search_request(args)
    answer = to_out(searched(request, search, args.workers))
    emit(answer, args.json, text)
    return exit_status(answer.status)


def searched(request: SearchRequest, search: Callable[..., Any], workers: int = 1) -> Any:
    """What `search` (optimize or pareto) finds for the request, on `workers` CP-SAT workers."""
    budget = SolveSettings(request.time_limit_s or DEFAULT_TIME_LIMIT_S, workers)
    return search(request.to_request(), budget)


def exit_status(status: str) -> int:
    """What a shell script branches on: proved infeasible (3), nothing proved (4)."""
    return {"infeasible": EXIT_INFEASIBLE, "unknown": EXIT_UNKNOWN}.get(status, EXIT_OK)


def run_optimize(args: argparse.Namespace) -> int:
    return _run_search(args, optimize, optimize_out, optimize_text)


def run_pareto(args: argparse.Namespace) -> int:
    return _run_search(args, pareto, pareto_out, pareto_text)


def run_trials(args: argparse.Namespace) -> int:
    data = search_request(args).model_dump(mode="json", exclude_unset=True)
    request = TrialsRequest.model_validate(data | {"k": args.k})
    budget = SolveSettings(request.time_limit_s or DEFAULT_TIME_LIMIT_S, args.workers)
    answer = trials_out(plan_trials(request.to_request(), request.k, budget))
    if args.out is not None:
        write_trials(answer, request, args.out)
    emit(answer, args.json, trials_text)
    return exit_status(answer.status)


# The trial request's fields an evaluate request of one trial's layout has no use for.
TRIAL_ONLY = frozenset({"k", "search", "time_limit_s", "explain"})


def write_trials(answer: TrialsOut, request: TrialsRequest, folder: Path) -> None:
    """Each trial in a folder of its own: the engine's artefact, and `trial.json`, the
    evaluate request of its layout (what calibrate joins the trial's log to)."""
    stated = request.model_dump(mode="json", exclude_unset=True)  # defaults stay defaults
    body = {key: value for key, value in stated.items() if key not in TRIAL_ONLY}
    body["engine"] = request.engine  # the run's engine, which calibration prices it under
    for trial in answer.trials:
        where = folder / trial.name.replace(" ", "-")
        where.mkdir(parents=True, exist_ok=True)
        layout = trial.layout.model_dump(mode="json", exclude={"dp", "micro_batches"})
        record = {"name": trial.name, "steps": trial.steps, "why": trial.why}
        record["request"] = body | {"layout": layout}
        (where / "trial.json").write_text(json.dumps(record, indent=2) + "\n")
        if trial.export is not None:
            (where / trial.export.filename).write_text(trial.export.text)
        print(f"wrote {where}", file=sys.stderr)


def register_search_commands(commands: Any) -> None:
    optimize_cmd = commands.add_parser(
        "optimize", help="the layout of highest MFU that fits, proved optimal, and why"
    )
    add_job_flags(optimize_cmd)
    add_search_flags(optimize_cmd)
    optimize_cmd.set_defaults(run=run_optimize)

    pareto_cmd = commands.add_parser("pareto", help="the memory/MFU frontier of layouts")
    add_job_flags(pareto_cmd)
    add_search_flags(pareto_cmd)
    pareto_cmd.set_defaults(run=run_pareto)

    trials_cmd = commands.add_parser(
        "trials", help="the few runs whose step times settle the layouts tied with the optimum"
    )
    add_job_flags(trials_cmd)
    add_search_flags(trials_cmd)
    trials_cmd.add_argument("--k", type=int, default=3, help="at most this many runs (default 3)")
    trials_cmd.add_argument(
        "--out", type=Path, help="write each trial's artefact and trial.json in a folder here"
    )
    trials_cmd.set_defaults(run=run_trials)
