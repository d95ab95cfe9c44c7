"""Errors mapped in one place: domain and validation errors to HTTP answers and exit codes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from api.schemas import ErrorDetail
from models.errors import InvalidSpec, UnknownPreset

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_REQUEST = 2
EXIT_INFEASIBLE = 3  # proved: no layout satisfies the request
EXIT_UNKNOWN = 4  # the time ran out before a layout or a proof: retry with more time
# `layoutopt tune`: trial logs are missing (the trials to run are listed): run them, call again
EXIT_WAITING = 5

# An error's message and field echo request text (a name, a key, a value): each keeps at most
# this many of its characters, so a huge bad name is not sent back whole.
MAX_ECHO_CHARS = 500


def capped(text: str, limit_chars: int = MAX_ECHO_CHARS) -> str:
    """`text` if it is short, else its start and end around an ellipsis that gives its
    length. The end keeps three quarters: it is where messages say what was expected (a
    preset name's known ones, after the name)."""
    if len(text) <= limit_chars:
        return text
    head = limit_chars // 4
    tail = limit_chars - head
    return f"{text[:head]}…[{len(text):,} characters]…{text[-tail:]}"


def capped_detail(detail: ErrorDetail) -> ErrorDetail:
    """The detail with its message and field capped (`capped`): every error leaves through it."""
    field = None if detail.field is None else capped(detail.field)
    return detail.model_copy(update={"message": capped(detail.message), "field": field})


def _clean(message: str) -> str:
    # pydantic prefixes messages of ValueErrors raised in validators with "Value error, ".
    return message.removeprefix("Value error, ")


def _location(loc: tuple[int | str, ...], items: bool = True) -> str:
    """The dotted path without pydantic's internal tags (function-before[...], union
    members); `items` False also drops list positions."""
    parts = [
        str(part)
        for part in loc
        if not (isinstance(part, str) and ("[" in part or part == "body"))
        and (items or not isinstance(part, int))
    ]
    return ".".join(parts)


def _body_problem(first: Mapping[str, Any]) -> ErrorDetail | None:
    """Problems with the body as a whole, which pydantic reports with odd locations."""
    kind, loc = first.get("type"), tuple(first.get("loc", ()))
    if kind == "json_invalid":
        # FastAPI puts the character offset where the field would be.
        where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        reason = str(first.get("ctx", {}).get("error", "malformed"))
        return ErrorDetail(
            code="invalid_json", message=f"request body is not valid JSON: {reason}{where}"
        )
    if loc == ("body",) and kind == "missing":
        return ErrorDetail(code="invalid_request", message="request body is required (JSON object)")
    if loc == ("body",) and kind in ("model_attributes_type", "dict_type", "model_type"):
        return ErrorDetail(
            code="invalid_request",
            message="request body must be a JSON object sent as Content-Type: application/json",
        )
    return None


def detail_from_validation(error: ValidationError | list[dict]) -> ErrorDetail:
    """The first problem, named by its field; the rest are counted."""
    errors = error.errors() if isinstance(error, ValidationError) else error
    first = errors[0]
    body_problem = _body_problem(first)
    if body_problem is not None:
        return body_problem
    where = _location(tuple(first.get("loc", ())))
    # `field` names the request field; an item of a list is named in the message
    field = _location(tuple(first.get("loc", ())), items=False) or None
    message = _clean(str(first.get("msg", "invalid request")))
    if first.get("type") == "extra_forbidden":
        message = "unknown field"
    if where:
        message = f"{where}: {message}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    # A rule between fields (a validator's ValueError) is the spec's fault, like a domain
    # error; a type or bound the schema publishes is the request's shape.
    code = "invalid_spec" if first.get("type") in SEMANTIC_ERRORS else "invalid_request"
    return ErrorDetail(code=code, message=message, field=field)


# pydantic error types raised by our validators, not by the published schema.
SEMANTIC_ERRORS = frozenset({"value_error", "assertion_error"})


def detail_from_domain(error: InvalidSpec) -> ErrorDetail:
    code = "unknown_preset" if isinstance(error, UnknownPreset) else "invalid_spec"
    return ErrorDetail(code=code, message=error.message, field=error.field)


def detail_from_http_status(status: int, reason: str) -> ErrorDetail:
    """Routing answers (404, 405) in the same error shape as everything else."""
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    return ErrorDetail(code=code, message=reason)


def undecodable_body() -> ErrorDetail:
    return ErrorDetail(
        code="invalid_json",
        message="request body could not be decoded as JSON (nested too deeply, or not UTF-8)",
    )


def body_too_large(limit_bytes: int, size_bytes: int | None) -> ErrorDetail:
    size = f"{size_bytes:,} bytes" if size_bytes is not None else "more"
    return ErrorDetail(
        code="body_too_large",
        message=f"request body is {size}; the limit is {limit_bytes:,} bytes",
    )


def ambiguous_framing() -> ErrorDetail:
    """Both Content-Length and Transfer-Encoding: the body's end is ambiguous, so what follows
    it cannot be trusted to be the next request (RFC 9112 section 6.1)."""
    return ErrorDetail(
        code="ambiguous_framing",
        message="request has both Content-Length and Transfer-Encoding; send one",
    )


def draining() -> ErrorDetail:
    """A request still running when the shutdown's grace period ended."""
    return ErrorDetail(
        code="draining",
        message="the server shut down before this request finished; retry on another instance",
    )


def body_too_slow(timeout_s: float) -> ErrorDetail:
    return ErrorDetail(
        code="body_timeout",
        message=f"request body did not arrive within {timeout_s:g} s; send it whole, promptly",
    )


def not_installed(message: str) -> ErrorDetail:
    """A feature whose optional packages the installation lacks (an extra)."""
    return ErrorDetail(code="not_installed", message=message)


def saturated(message: str) -> ErrorDetail:
    return ErrorDetail(code="saturated", message=message)


def solver_lost(message: str) -> ErrorDetail:
    """The process solving the request ended without an answer (killed, out of memory): it
    is replaced, so a retry is served."""
    return ErrorDetail(code="solver_lost", message=message)


def internal_error(request_id: str) -> ErrorDetail:
    """What a fault looks like from outside: no trace, an id to find it in the logs."""
    return ErrorDetail(
        code="internal_error", message=f"internal error; request id {request_id} in the logs"
    )
