"""ASGI middleware, outermost first: request ids, security headers, metrics and access logs,
the refusal of ambiguous framing, the last-resort 500 and the 503 of a request cut short by
shutdown (`RequestContext`); the body read whole within a size, a time and a memory limit
(`BodyReader`);
a solver slot reserved before any parsing (`Admission`); a bound on requests being served
(`InFlightLimit`).

Plain ASGI rather than Starlette's BaseHTTPMiddleware, so the body can be counted as it
streams and a fault is caught before any byte of the response has gone out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import errors
from api.http.logs import REQUEST_ID_HEADER, new_request_id, request_id
from api.http.metrics import Metrics, method_label
from api.http.workers import ClientGone, Saturated, SolverPool
from api.schemas import ErrorDetail, ErrorOut

# Where Admission leaves the reserved solver slot for the route (scope["state"]).
SLOT_KEY = "solver_slot"

logger = logging.getLogger("layoutopt.http")
# Logged and counted when no response was sent: the client went away first (nginx's 499).
CLIENT_CLOSED = 499


def error_response(
    detail: ErrorDetail, status: int, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """Every error the service answers, its echoes of request text capped."""
    body = ErrorOut(error=errors.capped_detail(detail)).model_dump()
    return JSONResponse(body, status_code=status, headers=headers)


def closing_error_response(
    detail: ErrorDetail, status: int, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An error after which the connection is closed: what is left unread of the request
    cannot be trusted to be (or be skipped to) the next one."""
    return error_response(detail, status, {**(headers or {}), "Connection": "close"})


# Sent with every response: no MIME sniffing (Fetch), no framing (RFC 7034 and CSP's
# frame-ancestors), no Referer beyond the origin, and scripts, styles and connections from the
# server itself. Styles may be inline: the page's tables and ReDoc set style attributes and
# elements. Workers from blob: are ReDoc's search.
_CSP = (
    "default-src 'self'; {script}; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "strict-origin-when-cross-origin",
    "Content-Security-Policy": _CSP.format(script="script-src 'self'"),
}
# Swagger UI at /docs is started by an inline script FastAPI writes (its options): inline
# scripts are allowed on that page alone, which shows only the service's own OpenAPI document.
# (ReDoc at /redoc runs under the policy of every page; its logo, from a CDN, is not shown.)
DOCS_PATH = "/docs"
DOCS_CSP = _CSP.format(script="script-src 'self' 'unsafe-inline'")


def add_security_headers(path: str, headers: MutableHeaders) -> None:
    for name, value in SECURITY_HEADERS.items():
        headers.setdefault(name, value)
    if path == DOCS_PATH:
        headers["Content-Security-Policy"] = DOCS_CSP


def ambiguous_framing(scope: Scope) -> bool:
    """Both Content-Length and Transfer-Encoding (RFC 9112 section 6.1: the server must not
    trust the length, and must close the connection after responding)."""
    headers = Headers(scope=scope)
    return "content-length" in headers and "transfer-encoding" in headers


def _route_label(scope: Scope) -> str:
    # The route's template (`/v1/evaluate`), never the raw path: bounded label values.
    return str(getattr(scope.get("route"), "path", "unmatched"))


class RequestContext:
    """Gives each request an id (echoed as X-Request-ID) and the security headers, times it,
    logs it, counts it; refuses ambiguous framing with a 400 and closes the connection; turns
    any exception that escapes the app into a JSON 500 without a trace, and a request
    cancelled by the shutdown (its grace period over) into a JSON 503 `draining`."""

    def __init__(self, app: ASGIApp, metrics: Metrics, retry_after_s: int) -> None:
        self.app, self.metrics, self.retry_after_s = app, metrics, retry_after_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = new_request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
        token = request_id.set(rid)
        start = time.perf_counter()
        status = CLIENT_CLOSED  # until a response starts
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started, status = True, message["status"]
                headers = MutableHeaders(scope=message)
                headers.append(REQUEST_ID_HEADER, rid)
                add_security_headers(scope["path"], headers)
            await send(message)

        try:
            if ambiguous_framing(scope):
                self.metrics.rejections.labels("ambiguous_framing").inc()
                response = closing_error_response(errors.ambiguous_framing(), 400)
                await response(scope, receive, send_with_id)
            else:
                await self.app(scope, receive, send_with_id)
        except ClientGone:
            pass  # nobody to answer: logged and counted as 499
        except asyncio.CancelledError:
            # uvicorn cancels the requests still running when its shutdown grace period
            # ends; answered here, the client gets JSON it can retry on rather than
            # uvicorn's plain-text 500.
            if not started:
                headers = {"Retry-After": str(self.retry_after_s)}
                response = closing_error_response(errors.draining(), 503, headers)
                await response(scope, receive, send_with_id)
            raise
        except Exception:
            logger.exception("unhandled error")
            if not started:
                await error_response(errors.internal_error(rid), 500)(scope, receive, send_with_id)
        finally:
            self._record(scope, status, time.perf_counter() - start)
            request_id.reset(token)

    def _record(self, scope: Scope, status: int, duration_s: float) -> None:
        method, route = method_label(scope["method"]), _route_label(scope)
        self.metrics.requests.labels(method, route, str(status)).inc()
        self.metrics.request_seconds.labels(method, route).observe(duration_s)
        logger.info(
            "request",
            extra={
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "duration_ms": round(duration_s * 1000, 2),
            },
        )


def _has_body(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["method"] not in ("GET", "HEAD", "OPTIONS")


def saturated_response(error: Saturated) -> JSONResponse:
    headers = {"Retry-After": str(error.retry_after_s)}
    return error_response(errors.saturated(str(error)), 503, headers)


class InFlightLimit:
    """503 + Retry-After at once for a request with a body when `max_in_flight` are already
    being served (their bodies read), so a flood queues neither bodies nor work without
    bound. Bodiless requests (probes, metrics, presets) always pass: a busy pod stays live.
    """

    def __init__(self, app: ASGIApp, max_in_flight: int, retry_after_s: int, metrics: Metrics):
        self.app, self.max_in_flight, self.metrics = app, max_in_flight, metrics
        self.retry_after_s = retry_after_s
        self.in_flight = 0  # one event loop: no lock needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _has_body(scope):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            self.metrics.rejections.labels("in_flight").inc()
            message = f"{self.max_in_flight} requests in flight; retry in {self.retry_after_s} s"
            headers = {"Retry-After": str(self.retry_after_s)}
            await error_response(errors.saturated(message), 503, headers)(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


class Admission:
    """For the routes that queue CPU work (`pooled_paths`): a solver slot reserved before
    the body is parsed or validated, else 503 + Retry-After (the queue's expected wait) at
    once, and always 503 while the server drains. The route finds the slot in
    scope["state"]; it is freed when the request ends."""

    def __init__(
        self, app: ASGIApp, pool: SolverPool, pooled_paths: Collection[str], metrics: Metrics
    ) -> None:
        self.app, self.pool, self.metrics = app, pool, metrics
        self.pooled_paths = frozenset(pooled_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (_has_body(scope) and scope["path"] in self.pooled_paths):
            await self.app(scope, receive, send)
            return
        try:
            slot = self.pool.reserve()
        except Saturated as error:
            self.metrics.rejections.labels("draining" if error.draining else "saturated").inc()
            await saturated_response(error)(scope, receive, send)
            return
        scope.setdefault("state", {})[SLOT_KEY] = slot
        try:
            await self.app(scope, receive, send)
        finally:
            slot.release()


class BufferFull(Exception):
    """Taking the next chunk of a body would pass the bytes all bodies in progress may hold."""


class BodyReader:
    """The whole body read before the app sees the request: 413 for one over `max_bytes`
    (by its Content-Length at once, else as it streams), 408 for one still incomplete after
    `timeout_s`, 503 when its next chunk would take the bytes held by all bodies still
    arriving past `max_buffered_bytes`. So slow senders hold no solver slot and no in-flight
    place, and bodies in progress hold at most `max_buffered_bytes` however many trickle in
    (their number is bounded by the connection limit): a thousand senders of a byte a second
    lock nobody out.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        timeout_s: float,
        max_buffered_bytes: int,
        retry_after_s: int,
        metrics: Metrics,
    ) -> None:
        self.app, self.max_bytes, self.metrics = app, max_bytes, metrics
        self.timeout_s, self.retry_after_s = timeout_s, retry_after_s
        self.max_buffered_bytes = max_buffered_bytes
        self.buffered_bytes = 0  # one event loop: no lock needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _has_body(scope):
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(int(declared), scope, receive, send)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.timeout_s)
        except TimeoutError:
            self.metrics.rejections.labels("body_timeout").inc()
            response = closing_error_response(errors.body_too_slow(self.timeout_s), 408)
            await response(scope, receive, send)
            return
        except BufferFull:
            self.metrics.rejections.labels("body_buffer").inc()
            message = (
                f"request bodies arriving hold {self.max_buffered_bytes:,} bytes; "
                f"retry in {self.retry_after_s} s"
            )
            headers = {"Retry-After": str(self.retry_after_s)}
            await closing_error_response(errors.saturated(message), 503, headers)(
                scope, receive, send
            )
            return
        if body is None:  # the client went away
            return
        if len(body) > self.max_bytes:
            await self._reject(None, scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The body, None if the client left, or past the limit by one chunk at most;
        `BufferFull` if the bodies in progress would hold too much with its next chunk."""
        chunks: list[bytes] = []
        size_bytes = 0
        more_body = True
        try:
            while more_body:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                chunk = message.get("body", b"")
                if self.buffered_bytes + len(chunk) > self.max_buffered_bytes:
                    raise BufferFull
                chunks.append(chunk)
                size_bytes += len(chunk)
                self.buffered_bytes += len(chunk)
                if size_bytes > self.max_bytes:
                    break
                more_body = message.get("more_body", False)
            return b"".join(chunks)
        finally:
            self.buffered_bytes -= size_bytes

    async def _reject(
        self, size_bytes: int | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        self.metrics.rejections.labels("body_too_large").inc()
        response = error_response(errors.body_too_large(self.max_bytes, size_bytes), 413)
        await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that yields the already-read body once, then defers to the real one."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
