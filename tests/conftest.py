"""Shared fixtures. Each owner adds theirs; none removes another's."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.http.settings import Settings
from api.schemas import PLATE_EXAMPLE
from bench.server import free_port, start_server, stop_server

# Modules that start servers, worker processes, a browser, Dask, Ray or Slurm, or that clock
# a time limit: `make test` runs them alone, after the rest has run on two workers
# (pytest-xdist), so that no other test's work lands on the cores they time or spawn onto.
SERIAL_MODULES = frozenset(
    {
        "test_artefact_text",
        "test_bounds",
        "test_cli_evaluate",
        "test_cpsat_kernel",
        "test_curve_store",
        "test_docs_offline",
        "test_packaging",
        "test_page_browser",
        "test_page_charts",
        "test_page_export",
        "test_planning",
        "test_planning_api",
        "test_ray_placement",
        "test_readme",
        "test_reliability",
        "test_reliability_deadlines",
        "test_reliability_edge",
        "test_schema_fuzz",
        "test_server",
        "test_sia_simulator",
        "test_slurm_job_submit",
        "test_slurm_sidecar",
        "test_solve_processes",
        "test_standard_comm_formulas",
        "test_standard_formulas",
        "test_standard_profile",
        "test_studies_cli",
        "test_studies_dask",
        "test_studies_http",
        "test_studies_signals",
        "test_usage_examples",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def plate_body() -> dict[str, Any]:
    """The plate's evaluate request (Llama 3 405B, 16,384 H100s), free to mutate."""
    return copy.deepcopy(PLATE_EXAMPLE)


@pytest.fixture
def make_api() -> Iterator[Callable[..., TestClient]]:
    """`make_api(workers=1, ...)`: a TestClient on a fresh app (own pool, cache, metrics)."""
    clients: list[TestClient] = []

    def make(**settings: Any) -> TestClient:
        client = TestClient(create_app(Settings(**settings)), raise_server_exceptions=False)
        clients.append(client.__enter__())
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def api(make_api: Callable[..., TestClient]) -> TestClient:
    return make_api()


# A real `layoutopt serve` on loopback, stopped after the test (test_reliability.py,
# test_schema_fuzz.py).
class Server:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        with log.open("wb") as sink:
            self.process = start_server(self.port, env, sink)
        self.url = f"http://127.0.0.1:{self.port}"

    def entries(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def requests_logged(self, path: str) -> list[int]:
        return [
            e["status"] for e in self.entries() if e["message"] == "request" and e["path"] == path
        ]


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Any]:
    started: list[Server] = []

    def make(**env: str) -> Server:
        server = Server(env, tmp_path / f"server{len(started)}.log")
        started.append(server)
        return server

    yield make
    for server in started:
        if server.process.poll() is None:
            stop_server(server.process)
