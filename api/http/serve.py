"""`layoutopt serve`: uvicorn with a drain on SIGTERM.

Kubernetes sends SIGTERM and keeps routing to the pod until its readiness probe fails, so
the first SIGTERM only drains (api.main.drain: /readyz answers 503, queued work is refused
with Retry-After, running solves go on) for `drain_s`; then uvicorn's own shutdown stops
the listener and waits up to `grace_s` for the running solves. A second SIGTERM or a
SIGINT (Ctrl-C) shuts down at once, as uvicorn does.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from types import FrameType

import uvicorn
from fastapi import FastAPI

from api.http.app import create_app, drain
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
        access_log=False,  # api/middleware.py logs each request, with its id
        timeout_graceful_shutdown=int(settings.grace_s),
    )
    DrainingServer(config, app, settings.drain_s).run()
