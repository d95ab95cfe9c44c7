"""`layoutopt`: the command line. Same request shape as the HTTP API (`--spec FILE.json`),
with flags that override it. Exit 0 on success, 2 on a bad request, 1 on an internal fault.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

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

# flag -> (section of the request, field); None means top level
_FLAG_FIELDS: dict[str, tuple[str | None, str]] = {
    "gpus": ("cluster", "gpus"),
    "gpu": ("cluster", "gpu"),
    "gpus_per_node": ("cluster", "gpus_per_node"),
    "nvlink_domain": ("cluster", "nvlink_domain"),
    "global_batch": ("training", "global_batch"),
    "seq_len": ("training", "seq_len"),
    "profile": (None, "profile"),
}
_LAYOUT_FLAGS = (
    "tp",
    "pp",
    "cp",
    "dp",
    "vpp",
    "micro_batch",
    "zero",
    "recompute",
    "schedule",
    "ep",
)


class BadRequest(Exception):
    """A request the CLI cannot even build (unreadable file, malformed JSON)."""


def add_job_flags(parser: argparse.ArgumentParser) -> None:
    """Flags every command shares: the spec file, the job, output format."""
    parser.add_argument("--spec", type=Path, help="request JSON (the HTTP body); flags override it")
    parser.add_argument("--model", help="preset name, or a path to a spec / HF config.json file")
    parser.add_argument("--gpus", type=int, help="GPUs in the job")
    parser.add_argument("--gpu", help="GPU preset (h100-sxm, a100-80gb, h200-sxm, b200, mi300x)")
    parser.add_argument("--gpus-per-node", type=int, help="GPUs per NVLink domain (default 8)")
    parser.add_argument(
        "--nvlink-domain", type=int, help="GPUs sharing NVLink beyond a node (GB200 NVL72: 72)"
    )
    parser.add_argument("--global-batch", type=int, help="sequences per step (default 2048)")
    parser.add_argument("--seq-len", type=int, help="tokens per sequence (default 8192)")
    parser.add_argument("--profile", help="cost-model profile")
    parser.add_argument("--json", action="store_true", help="print the exact JSON answer")


def add_layout_flags(parser: argparse.ArgumentParser) -> None:
    for name in ("tp", "pp", "cp", "dp", "vpp", "micro_batch", "ep"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name)
    parser.add_argument("--zero", type=int, help="ZeRO stage 0-3")
    parser.add_argument("--recompute", help="none, selective or full")
    parser.add_argument("--schedule", help="1f1b, zero-bubble or dualpipe (profile standard)")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as error:
        raise BadRequest(f"cannot read {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise BadRequest(f"{path} is not valid JSON: {error.msg} at line {error.lineno}") from None


def request_data(
    args: argparse.Namespace, section_flags: dict[str, tuple[str, ...]]
) -> dict[str, Any]:
    """The spec file's JSON with every given flag laid over it."""
    data: dict[str, Any] = {}
    if args.spec is not None:
        loaded = read_json(args.spec)
        if not isinstance(loaded, dict):
            raise BadRequest(f"{args.spec} must hold a JSON object, the request body")
        data = loaded
    if args.model is not None:
        path = Path(args.model)
        data["model"] = read_json(path) if path.suffix == ".json" or path.is_file() else args.model
    for flag, (section, field) in _FLAG_FIELDS.items():
        value = getattr(args, flag, None)
        if value is not None:
            target = data if section is None else data.setdefault(section, {})
            if not isinstance(target, dict):
                raise BadRequest(f"'{section}' in the spec must be an object")
            target[field] = value
    for section, flags in section_flags.items():
        for flag in flags:
            value = getattr(args, flag, None)
            if value is not None:
                data.setdefault(section, {})[flag] = value
    return data


def emit(answer: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    if as_json:
        print(json.dumps(answer.model_dump(mode="json"), indent=2))
    else:
        print(text(answer))


def run_evaluate(args: argparse.Namespace) -> int:
    request = EvaluateRequest.model_validate(request_data(args, {"layout": _LAYOUT_FLAGS}))
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


# Commands that live in their own modules register here: (subparsers) -> None.
_EXTRA_COMMANDS: list[Callable[[Any], None]] = []


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
    except Exception as error:  # the last line of defence: no stack trace unless asked
        if os.environ.get("LAYOUTOPT_DEBUG"):
            raise
        return fail(
            f"internal error ({type(error).__name__}: {error}); set LAYOUTOPT_DEBUG=1 for a trace",
            EXIT_INTERNAL,
        )


from api.cli_search import register_search_commands  # noqa: E402  (it builds on this module)

_EXTRA_COMMANDS.append(register_search_commands)

from api.cli_validate import register_validate_command  # noqa: E402

_EXTRA_COMMANDS.append(register_validate_command)


if __name__ == "__main__":
    sys.exit(main())
