"""Running a study's scenarios on any `concurrent.futures.Executor`: a local process pool, or
a Dask cluster through `distributed.Client(address).get_executor()`. One code path for both.

At most `max_in_flight` scenarios are submitted at a time, so a 100,000-scenario study holds
a few futures rather than 100,000, and the rows come back as each finishes. Each scenario's
CP-SAT runs with one worker (`run_scenario` asks for it): parallelism is across scenarios,
so N scenarios on N cores do not oversubscribe them.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from types import FrameType

from optimizer.studies.rows import Row, RunSettings, error_row, run_scenario
from optimizer.studies.spec import Scenario, StudyError

DASK_PREFIX = "dask://"
DASK_CONNECT_TIMEOUT_S = 10
IN_FLIGHT_PER_WORKER = 2  # one running, one queued: workers never wait for the next task
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_S = 1.0  # where there is no parent-death signal: how soon a worker notices


class ExecutorError(RuntimeError):
    """The executor cannot run the study (no scheduler there, a worker process died)."""


def run_study(
    scenarios: Iterable[Scenario],
    settings: RunSettings,
    executor: Executor,
    max_in_flight: int,
) -> Iterator[Row]:
    """Each scenario's row as it finishes (not in order). Closing the iterator early
    cancels what has not started."""
    todo = iter(scenarios)
    pending: dict[Future[Row], Scenario] = {}
    try:
        _fill(pending, todo, settings, executor, max_in_flight)
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield _row_of(future, pending.pop(future), settings)
            _fill(pending, todo, settings, executor, max_in_flight)
    finally:
        for future in pending:
            future.cancel()


def _fill(
    pending: dict[Future[Row], Scenario],
    todo: Iterator[Scenario],
    settings: RunSettings,
    executor: Executor,
    max_in_flight: int,
) -> None:
    while len(pending) < max_in_flight:
        scenario = next(todo, None)
        if scenario is None:
            return
        pending[executor.submit(run_scenario, scenario, settings)] = scenario


def _row_of(future: Future[Row], scenario: Scenario, settings: RunSettings) -> Row:
    """The worker's row; a task the executor lost becomes the scenario's error row."""
    try:
        return future.result()
    except BrokenProcessPool:
        raise ExecutorError(
            "a worker process died (out of memory, or killed); the rows so far are written: "
            "rerun with --resume to go on"
        ) from None
    except Exception as error:  # e.g. a Dask worker lost mid-task
        return error_row(
            scenario, settings, f"the executor lost it ({type(error).__name__}: {error})"
        )


def _start_worker(parent_pid: int) -> None:
    """Each worker's first act: quiet under Ctrl-C, and bound to outlive its parent by no
    more than a moment."""
    # Ctrl-C goes to the whole process group: the parent stops the study and writes what it
    # has; a worker would only die with a trace of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)


def _die_with_parent(parent_pid: int) -> None:
    """End this process when `parent_pid` ends, however it ends (kill -9 included). A worker
    of a parent gone would wait on the task queue forever: it holds that pipe's write end
    itself, so it never reads an end of file. Linux: the kernel's parent-death signal
    (prctl(2) PR_SET_PDEATHSIG); elsewhere a thread that watches the parent's pid."""
    if _set_parent_death_signal(signal.SIGKILL):
        if os.getppid() != parent_pid:  # the parent died before the request took hold
            os._exit(1)
        return
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


def _set_parent_death_signal(signum: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill PID`), raised where Ctrl-C's KeyboardInterrupt is, so that the same
    shutdown runs: workers ended, the rows so far kept."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM raises Terminated in the main thread. Python's default for SIGTERM
    ends the process at once, leaving its pool's workers behind."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextmanager
def local_executor(workers: int) -> Iterator[ProcessPoolExecutor]:
    """`workers` processes, started fresh ("spawn"): no lock or thread of the parent (a
    progress bar, a Dask client) is copied into them half-held."""
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(),),
    )
    try:
        yield pool
    except BaseException:
        _stop_now(pool)
        raise
    else:
        pool.shutdown(wait=True)


def _stop_now(pool: ProcessPoolExecutor) -> None:
    """Interrupted: drop the queue and end the running scenarios now, rather than wait up to
    a time limit for each (Python 3.14 adds `terminate_workers`; 3.11 reaches in)."""
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


def scheduler_address(executor: str) -> str | None:
    """`dask://HOST:PORT` (or a scheduler's own `tcp://`/`tls://` address) for Dask; None for
    `local`."""
    if executor == "local":
        return None
    if executor.startswith(DASK_PREFIX):
        return "tcp://" + executor.removeprefix(DASK_PREFIX)
    if executor.startswith(("tcp://", "tls://", "inproc://")):
        return executor
    raise StudyError(f"executor must be local or dask://HOST:PORT, got {executor!r}", "executor")


@contextmanager
def dask_executor(address: str) -> Iterator[tuple[Executor, int]]:
    """An executor on the Dask cluster at `address` and the threads it has (its workers
    must have this package installed: tasks travel by reference to its functions)."""
    from distributed import Client

    try:
        client = Client(address, timeout=DASK_CONNECT_TIMEOUT_S, set_as_default=False)
    except OSError as error:
        raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {error}") from None
    try:
        threads = max(1, sum(client.nthreads().values()))
        yield client.get_executor(), threads
    finally:
        client.close()


def in_flight_for(workers: int) -> int:
    return max(1, workers) * IN_FLIGHT_PER_WORKER
