"""Solves in worker processes (SOLVE_IN=processes, api/http/processes.py) against a real
`layoutopt serve`: the same answers as the solver threads give, errors raised in a worker
answered as from a thread, a client that leaves stops its worker's solve, and a worker that
dies is replaced (its request answered 503 + Retry-After)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.schemas import SEARCH_EXAMPLE, SearchRequest, optimize_out
from bench.server import children_of
from optimizer.searches import optimize

# Two seconds or more of work on the reference machine, checked between chunks: the
# DeepSeek-V3-shaped preset's frontier on 16,384 GPUs over every placement (engine generic)
# prices its 6.7M layouts.
LONG_FRONTIER = {
    "model": "deepseek-v3-shaped",
    "cluster": {"gpus": 16384},
    "profile": "standard",
    "engine": "generic",
    "time_limit_s": 8,
}


def workers_of(server: Any) -> list[int]:
    """The server's solver processes: its children that multiprocessing spawned (not its
    resource tracker), from /proc."""
    children = children_of(server.process.pid)
    return [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def test_answers_from_worker_processes_are_those_of_the_search(make_server: Any) -> None:
    server = make_server(WORKERS="2", SOLVE_IN="processes")
    assert len(workers_of(server)) == 2  # started with the server, not on first use
    request = SearchRequest.model_validate(SEARCH_EXAMPLE)
    expected = optimize_out(optimize(request.to_request())).model_dump(mode="json")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answer = client.post("/v1/optimize", json=SEARCH_EXAMPLE)
        # an error raised inside a worker: mapped as from a thread, its field kept
        too_large = client.post(
            "/v1/optimize",
            json={
                **LONG_FRONTIER,
                "search": {"micro_batches": [1, 2, 4, 8, 16, 32], "max_vpp": 16},
            },
        )
    assert answer.status_code == 200
    got = answer.json()
    for key in ("status", "best", "binding", "relaxations", "choices", "warnings"):
        assert got[key] == expected[key], key
    assert too_large.status_code == 422
    error = too_large.json()["error"]
    assert error["field"] == "search" and "search space too large" in error["message"]


def test_a_client_that_leaves_stops_its_workers_solve(make_server: Any) -> None:
    server = make_server(WORKERS="1", QUEUE_DEPTH="1", SOLVE_IN="processes")

    async def scenario() -> tuple[float, int]:
        async with httpx.AsyncClient(base_url=server.url, timeout=0.5) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.post("/v1/pareto", json=LONG_FRONTIER)
        gone = time.monotonic()
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            while (await client.get("/readyz")).json()["solver_admitted"] > 0:
                await asyncio.sleep(0.02)
            freed_s = time.monotonic() - gone
            return freed_s, (await client.post("/v1/optimize", json=SEARCH_EXAMPLE)).status_code

    freed_s, status = asyncio.run(scenario())
    assert freed_s < 1.0  # stopped in its process, not run to its 8 s limit
    assert status == 200
    time.sleep(0.2)  # the log line is written as the request ends
    assert server.requests_logged("/v1/pareto") == [499]


def test_a_worker_that_dies_is_replaced(make_server: Any) -> None:
    server = make_server(WORKERS="1", SOLVE_IN="processes")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        (worker,) = workers_of(server)
        os.kill(worker, signal.SIGKILL)  # idle: the next solve starts another
        time.sleep(0.2)
        assert client.post("/v1/optimize", json=SEARCH_EXAMPLE).status_code == 200
        (worker,) = workers_of(server)

        async def killed_mid_solve() -> httpx.Response:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as pool:
                running = asyncio.create_task(pool.post("/v1/pareto", json=LONG_FRONTIER))
                while (await pool.get("/readyz")).json()["solver_admitted"] == 0:
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.3)
                os.kill(worker, signal.SIGKILL)
                return await running

        died = asyncio.run(killed_mid_solve())
        # a fault of the server's, not the request's: retry, the worker is replaced
        assert died.status_code == 503 and int(died.headers["Retry-After"]) >= 1
        error = died.json()["error"]
        assert error["code"] == "solver_lost" and "without an answer" in error["message"]
        assert client.post("/v1/optimize", json=SEARCH_EXAMPLE).status_code == 200
