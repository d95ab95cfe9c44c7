"""`layoutopt`: the command line. Same request shape as the HTTP API (`--spec FILE.json`,
or `--spec -` for standard input), with flags that override it.

Exit status: 0 on success (`optimal` or `feasible`), 2 on a bad request, 3 when the search
proved that no layout satisfies the request (`infeasible`), 4 when the time ran out before a
layout or that proof (`unknown`: retry with more time), 5 when `tune` waits for trial logs
(the trials to run are listed), 1 on an internal fault.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from api import __version__
from api.cli.calibrate import register_calibrate_command
from api.cli.common import (
    LAYOUT_FLAGS,
    BadRequest,
    add_job_flags,
    add_layout_flags,
    emit,
    request_data,
)
from api.cli.export import register_export_command
from api.cli.plan import register_plan_command
from api.cli.render import estimate_text
from api.cli.search import register_search_commands
from api.cli.stages import register_stages_command
from api.cli.study import register_study_commands
from api.cli.tune import register_tune_command
from api.cli.validate import register_validate_command
from api.errors import (
    EXIT_BAD_REQUEST,
    EXIT_INTERNAL,
    EXIT_OK,
    detail_from_domain,
    detail_from_validation,
)
from api.schemas import ErrorDetail, ErrorOut, EvaluateRequest, estimate_out, evaluated
from models.errors import InvalidSpec


def run_evaluate(args: argparse.Namespace) -> int:
    request = EvaluateRequest.model_validate(request_data(args, {"layout": LAYOUT_FLAGS}))
    emit(estimate_out(evaluated(request)), args.json, estimate_text)
    return EXIT_OK


def run_serve(args: argparse.Namespace) -> int:
    try:
        from api.http import serve
    except ModuleNotFoundError as missing:  # installed without the server extras
        message = (
            f"layoutopt serve needs the server extras ({missing.name} is not installed): "
            "pip install 'layoutopt[server]'"
        )
        return fail(ErrorDetail(code="not_installed", message=message), EXIT_INTERNAL, False)
    serve(args.host, args.port)
    return EXIT_OK


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port must be 1-65535, got {port}")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="layoutopt",
        description="Pick the parallelism layout for training a transformer.",
        epilog="exit status: 0 success, 1 internal fault, 2 bad request, 3 infeasible "
        "(proved), 4 unknown (time ran out first), 5 tune waiting for trial logs",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    evaluate_cmd = commands.add_parser("evaluate", help="price one layout: memory, bubble, MFU")
    add_job_flags(evaluate_cmd)
    add_layout_flags(evaluate_cmd)
    evaluate_cmd.set_defaults(run=run_evaluate)

    serve_cmd = commands.add_parser("serve", help="start the HTTP service")
    serve_cmd.add_argument("--host", help="default $HOST or 127.0.0.1")
    serve_cmd.add_argument("--port", type=_port, help="default $PORT or 8000")
    serve_cmd.set_defaults(run=run_serve)

    for register in _EXTRA_COMMANDS:
        register(commands)
    return parser


# Commands that live in their own modules: each registers its subparser.
_EXTRA_COMMANDS: tuple[Callable[[Any], None], ...] = (
    register_search_commands,
    register_export_command,
    register_validate_command,
    register_study_commands,
    register_calibrate_command,
    register_plan_command,
    register_stages_command,
    register_tune_command,
)


def fail(detail: ErrorDetail, status: int, as_json: bool) -> int:
    """The error on stderr: a line of text, or under --json the HTTP API's error object."""
    if as_json:
        print(json.dumps(ErrorOut(error=detail).model_dump()), file=sys.stderr)
    else:
        print(f"layoutopt: error: {detail.message}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    as_json = bool(getattr(args, "json", False))
    try:
        return int(args.run(args))
    except ValidationError as error:
        return fail(detail_from_validation(error), EXIT_BAD_REQUEST, as_json)
    except InvalidSpec as error:
        return fail(detail_from_domain(error), EXIT_BAD_REQUEST, as_json)
    except BadRequest as error:
        detail = ErrorDetail(code="invalid_request", message=str(error))
        return fail(detail, EXIT_BAD_REQUEST, as_json)
    except KeyboardInterrupt:
        return fail(ErrorDetail(code="interrupted", message="interrupted"), 130, as_json)
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours; stop writing quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as error:  # the last line of defence: no stack trace unless asked
        if os.environ.get("LAYOUTOPT_DEBUG"):
            raise
        message = (
            f"internal error ({type(error).__name__}: {error}); set LAYOUTOPT_DEBUG=1 for a trace"
        )
        return fail(ErrorDetail(code="internal_error", message=message), EXIT_INTERNAL, as_json)


if __name__ == "__main__":
    sys.exit(main())
