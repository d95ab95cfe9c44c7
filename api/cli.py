"""`layoutopt`: the command line. Same request shape as the HTTP API (`--spec FILE.json`),
with flags that override it. Exit 0 on success, 2 on a bad request, 1 on an internal fault.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from api.cli_common import (
    LAYOUT_FLAGS,
    BadRequest,
    add_job_flags,
    add_layout_flags,
    emit,
    request_data,
)
from api.cli_search import register_search_commands
from api.cli_validate import register_validate_command
from api.errors import (
    EXIT_BAD_REQUEST,
    EXIT_INTERNAL,
    EXIT_OK,
    detail_from_domain,
    detail_from_validation,
)
from api.render import estimate_text
from api.schemas import EvaluateRequest, estimate_out
from models.errors import InvalidSpec
from optimizer.cost_model import evaluate


def run_evaluate(args: argparse.Namespace) -> int:
    request = EvaluateRequest.model_validate(request_data(args, {"layout": LAYOUT_FLAGS}))
    estimate = evaluate(request.job(), request.layout, request.profile, request.assumptions)
    emit(estimate_out(estimate), args.json, estimate_text)
    return EXIT_OK


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api.logs import log_config
    from api.main import create_app
    from api.settings import Settings

    settings = Settings()  # WORKERS, QUEUE_DEPTH, SOLVER_TIME_LIMIT_S, ... from the environment
    uvicorn.run(
        create_app(settings),
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_config=log_config(settings.log_level),
        access_log=False,  # api/middleware.py logs each request, with its id
        timeout_graceful_shutdown=int(settings.solver_time_limit_s) + 5,  # let solves finish
    )
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="layoutopt", description="Pick the parallelism layout for training a transformer."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    evaluate_cmd = commands.add_parser("evaluate", help="price one layout: memory, bubble, MFU")
    add_job_flags(evaluate_cmd)
    add_layout_flags(evaluate_cmd)
    evaluate_cmd.set_defaults(run=run_evaluate)

    serve_cmd = commands.add_parser("serve", help="start the HTTP service")
    serve_cmd.add_argument("--host", help="default $HOST or 127.0.0.1")
    serve_cmd.add_argument("--port", type=int, help="default $PORT or 8000")
    serve_cmd.set_defaults(run=run_serve)

    for register in _EXTRA_COMMANDS:
        register(commands)
    return parser


# Commands that live in their own modules: each registers its subparser.
_EXTRA_COMMANDS: tuple[Callable[[Any], None], ...] = (
    register_search_commands,
    register_validate_command,
)


def fail(message: str, status: int) -> int:
    print(f"layoutopt: error: {message}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ValidationError as error:
        return fail(detail_from_validation(error).message, EXIT_BAD_REQUEST)
    except InvalidSpec as error:
        return fail(detail_from_domain(error).message, EXIT_BAD_REQUEST)
    except BadRequest as error:
        return fail(str(error), EXIT_BAD_REQUEST)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours; stop writing quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as error:  # the last line of defence: no stack trace unless asked
        if os.environ.get("LAYOUTOPT_DEBUG"):
            raise
        return fail(
            f"internal error ({type(error).__name__}: {error}); set LAYOUTOPT_DEBUG=1 for a trace",
            EXIT_INTERNAL,
        )


if __name__ == "__main__":
    sys.exit(main())
