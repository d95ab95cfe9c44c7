"""Client connections, beneath the ASGI app: uvicorn's h11 protocol with a deadline for each
request head and a bound on open connections.

uvicorn's `timeout_keep_alive` closes a connection idle between requests, but is cancelled
by the first byte of the next request: a client that sends a few bytes of its request line
and then nothing held its connection (and file descriptor) forever, and enough of them
exhausted the process's open files (every request refused, `/healthz` included, while
asyncio logged a traceback for each failed accept). Here a request head must be whole
within `header_timeout_s` of the connection opening or of the previous response, and at
most `max_connections` are open: a new one past the limit closes the longest-waiting
connection that has no request in progress (so a flood of idle connections cannot keep a
probe out), else is closed itself. `connection_limit` keeps the limit under the open-file
limit, so accepting does not fail; if it does (other files), `AcceptErrorLog` logs it once a
second rather than a traceback per failed accept.
"""

from __future__ import annotations

import asyncio
import logging
import math
import resource
import time
from collections import OrderedDict
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

from api.http.metrics import Metrics

# File descriptors kept free of client connections: the listening socket, logs, the solver
# processes' pipes, files a study writes.
RESERVED_FILES = 128
# asyncio's message when accept() fails for want of file descriptors or memory.
ACCEPT_FAILED = "socket.accept() out of system resource"

logger = logging.getLogger("layoutopt.http")


class ConnectionGuard:
    """The limits and the one registry all connections of a server share: those awaiting
    a request head, oldest first (the ones closed to make room)."""

    def __init__(self, max_connections: int, header_timeout_s: float, metrics: Metrics) -> None:
        self.max_connections, self.header_timeout_s = max_connections, header_timeout_s
        self.metrics = metrics
        self.awaiting_head: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        self.open = 0

    def oldest_idle(self) -> GuardedH11Protocol | None:
        return next(iter(self.awaiting_head), None)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a `ConnectionGuard` (set on a subclass by
    `guarded_protocol`)."""

    guard: ClassVar[ConnectionGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._awaited_cycle: object = None  # the cycle before the awaited head's
        self._closed_by_guard = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.guard.open += 1
        if self.guard.open > self.guard.max_connections:
            idle = self.guard.oldest_idle()
            (idle or self).close_by_guard("connection_limit")
            if idle is None:
                return
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._note_head()

    def on_response_complete(self) -> None:
        # awaited before uvicorn's own step, which may start a pipelined request at once
        self._await_head()
        super().on_response_complete()
        self._note_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_awaiting()
        if not self._closed_by_guard:
            self.guard.open -= 1
        super().connection_lost(exc)

    def close_by_guard(self, reason: str) -> None:
        """Closes the connection now, counting it under `reason` in the metrics."""
        self._stop_awaiting()
        if not self._closed_by_guard:
            self._closed_by_guard = True
            self.guard.open -= 1
            self.guard.metrics.connections_closed.labels(reason).inc()
        self.transport.close()

    def _await_head(self) -> None:
        if self.transport.is_closing():
            return
        self._stop_awaiting()
        self._awaited_cycle = self.cycle
        self.guard.awaiting_head[self] = None
        self._head_deadline = self.loop.call_later(
            self.guard.header_timeout_s, self.close_by_guard, "header_timeout"
        )

    def _note_head(self) -> None:
        """Stops the head's deadline once uvicorn has parsed a new request."""
        if self._head_deadline is not None and self.cycle is not self._awaited_cycle:
            self._stop_awaiting()

    def _stop_awaiting(self) -> None:
        self.guard.awaiting_head.pop(self, None)
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """A protocol class for `uvicorn.Config(http=...)`, its connections under `guard`."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})


def raise_open_file_limit() -> int:
    """Raises the soft limit on open files to the hard one (an unprivileged process may);
    returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def connection_limit(max_connections: int, open_files: int, accept_burst: int) -> int:
    """`max_connections`, lowered to leave `RESERVED_FILES` of the open-file limit free and
    room for two bursts of accepts: asyncio accepts up to the listen backlog at once, before
    any of those connections is counted (or closed)."""
    if open_files == resource.RLIM_INFINITY:
        return max_connections
    return max(1, min(max_connections, open_files - RESERVED_FILES - 2 * accept_burst))


class AcceptErrorLog:
    """An event loop exception handler: a failed accept is logged at most once per
    `interval_s`, as one line with how many were not logged; anything else as asyncio would.
    (CPython 3.11's accept loop reports each of a backlog's failed accepts with a traceback:
    megabytes a second once the open files run out.)"""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.last_logged = -math.inf
        self.unlogged = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != ACCEPT_FAILED:
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self.last_logged < self.interval_s:
            self.unlogged += 1
            return
        logger.error(
            "accepting a connection failed",
            extra={"error": str(context.get("exception")), "not_logged_since": self.unlogged},
        )
        self.last_logged, self.unlogged = now, 0
