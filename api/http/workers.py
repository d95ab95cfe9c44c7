"""Bounded work: a solver pool that refuses at once when full, and a cache of answers.

Solves are CPU-bound and run off the event loop in threads, or in a worker process per
thread (`SOLVE_IN=processes`, api/http/processes.py). At most `workers` run and
`queue_depth` wait; the next request is refused with `Saturated` (503 + Retry-After)
instead of queueing without bound, so a scheduler calling in its hot path learns at once
that it should retry or go elsewhere.

A request takes its slot before its body is parsed (`api.middleware.Admission` reserves
it), so a refusal costs no parsing. A request whose client goes away has its work dropped
from the queue or its solve stopped (`StopSignal`), and its slot freed. When the server
drains, the work still queued is refused and the running work finishes.

Pricing one layout (evaluate) is closed-form and sub-millisecond: it runs inline rather
than queue behind solves.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import math
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, Generic, NamedTuple, TypeVar

from pydantic import BaseModel
from starlette.types import Receive

from api.http.metrics import Metrics
from api.http.processes import SolverProcesses
from api.http.settings import Settings
from optimizer.search import StopSignal

Answer = TypeVar("Answer")
# Weight of the newest solve in the running mean of solve times behind Retry-After.
WALL_EWMA_WEIGHT = 0.2
MAX_RETRY_AFTER_S = 300


class Saturated(Exception):
    """Every worker is busy and the queue is full, or the server is draining."""

    def __init__(self, retry_after_s: int, capacity: int, draining: bool = False) -> None:
        what = (
            "the server is shutting down" if draining else f"all {capacity} solver slots are busy"
        )
        super().__init__(f"{what}; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s
        self.capacity = capacity
        self.draining = draining


class ClientGone(Exception):
    """The client disconnected before its answer was ready: nothing is sent (logged 499)."""


# An answer held in the cache takes this many bytes of Python objects (pydantic models, their
# dicts, floats and strings) per byte of its JSON: measured with tracemalloc on answers
# unpickled as a solver process sends them, 10.5 for the smallest (an evaluate, 1.3 KB of JSON)
# down to 5.7 for a 50-job plan (168 KB). The largest measured keeps the byte bound a bound.
OBJECT_BYTES_PER_JSON_BYTE = 11


def answer_size_bytes(answer: Any) -> int:
    """The memory an answer holds in the cache, from the length of its JSON (one
    serialisation, ~12 ms per MB of JSON: in the solver's thread, not on the event loop)."""
    text = answer.model_dump_json() if isinstance(answer, BaseModel) else json.dumps(answer)
    return OBJECT_BYTES_PER_JSON_BYTE * len(text)


class AnswerCache:
    """A least-recently-used map from canonical request to answer, bounded both in entries
    and in bytes (each entry's key and `answer_size_bytes`): a few large answers (a 500-job
    plan holds ~10 MB) must not outgrow the container's memory. An answer larger than the
    whole byte budget is not kept."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._held_bytes = 0
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        """What the entries held now are counted at."""
        return self._held_bytes

    def get(self, key: str) -> Any | None:
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key][0]

    def put(self, key: str, answer: Any, answer_bytes: int) -> None:
        entry_bytes = sys.getsizeof(key) + answer_bytes
        if self.max_entries == 0 or entry_bytes > self.max_bytes:
            return
        with self._lock:
            self._forget(key)
            self._entries[key] = (answer, entry_bytes)
            self._held_bytes += entry_bytes
            while len(self._entries) > self.max_entries or self._held_bytes > self.max_bytes:
                self._forget(next(iter(self._entries)))

    def _forget(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._held_bytes -= entry[1]

    def __len__(self) -> int:
        return len(self._entries)


class Slot:
    """One of the pool's `workers + queue_depth` places, held by one request."""

    def __init__(self, pool: SolverPool) -> None:
        self._pool, self._held = pool, True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._pool._release_slot()


class SolverPool:
    """Threads for CPU-bound work, admitting at most `workers + queue_depth` jobs at a time."""

    def __init__(self, workers: int, queue_depth: int, retry_after_s: int) -> None:
        self.workers = workers
        self.capacity = workers + queue_depth
        self.retry_after_s = retry_after_s
        self.draining = False
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="solver")
        self._slots = threading.BoundedSemaphore(self.capacity)
        self._admitted = 0
        self._running = 0
        self._lock = threading.Lock()
        self._queued: set[Future[Any]] = set()  # submitted, not yet started
        self._mean_wall_s = 0.0

    @property
    def admitted(self) -> int:
        """Jobs running or waiting right now."""
        return self._admitted

    @property
    def running(self) -> int:
        """Of the admitted jobs, those a worker has started."""
        return self._running

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: the queue ahead drained by the workers at
        the recent mean solve time; never below the configured Retry-After."""
        ahead = max(self._admitted - self.workers + 1, 1)
        expected_s = self._mean_wall_s * ahead / self.workers
        return min(max(self.retry_after_s, math.ceil(expected_s)), MAX_RETRY_AFTER_S)

    def saturated(self) -> Saturated:
        return Saturated(self.retry_after(), self.capacity, self.draining)

    def reserve(self) -> Slot:
        """A slot now, or `Saturated` without waiting (and always while draining)."""
        if self.draining or not self._slots.acquire(blocking=False):
            raise self.saturated()
        with self._lock:
            self._admitted += 1
        return Slot(self)

    def _release_slot(self) -> None:
        with self._lock:
            self._admitted -= 1
        self._slots.release()

    def submit(
        self, work: Callable[..., Answer], *args: Any, slot: Slot | None = None
    ) -> Future[Answer]:
        """Start `work(*args)` in a worker. With no `slot` given, one is taken (or
        `Saturated` raised) and freed when the work ends; a given slot stays its owner's."""
        own = slot is None
        held = self.reserve() if slot is None else slot
        if self.draining:  # reserved before the drain, not yet queued: refused like the queued
            if own:
                held.release()
            raise self.saturated()
        context = contextvars.copy_context()  # the request's id, for the logs
        try:
            future = self._executor.submit(context.run, self._started, work, *args)
        except BaseException:
            held.release()
            raise
        with self._lock:
            self._queued.add(future)
        future.add_done_callback(lambda done: self._finished(done, held if own else None))
        return future

    def _started(self, work: Callable[..., Answer], *args: Any) -> Answer:
        start = time.perf_counter()
        with self._lock:
            self._running += 1
        try:
            return work(*args)
        finally:
            wall_s = time.perf_counter() - start
            with self._lock:
                self._running -= 1
            self._mean_wall_s += WALL_EWMA_WEIGHT * (wall_s - self._mean_wall_s)

    def _finished(self, future: Future[Any], slot: Slot | None) -> None:
        with self._lock:
            self._queued.discard(future)
        if slot is not None:
            slot.release()

    def drain(self) -> int:
        """Refuse new work and drop the queued (their callers get `Saturated`); running work
        goes on. Returns how many were dropped."""
        self.draining = True
        with self._lock:
            queued = list(self._queued)
        return sum(future.cancel() for future in queued)


class Solver:
    """What routes call: cache first, then the pool, timing and counting both."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.pool = SolverPool(settings.workers, settings.queue_depth, settings.retry_after_s)
        # with processes, each solver thread hands its work to a process of its own
        self.processes = (
            SolverProcesses(settings.workers) if settings.solve_in == "processes" else None
        )
        self.cache = AnswerCache(settings.cache_size, settings.cache_max_bytes)
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
        metrics.add_gauge(
            "layoutopt_cache_bytes",
            "Memory the cached answers are counted at (bounded by CACHE_MAX_BYTES).",
            lambda: self.cache.size_bytes,
        )

    def time_limit_for(self, asked_s: float | None) -> float:
        """The request's own limit, capped by the server's."""
        return self.time_limit_s if asked_s is None else min(asked_s, self.time_limit_s)

    async def run(
        self,
        operation: str,
        request: BaseModel,
        work: Callable[[StopSignal], Answer],
        cacheable: Callable[[Answer], bool] = lambda _: True,
        inline: bool = False,
        slot: Slot | None = None,
        receive: Receive | None = None,
    ) -> Answer:
        """The answer to `request`: from the cache if an identical one was answered, else
        `work(stop)`, in the pool (on the request's reserved `slot`), or `inline` on the
        event loop for sub-millisecond work. When `receive` reports the client gone, the
        work is stopped and `ClientGone` raised."""
        key = f"{operation}:{request.model_dump_json()}"
        cached = self.cache.get(key)
        if cached is not None:
            self.metrics.cache_hits.labels(operation).inc()
            return cached  # type: ignore[no-any-return]
        self.metrics.cache_misses.labels(operation).inc()
        stop = StopSignal()
        if inline:
            solved = _solved(work, stop, cacheable)
        else:
            solved = await self._in_pool(work, stop, cacheable, slot, receive)
        self.metrics.solver_seconds.labels(operation).observe(solved.wall_s)
        if solved.size_bytes is not None:
            self.cache.put(key, solved.answer, solved.size_bytes)
        return solved.answer

    async def _in_pool(
        self,
        work: Callable[[StopSignal], Answer],
        stop: StopSignal,
        cacheable: Callable[[Answer], bool],
        slot: Slot | None,
        receive: Receive | None,
    ) -> Solved[Answer]:
        if self.processes is not None:
            work = partial(self.processes.run, work)
        try:
            future = self.pool.submit(_solved, work, stop, cacheable, slot=slot)
        except Saturated as refused:
            self.metrics.rejections.labels("draining" if refused.draining else "saturated").inc()
            raise
        answer = asyncio.wrap_future(future)
        gone: asyncio.Future[Any] = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait([answer, gone], return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not answer.done():  # the client went away first
            stop.stop()
            future.cancel()  # a queued job never starts; a running one stops at once
            self.metrics.rejections.labels("client_gone").inc()
            raise ClientGone()
        if future.cancelled():  # dropped from the queue by a drain
            self.metrics.rejections.labels("draining").inc()
            raise self.pool.saturated()
        try:
            return answer.result()
        except concurrent.futures.CancelledError:
            raise self.pool.saturated() from None


async def _disconnected(receive: Receive | None) -> None:
    """Returns once the client has disconnected (the body is read already, so the next
    message is the disconnect); never, without a `receive`."""
    if receive is None:
        await asyncio.Event().wait()
        return
    while (await receive())["type"] != "http.disconnect":
        pass


class Solved(NamedTuple, Generic[Answer]):
    answer: Answer
    wall_s: float
    size_bytes: int | None  # what it holds in the cache; None when it is not to be cached


def _solved(
    work: Callable[[StopSignal], Answer], stop: StopSignal, cacheable: Callable[[Answer], bool]
) -> Solved[Answer]:
    start = time.perf_counter()
    answer = work(stop)
    wall_s = time.perf_counter() - start
    return Solved(answer, wall_s, answer_size_bytes(answer) if cacheable(answer) else None)
