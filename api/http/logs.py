"""Logs as one JSON object a line, each carrying the id of the request it belongs to."""

from __future__ import annotations

import json
import logging
import re
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

REQUEST_ID_HEADER = "X-Request-ID"
# A caller's id is echoed only if it is short and plain, so it cannot forge log lines.
_CALLER_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Attributes every LogRecord has; anything else was passed in `extra=` and is logged too.
_RECORD_ATTRIBUTES = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's copy of the message with terminal colours
}

request_id: ContextVar[str] = ContextVar("request_id", default="-")


def new_request_id(from_caller: str | None) -> str:
    """The caller's X-Request-ID if it is a plain token, else a fresh one."""
    if from_caller and _CALLER_ID.fullmatch(from_caller):
        return from_caller
    return uuid.uuid4().hex


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": request_id.get(),
        }
        entry.update(
            (key, value) for key, value in vars(record).items() if key not in _RECORD_ATTRIBUTES
        )
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def log_config(level: str) -> dict[str, Any]:
    """A `logging.config.dictConfig` (also uvicorn's `log_config`): everything as JSON lines."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stderr": handler},
        "loggers": {
            name: {"handlers": ["stderr"], "level": level.upper(), "propagate": False}
            for name in ("layoutopt", "uvicorn", "uvicorn.error", "uvicorn.access")
        },
    }
