"""Training logs as `layoutopt calibrate` takes them: from disk into the run entries the HTTP
body carries (`"log": {"text": ..., "format": ...}`), each read only under its size limit.

A run of RUNS.jsonl (or a CSV row's `log` column) names its log by path, relative to the runs
file's folder: `"log": "trial-1.log"` or `{"path": "trial-1.log", "format": "megatron"}`.
`--log FILE --request TRIAL.json` pairs a log with the request it ran: TRIAL.json is that
request (an evaluate request with its layout and engine), or a run entry holding it
(`{"name": ..., "request": ...}`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from api.cli.common import BadRequest
from optimizer.calibration import MAX_LOG_BYTES


def log_text(path: Path) -> str:
    """The text of the log at `path`: refused, before it is read, over MAX_LOG_BYTES; a file
    holding NUL bytes is not a text log."""
    try:
        size_bytes = path.stat().st_size
        if size_bytes > MAX_LOG_BYTES:
            raise BadRequest(
                f"{path} is {size_bytes:,} bytes, over the {MAX_LOG_BYTES:,} a log may be: "
                "give the lines of its steady steps"
            )
        data = path.read_bytes()
    except OSError as error:
        raise BadRequest(f"cannot read the log {path}: {error.strerror}") from None
    if b"\0" in data:
        raise BadRequest(f"{path} is not a text log: it holds NUL bytes")
    return data.decode("utf-8", errors="replace")  # a stray byte is no step line


def log_entry(path: Path, format_: str | None) -> dict[str, Any]:
    """The body's `log` of the file at `path`."""
    return {"text": log_text(path)} | ({"format": format_} if format_ else {})


def with_log_read(run: Any, folder: Path) -> tuple[Any, Path | None]:
    """The run with its `log`, if named by path, read in (the path relative to `folder`),
    and that path; anything else as it stands (the request's validation says what is
    wrong with it)."""
    if not isinstance(run, dict) or "log" not in run:
        return run, None
    log = run["log"]
    if isinstance(log, str):
        log = {"path": log}
    if not isinstance(log, dict) or not isinstance(log.get("path"), str):
        return run, None
    path = folder / log["path"]
    return run | {"log": log_entry(path, log.get("format"))}, path


def run_of_log(log: Path, trial: Path, format_: str | None) -> dict[str, Any]:
    """The run `--log LOG --request TRIAL` gives: the trial's request measured by the log."""
    try:
        entry = json.loads(trial.read_text(encoding="utf-8"))
    except OSError as error:
        raise BadRequest(f"cannot read {trial}: {error.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise BadRequest(f"{trial} is not a JSON request: {error}") from None
    if not isinstance(entry, dict):
        raise BadRequest(f"{trial} must hold a JSON object: the request the log's run ran")
    request = entry.get("request", entry)
    name = entry.get("name") if "request" in entry else None
    return {"name": name or log.name, "request": request, "log": log_entry(log, format_)}
