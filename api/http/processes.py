"""Solves in worker processes (`SOLVE_IN=processes`): one process per solver thread.

Most of a solve is now the cost model's numpy and the search's Python, which hold the GIL
for much of their time (CP-SAT's own solves are short): two solver threads answered the load
benchmark's optimize requests at 1.04x the rate of one, two processes at 1.76x
(docs/performance.md, "Load"). A thread of the SolverPool keeps the admission, queueing and
stopping it always had, and hands its work to a free process: the work (a partial of a
route's module-level function and its request) is pickled there, its answer or error back.
The thread forwards its request's StopSignal to the process's stop event; the process sets
its own StopSignal from it, so a stopped solve ends as a thread's would. A process that dies
(killed, out of memory) has its request, if it had one, answered 503 with Retry-After
(`solver_lost`), and is replaced at once by a watcher thread rather than when the next
request needs it (which then waited the ~2 s of a start); until it is back, /readyz answers
503, so a load balancer sends elsewhere meanwhile.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import queue
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.synchronize import Event
from typing import Any

from optimizer.search import StopSignal

# How often a waiting thread looks at its StopSignal, and a worker at its stop event.
POLL_S = 0.01
# A worker asked to leave at shutdown gets this long before it is terminated.
CLOSE_WAIT_S = 2.0
# What a worker sends once it has imported the service, and how long that may take.
READY = "ready"
START_TIMEOUT_S = 120.0
# How often the watcher looks for ended processes, and waits after a start that failed.
WATCH_S = 0.1
RESTART_BACKOFF_S = 1.0

logger = logging.getLogger("layoutopt.http")


class WorkerDied(RuntimeError):
    """The process running a solve ended without an answer."""


def _serve(conn: Connection, stop_event: Event) -> None:
    """A worker's loop: each work item received is run with a StopSignal the parent may set
    (through `stop_event`), and its answer or exception sent back; None or EOF ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    import api.http.app  # noqa: F401  the routes' work functions, before the first request

    conn.send(READY)
    while True:
        try:
            work = conn.recv()
        except EOFError:
            return
        if work is None:
            return
        answer = _answer(work, stop_event)
        try:
            conn.send(answer)
        except Exception as error:  # an answer or error pickle cannot carry: said, not lost
            conn.send((False, RuntimeError(f"the solve's result could not be sent back: {error}")))


def _answer(work: Callable[[StopSignal], Any], stop_event: Event) -> tuple[bool, Any]:
    stop, done = StopSignal(), threading.Event()
    forward = threading.Thread(target=_forward, args=(stop_event, stop, done), daemon=True)
    forward.start()
    try:
        return True, work(stop)
    except Exception as error:  # the parent raises it as the thread would have
        return False, error
    finally:
        done.set()


def _forward(stop_event: Event, stop: StopSignal, done: threading.Event) -> None:
    while not done.is_set():
        if stop_event.wait(POLL_S):
            stop.stop()
            return


class WorkerProcess:
    """One solver process, started with the server (SolverProcesses.start) or on first use,
    and the pipe and stop event to it. Its lock is held by the solve using it, or by the
    watcher replacing it."""

    def __init__(self, context: SpawnContext) -> None:
        self._context = context
        self._process: Any = None
        self._conn: Connection | None = None
        self._stop_event: Event | None = None
        self._ready = False  # the process has imported the service
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        """Started, warm and not ended. Read from the process's sentinel (readable once it
        has ended), which waits on nothing: safe beside the thread that uses the process."""
        process = self._process
        if not self._ready or process is None:
            return False
        return not multiprocessing.connection.wait([process.sentinel], timeout=0)

    def replace_if_ended(self) -> bool:
        """Start the process again if it has ended while no solve holds it (a solve that sees
        its process end reaps it, and it is replaced here once the solve lets go). Returns
        whether it was replaced."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self.alive:
                return False
            if self._process is not None:
                self._reap()
            self.start()
            return True
        finally:
            self._lock.release()

    def start(self) -> None:
        """Start the process and wait until it has imported the service (~1 s), so the
        server reports ready with warm workers and no first request pays the imports."""
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        if self._process is not None and self._process.is_alive():
            return
        self._stop_event = self._context.Event()
        self._conn, child = self._context.Pipe()
        self._process = self._context.Process(
            target=_serve, args=(child, self._stop_event), daemon=True, name="layoutopt-solver"
        )
        self._process.start()
        child.close()
        self._ready = False

    def wait_ready(self) -> None:
        if self._ready:
            return
        assert self._conn is not None
        try:
            self._ready = self._conn.poll(START_TIMEOUT_S) and self._conn.recv() == READY
        except (EOFError, OSError):
            self._ready = False
        if not self._ready:
            self._process.terminate()
            self._reap()
            raise WorkerDied("a solver process did not start; it is started again")

    def run(self, work: Callable[[StopSignal], Any], stop: StopSignal) -> Any:
        """`work(stop)` in the process: its answer, or the exception it raised."""
        with self._lock:
            return self._run(work, stop)

    def _run(self, work: Callable[[StopSignal], Any], stop: StopSignal) -> Any:
        self.start()
        assert self._conn is not None and self._stop_event is not None
        self._stop_event.clear()
        self._conn.send(work)
        try:
            while not self._conn.poll(POLL_S):  # a pipe closed by a death polls readable
                if stop.stopped:
                    self._stop_event.set()
                if not self._process.is_alive():
                    raise EOFError()
            ok, value = self._conn.recv()
        except (EOFError, OSError):
            self._reap()  # replaced by the watcher once this solve lets go
            raise WorkerDied(
                "the solver process ended without an answer (killed or out of memory); it is "
                "replaced: retry"
            ) from None
        if ok:
            return value
        raise value

    def close(self) -> None:
        if self._process is None:
            return
        try:
            assert self._conn is not None
            self._conn.send(None)
        except (OSError, ValueError):
            pass
        self._process.join(CLOSE_WAIT_S)
        if self._process.is_alive():
            self._process.terminate()
        self._reap()

    def _reap(self) -> None:
        """Forget the process (waited for, so no zombie is left) and its pipe."""
        self._process.join(CLOSE_WAIT_S)
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn, self._ready = None, None, False


class SolverProcesses:
    """`count` worker processes, each used by one solver thread at a time, and a watcher
    that replaces those that end."""

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("spawn")  # fork is unsafe under the server's threads
        self.count = count
        self._workers = [WorkerProcess(context) for _ in range(count)]
        self._free: queue.SimpleQueue[WorkerProcess] = queue.SimpleQueue()
        for worker in self._workers:
            self._free.put(worker)
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def alive(self) -> int:
        """Processes started, warm and not ended: fewer than `count` while one is replaced."""
        return sum(worker.alive for worker in self._workers)

    def start(self) -> None:
        """Start every process now, together, and wait until each has imported the service
        (~1 s), rather than on first use; then watch them."""
        for worker in self._workers:
            worker.spawn()
        for worker in self._workers:
            worker.wait_ready()
        self._closing.clear()
        self._watcher = threading.Thread(target=self._watch, name="solver-watcher", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while not self._closing.wait(WATCH_S):
            for worker in self._workers:
                try:
                    if worker.replace_if_ended():
                        logger.warning("solver process replaced")
                except WorkerDied as error:
                    logger.error(str(error))
                    self._closing.wait(RESTART_BACKOFF_S)

    def run(self, work: Callable[[StopSignal], Any], stop: StopSignal) -> Any:
        worker = self._free.get()
        try:
            return worker.run(work, stop)
        finally:
            self._free.put(worker)

    def close(self) -> None:
        self._closing.set()
        if self._watcher is not None:
            self._watcher.join()
        for worker in self._workers:
            worker.close()
