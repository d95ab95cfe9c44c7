"""Errors mapped in one place: domain and validation errors to HTTP answers and exit codes."""

from __future__ import annotations

from pydantic import ValidationError

from api.schemas import ErrorDetail
from models.errors import InvalidSpec, UnknownPreset

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_REQUEST = 2


def _clean(message: str) -> str:
    # pydantic prefixes messages of ValueErrors raised in validators with "Value error, ".
    return message.removeprefix("Value error, ")


def _location(loc: tuple[int | str, ...]) -> str:
    # Drop pydantic's internal tags (function-before[...], union members) from the path.
    parts = [
        str(part) for part in loc if not (isinstance(part, str) and ("[" in part or part == "body"))
    ]
    return ".".join(parts)


def detail_from_validation(error: ValidationError | list[dict]) -> ErrorDetail:
    """The first problem, named by its field; the rest are counted."""
    errors = error.errors() if isinstance(error, ValidationError) else error
    first = errors[0]
    field = _location(tuple(first.get("loc", ()))) or None
    message = _clean(str(first.get("msg", "invalid request")))
    if first.get("type") == "extra_forbidden":
        message = "unknown field"
    if field:
        message = f"{field}: {message}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return ErrorDetail(code="invalid_request", message=message, field=field)


def detail_from_domain(error: InvalidSpec) -> ErrorDetail:
    code = "unknown_preset" if isinstance(error, UnknownPreset) else "invalid_spec"
    return ErrorDetail(code=code, message=error.message, field=error.field)
