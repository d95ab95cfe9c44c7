"""Stopping a search from outside: a client that went away, a server that drains.

A `StopSignal` is handed down with a search's settings. Whoever owns the request (the HTTP
service) may call `stop()` from any thread: the CP-SAT solve under way returns at once with
what it has (CpSolver.stop_search), table building stops between chunks, and no further
solve starts. The search then answers as if its time had run out: nothing it did not prove
is claimed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

# A solver registered just before its solve began may have missed the first stop_search
# (the wrapper it stops is created inside solve()): stop() sweeps once more after this.
SECOND_SWEEP_S = 0.05


class Stoppable(Protocol):
    def stop_search(self) -> None: ...


class StopSignal:
    """Set once, from any thread; read by the search between steps."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._running: set[Stoppable] = set()

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    def stop(self) -> None:
        self._event.set()
        self._sweep()
        timer = threading.Timer(SECOND_SWEEP_S, self._sweep)
        timer.daemon = True
        timer.start()

    def _sweep(self) -> None:
        with self._lock:
            running = list(self._running)
        for solver in running:
            solver.stop_search()

    @contextmanager
    def watching(self, solver: Stoppable) -> Iterator[None]:
        """While inside, `stop()` also stops `solver`."""
        with self._lock:
            self._running.add(solver)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(solver)


class CutShort(Exception):
    """The caller's deadline passed, or its stop signal was set, before the work was done:
    no answer, and nothing proved."""


def time_is_up(deadline: float | None, stop: StopSignal | None) -> bool:
    """Whether `deadline` (a time.perf_counter() value; None: none) has passed or `stop`
    has been set: the check every long step makes between chunks."""
    past = deadline is not None and time.perf_counter() > deadline
    return past or (stop is not None and stop.stopped)
