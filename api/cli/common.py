"""What every `layoutopt` command shares: the job flags and the request they build.

A spec file (`--spec`, the HTTP body) with flags laid over it, so the CLI takes the very
request shape the API and the client take.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from models.hf_config import describe_import, from_hf_config, looks_like_hf_config
from models.layout import LAYOUT_CHOICES
from models.presets import gpu_presets, model_presets
from optimizer import DEFAULT_PROFILE, PROFILES
from optimizer.engines import DEFAULT_ENGINE, ENGINES

# flag -> (section of the request, field); None means top level
FLAG_FIELDS: dict[str, tuple[str | None, str]] = {
    "gpus": ("cluster", "gpus"),
    "gpu": ("cluster", "gpu"),
    "gpus_per_node": ("cluster", "gpus_per_node"),
    "nvlink_domain": ("cluster", "nvlink_domain"),
    "global_batch": ("training", "global_batch"),
    "seq_len": ("training", "seq_len"),
    "precision": ("training", "precision"),
    "profile": (None, "profile"),
    "engine": (None, "engine"),
}
LAYOUT_FLAGS = LAYOUT_CHOICES


class BadRequest(Exception):
    """A request the CLI cannot even build (unreadable file, malformed JSON)."""


def add_job_flags(parser: argparse.ArgumentParser) -> None:
    """Flags every command shares: the spec file, the job, output format."""
    parser.add_argument(
        "--spec",
        type=Path,
        help="request JSON (the HTTP body), or - for standard input; flags override it",
    )
    parser.add_argument(
        "--model",
        help=f"preset ({', '.join(model_presets())}), or a path to a spec / HF config.json file",
    )
    parser.add_argument("--gpus", type=int, help="GPUs in the job")
    parser.add_argument("--gpu", help=f"GPU preset ({', '.join(gpu_presets())})")
    parser.add_argument("--gpus-per-node", type=int, help="GPUs per NVLink domain (default 8)")
    parser.add_argument(
        "--nvlink-domain", type=int, help="GPUs sharing NVLink beyond a node (GB200 NVL72: 72)"
    )
    parser.add_argument("--global-batch", type=int, help="sequences per step (default 2048)")
    parser.add_argument("--seq-len", type=int, help="tokens per sequence (default 8192)")
    parser.add_argument(
        "--precision",
        help="what the layers' GEMMs run in: bf16 (default), fp8, mxfp8 or nvfp4 (profile "
        "standard; GPUs with that format's peak)",
    )
    parser.add_argument(
        "--profile",
        help=f"cost-model profile: {', '.join(PROFILES)} (default {DEFAULT_PROFILE} on every "
        "command; workshop is the teaching plate's model)",
    )
    parser.add_argument(
        "--engine",
        help=f"training engine whose rules apply and whose input `export` writes: "
        f"{', '.join(ENGINES)}, optionally at a version (megatron@core_r0.20; default "
        f"{DEFAULT_ENGINE}, its newest, on every command; generic is the engine-agnostic model)",
    )
    parser.add_argument(
        "--engine-setting",
        action="append",
        metavar="NAME=VALUE",
        help="state one of the engine's own settings (repeatable), e.g. tp_comm_overlap=true; "
        "the names are the request's `engine_settings` (docs/engines.md)",
    )
    parser.add_argument(
        "--assume",
        action="append",
        metavar="NAME=VALUE",
        help="set one cost assumption (repeatable), e.g. sequence_parallel=false or "
        "kernel_efficiency=0.55; the names are the request's `assumptions` fields",
    )
    parser.add_argument("--json", action="store_true", help="print the exact JSON answer")


def add_layout_flags(parser: argparse.ArgumentParser) -> None:
    for name in ("tp", "pp", "cp", "dp", "vpp", "micro_batch", "ep"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name)
    parser.add_argument("--zero", type=int, help="ZeRO stage 0-3")
    parser.add_argument("--recompute", help="none, selective or full")
    parser.add_argument("--schedule", help="1f1b, zero-bubble or dualpipe (profile standard)")


STDIN = Path("-")


def read_json(path: Path) -> Any:
    """A JSON file's value, or standard input's for `-`; every way it can be unusable (no
    such file, not text, not JSON, nested too deep to parse) is a BadRequest naming it."""
    where = "standard input" if path == STDIN else str(path)
    try:
        text = sys.stdin.read() if path == STDIN else path.read_text(encoding="utf-8")
        return json.loads(text, parse_constant=_no_constant)
    except OSError as error:
        raise BadRequest(f"cannot read {where}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise BadRequest(f"{where} is not UTF-8 text (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise BadRequest(f"{where} is not valid JSON: {error.msg} at line {error.lineno}") from None
    except RecursionError:
        raise BadRequest(f"{where} nests JSON too deeply to read") from None
    except ValueError as error:  # NaN or Infinity, which JSON does not have
        raise BadRequest(f"{where} is not valid JSON: {error}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


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
        if isinstance(data["model"], dict) and looks_like_hf_config(data["model"]):
            # the derived counts, for the user to check against the model card
            print(describe_import(from_hf_config(data["model"])), file=sys.stderr)
    for flag, (section, field) in FLAG_FIELDS.items():
        value = getattr(args, flag, None)
        if value is not None:
            (data if section is None else _section(data, section))[field] = value
    for section, flags in section_flags.items():
        for flag in flags:
            value = getattr(args, flag, None)
            if value is not None:
                _section(data, section)[flag] = value
    for flag, section in (("assume", "assumptions"), ("engine_setting", "engine_settings")):
        for item in getattr(args, flag, None) or []:
            name, value = _named_value(item, flag)
            _section(data, section)[name] = value
    return data


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    """The spec's object `name`, created if absent, for flags to be laid over."""
    section = data.setdefault(name, {})
    if not isinstance(section, dict):
        raise BadRequest(f"'{name}' in the spec must be an object, got {type(section).__name__}")
    return section


def _named_value(item: str, flag: str) -> tuple[str, Any]:
    """`NAME=VALUE`, the value read as JSON (false, 0.5, null) or else kept as text."""
    name, sep, text = item.partition("=")
    if not sep or not name.strip():
        option = "--" + flag.replace("_", "-")
        raise BadRequest(f"{option} takes NAME=VALUE, got {item!r}")
    try:
        return name.strip(), json.loads(text)
    except json.JSONDecodeError:
        return name.strip(), text


def emit(answer: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    if as_json:
        print(json.dumps(answer.model_dump(mode="json"), indent=2))
    else:
        print(text(answer))


def at_least_one(flag: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least 1, refused in `flag`'s name otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} takes a whole number, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be at least 1, got {value}")
        return value

    return parse
