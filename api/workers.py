"""Bounded work: a solver pool that refuses at once when full, and a cache of answers.

Solves are CPU-bound and run off the event loop in threads (CP-SAT and numpy release the
GIL while they work). At most `workers` run and `queue_depth` wait; the next request is
refused with `Saturated` (503 + Retry-After) instead of queueing without bound, so a
scheduler calling in its hot path learns at once that it should retry or go elsewhere.
Pricing one layout (evaluate) is closed-form and sub-millisecond: it runs inline rather
than queue behind solves.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from pydantic import BaseModel

from api.metrics import Metrics
from api.settings import Settings

Answer = TypeVar("Answer")


class Saturated(Exception):
    """Every worker is busy and the queue is full."""

    def __init__(self, retry_after_s: int, capacity: int) -> None:
        super().__init__(f"all {capacity} solver slots are busy; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s
        self.capacity = capacity


class AnswerCache:
    """A bounded least-recently-used map from canonical request to answer."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any | None:
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: str, answer: Any) -> None:
        if self.max_entries == 0:
            return
        with self._lock:
            self._entries[key] = answer
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class SolverPool:
    """Threads for CPU-bound work, admitting at most `workers + queue_depth` jobs at a time."""

    def __init__(self, workers: int, queue_depth: int, retry_after_s: int) -> None:
        self.capacity = workers + queue_depth
        self.retry_after_s = retry_after_s
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="solver")
        self._slots = threading.BoundedSemaphore(self.capacity)
        self._admitted = 0
        self._count_lock = threading.Lock()

    @property
    def admitted(self) -> int:
        """Jobs running or waiting right now."""
        return self._admitted

    def submit(self, work: Callable[..., Answer], *args: Any) -> Future[Answer]:
        """Start `work(*args)` in a worker, or raise `Saturated` without waiting."""
        if not self._slots.acquire(blocking=False):
            raise Saturated(self.retry_after_s, self.capacity)
        with self._count_lock:
            self._admitted += 1
        # Carry the request's context (its id for the logs) into the worker thread.
        context = contextvars.copy_context()
        try:
            future = self._executor.submit(context.run, work, *args)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        return future

    def _release(self, _: Future[Any] | None) -> None:
        with self._count_lock:
            self._admitted -= 1
        self._slots.release()


class Solver:
    """What routes call: cache first, then the pool, timing and counting both."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.pool = SolverPool(settings.workers, settings.queue_depth, settings.retry_after_s)
        self.cache = AnswerCache(settings.cache_size)
        self.time_limit_s = settings.solver_time_limit_s
        self.metrics = metrics
        metrics.add_gauge(
            "layoutopt_solver_admitted", "Solves running or queued now.", lambda: self.pool.admitted
        )
        metrics.add_gauge(
            "layoutopt_solver_capacity",
            "Solves that may run or queue at once (workers + queue depth).",
            lambda: self.pool.capacity,
        )
        metrics.add_gauge(
            "layoutopt_cache_entries", "Answers held in the cache.", lambda: len(self.cache)
        )

    def time_limit_for(self, asked_s: float | None) -> float:
        """The request's own limit, capped by the server's."""
        return self.time_limit_s if asked_s is None else min(asked_s, self.time_limit_s)

    async def run(
        self,
        operation: str,
        request: BaseModel,
        work: Callable[[], Answer],
        cacheable: Callable[[Answer], bool] = lambda _: True,
        inline: bool = False,
    ) -> Answer:
        """The answer to `request`: from the cache if an identical one was answered, else
        `work()`, in the pool, or `inline` on the event loop for sub-millisecond work."""
        key = f"{operation}:{request.model_dump_json()}"
        cached = self.cache.get(key)
        if cached is not None:
            self.metrics.cache_hits.inc(operation)
            return cached  # type: ignore[no-any-return]
        self.metrics.cache_misses.inc(operation)
        if inline:
            answer, wall_s = _timed(work)
        else:
            answer, wall_s = await self._in_pool(work)
        self.metrics.solver_seconds.observe(wall_s, operation)
        if cacheable(answer):
            self.cache.put(key, answer)
        return answer

    async def _in_pool(self, work: Callable[[], Answer]) -> tuple[Answer, float]:
        try:
            future = self.pool.submit(_timed, work)
        except Saturated:
            self.metrics.rejections.inc("saturated")
            raise
        return await asyncio.wrap_future(future)


def _timed(work: Callable[[], Answer]) -> tuple[Answer, float]:
    start = time.perf_counter()
    answer = work()
    return answer, time.perf_counter() - start
