"""`layoutopt serve`: uvicorn with a drain on SIGTERM.

Kubernetes sends SIGTERM and keeps routing to the pod until its readiness probe fails, so
the first SIGTERM only drains (api.main.drain: /readyz answers 503, queued work is refused
with Retry-After, running solves go on) for `drain_s`; then uvicorn's own shutdown stops
the listener and waits up to `grace_s` for the running solves. A second SIGTERM or a
SIGINT (Ctrl-C) shuts down at once, as uvicorn does. A request still running when the grace
period ends is answered 503 `draining` (api.http.middleware.RequestContext).

Connections are uvicorn's h11 protocol under a header timeout and a connection limit
(api.http.connections).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import time
from types import FrameType

import uvicorn
from fastapi import FastAPI

from api.http.app import create_app, drain
from api.http.connections import (
    AcceptErrorLog,
    ConnectionGuard,
    connection_limit,
    guarded_protocol,
    raise_open_file_limit,
)
from api.http.logs import log_config
from api.http.settings import Settings

logger = logging.getLogger("layoutopt.serve")


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI, drain_s: float) -> None:
        super().__init__(config)
        self.app, self.drain_s = app, drain_s
        self.drain_started: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig != signal.SIGTERM or self.drain_started is not None or self.drain_s <= 0:
            super().handle_exit(sig, frame)
            return
        self._captured_signals.append(sig)  # re-raised by uvicorn once it has shut down
        self.drain_started = time.monotonic()
        refused = drain(self.app)
        logger.info("draining", extra={"drain_s": self.drain_s, "queued_refused": refused})

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
        await super().startup(sockets)

    async def on_tick(self, counter: int) -> bool:
        if self.drain_started is not None and time.monotonic() - self.drain_started >= self.drain_s:
            self.should_exit = True
        return await super().on_tick(counter)


# The event loop shares the GIL with the solver threads, whose model building is Python:
# a shorter switch interval than CPython's 5 ms hands the loop the GIL sooner, so probes
# and refusals answer in milliseconds while solves run (docs/performance.md).
GIL_SWITCH_INTERVAL_S = 0.001


def serve(host: str | None, port: int | None, settings: Settings | None = None) -> None:
    settings = settings or Settings()  # WORKERS, QUEUE_DEPTH, ... from the environment
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=host or settings.host,
        port=port or settings.port,
        log_config=log_config(settings.log_level),
        access_log=False,  # api/http/middleware.py logs each request, with its id
        timeout_graceful_shutdown=int(settings.grace_s),
    )
    # set once uvicorn.Config has configured logging, so a lowered limit is logged as JSON
    config.http = guarded_protocol(connection_guard(app, settings, config.backlog))
    DrainingServer(config, app, settings.drain_s).run()


def connection_guard(app: FastAPI, settings: Settings, backlog: int) -> ConnectionGuard:
    """The limits on the server's connections, the connection limit within the open files
    (their soft limit first raised to the hard one), and a gauge of the open connections."""
    open_files = raise_open_file_limit()
    max_connections = connection_limit(settings.max_connections, open_files, backlog)
    if max_connections < settings.max_connections:
        logger.warning(
            "connection limit lowered to fit the open-file limit",
            extra={"max_connections": max_connections, "open_files": open_files},
        )
    metrics = app.state.metrics
    guard = ConnectionGuard(max_connections, settings.header_timeout_s, metrics)
    metrics.add_gauge(
        "layoutopt_http_connections", "Client connections open now.", lambda: guard.open
    )
    return guard
