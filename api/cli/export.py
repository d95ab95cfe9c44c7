"""`layoutopt export`: a layout in the training engine's own input (Megatron-LM flags,
torchtitan command-line overrides, a DeepSpeed JSON config, Megatron-Bridge overrides), the
artefact of POST /v1/export.

The request is evaluate's (`--spec`, layout flags, `--engine`); with `--from-optimize` it is
optimize's, and its best layout is exported. Exit 2 names every rule of the engine the layout
breaks.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from api.cli.common import (
    LAYOUT_FLAGS,
    BadRequest,
    add_job_flags,
    add_layout_flags,
    request_data,
)
from api.cli.search import exit_status, searched
from api.errors import EXIT_OK
from api.schemas import (
    ErrorDetail,
    ErrorOut,
    EvaluateRequest,
    ExportOut,
    OptimizeOut,
    SearchRequest,
    export_answer,
    optimize_out,
)
from models.errors import InvalidSpec
from optimizer.searches import optimize

# Under --from-optimize a layout flag fixes the search to that one value.
FIXED_IN_SEARCH = ("tp", "pp", "cp", "vpp", "ep")
ALLOWED_IN_SEARCH = {
    "zero": "zero_stages",
    "recompute": "recompute",
    "micro_batch": "micro_batches",
    "schedule": "schedules",
}


def evaluate_request(args: argparse.Namespace) -> EvaluateRequest:
    if args.time_limit_s is not None:
        raise BadRequest("--time-limit-s applies only with --from-optimize")
    return EvaluateRequest.model_validate(request_data(args, {"layout": LAYOUT_FLAGS}))


def optimize_request(args: argparse.Namespace) -> SearchRequest:
    """The spec as an optimize request, the layout flags fixing the search's values; only the
    layout is wanted, so the explanations are skipped unless the spec asks for them."""
    if args.dp is not None:
        raise BadRequest("--dp is derived: with --from-optimize the search chooses it")
    flags = vars(args).copy()
    for flag, field in ALLOWED_IN_SEARCH.items():
        value = flags.pop(flag)
        flags[field] = None if value is None else [value]
    search_flags = (*FIXED_IN_SEARCH, *ALLOWED_IN_SEARCH.values())
    data = request_data(argparse.Namespace(**flags), {"search": search_flags})
    data.setdefault("explain", False)
    if args.time_limit_s is not None:
        data["time_limit_s"] = args.time_limit_s
    return SearchRequest.model_validate(data)


def optimized_export(args: argparse.Namespace) -> ExportOut | OptimizeOut:
    """The best layout's export; the answer itself when there is no best layout."""
    request = optimize_request(args)
    answer = optimize_out(searched(request, optimize))
    if answer.best is None:
        return answer
    if answer.best.export is None:
        raise InvalidSpec(answer.best.export_error or "the engine cannot run it", "engine")
    return answer.best.export


def no_layout(answer: OptimizeOut, as_json: bool) -> int:
    """Infeasible (3) or unknown (4): why, on standard error."""
    if answer.status == "infeasible":
        why = "; ".join(c.description for c in answer.conflict) or (
            "run `layoutopt optimize` on the same request for the rules that conflict"
        )
        message = f"optimize proved that no layout satisfies the request: {why}"
    else:
        message = (
            f"optimize found no layout and proved none impossible: {' '.join(answer.warnings)}"
        )
    if as_json:
        detail = ErrorDetail(code=answer.status, message=message)
        print(json.dumps(ErrorOut(error=detail).model_dump()), file=sys.stderr)
    else:
        print(f"layoutopt: {message}", file=sys.stderr)
    return exit_status(answer.status)


def write(artefact: ExportOut, out: Path | None, as_json: bool) -> None:
    """The artefact's own text (or under --json the export object) to standard output or
    to `out`."""
    text = json.dumps(artefact.model_dump(), indent=2) + "\n" if as_json else artefact.text
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as error:
        raise BadRequest(f"cannot write {out}: {error.strerror}") from None
    print(f"layoutopt: wrote {artefact.format} for {artefact.engine} to {out}", file=sys.stderr)


def run_export(args: argparse.Namespace) -> int:
    if args.from_optimize:
        found = optimized_export(args)
        if isinstance(found, OptimizeOut):
            return no_layout(found, args.json)
        artefact = found
    else:
        artefact = export_answer(evaluate_request(args))
    write(artefact, args.out, args.json)
    return EXIT_OK


def register_export_command(commands: Any) -> None:
    export_cmd = commands.add_parser(
        "export",
        help="the layout in the engine's own input: Megatron-LM flags, torchtitan overrides, "
        "DeepSpeed JSON, NeMo overrides",
        description="Write the layout as the request's engine (--engine) reads it. Exit 2 "
        "naming the rules it breaks when the engine cannot run it.",
    )
    add_job_flags(export_cmd)
    add_layout_flags(export_cmd)
    export_cmd.add_argument(
        "--out", type=Path, metavar="FILE", help="write the artefact to FILE, not standard output"
    )
    export_cmd.add_argument(
        "--from-optimize",
        action="store_true",
        help="read the request as optimize's (layout flags fix the search's values) and "
        "export its best layout; exit 3 if infeasible, 4 if the time ran out first",
    )
    export_cmd.add_argument(
        "--time-limit-s",
        type=float,
        dest="time_limit_s",
        help="with --from-optimize: the search's limit (default 10)",
    )
    export_cmd.set_defaults(run=run_export)
