"""`POST /v1/studies` and `POST /v1/scaling` against a real `layoutopt serve` on loopback: rows
stream as scenarios finish, a study holds one solver slot, a client that leaves stops the
rest, the bounds answer 422 with the numbers, and a repeated scaling curve is served from
the cache."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.client import Client, LayoutoptError
from bench.server import free_port, start_server, stop_server

FAST: dict[str, Any] = {"model": "llama3-8b", "cluster.gpus": 8}
# Runs to its time limit on any machine: four micro-batch sizes and every placement (no
# engine's rank order) give the optimum millions of MFU ceilings to bound and its best
# tuples to price, 0.75 s to prove on the 2-core reference machine against its 0.3 s limit.
SLOW: dict[str, Any] = {
    "model": "deepseek-v3-shaped",
    "cluster.gpus": 16384,
    "search.micro_batches": [1, 2, 4, 8],
    "engine": "generic",
    "explain": True,
    "time_limit_s": 0.3,
}
BASE: dict[str, Any] = {
    "model": "llama3-8b",
    "cluster": {"gpus": 8},
    "training": {"global_batch": 64, "seq_len": 2048},
    "explain": False,
    "time_limit_s": 1.5,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("studies") / "server.log"
    port = free_port()
    env = {"WORKERS": "2", "SOLVER_TIME_LIMIT_S": "5", "MAX_STUDY_SCENARIOS": "20"}
    with log.open("wb") as sink:
        process = start_server(port, env, sink)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(process)


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def admitted(url: str) -> int:
    return int(httpx.get(f"{url}/readyz").json()["solver_admitted"])


def test_the_first_row_arrives_before_the_last_scenario_is_solved(server: str) -> None:
    spec = {"base": BASE, "scenarios": [FAST, SLOW], "train_tokens": 1e12}
    arrivals: list[tuple[float, dict[str, Any]]] = []
    start = time.perf_counter()
    with Client(server) as client:
        for row in client.study(spec):
            arrivals.append((time.perf_counter() - start, row))
    (first_s, first), (last_s, last) = arrivals
    assert first["status"] == "optimal" and first["model"] == "llama3-8b"
    # cut short by its time limit: a layout not proved optimal, or none yet on a slower machine
    assert last["status"] in ("feasible", "unknown") and last["model"] == "deepseek-v3-shaped"
    assert last["solver_wall_s"] >= 0.25
    assert last_s - first_s >= 0.2, arrivals  # streamed, not held back until the end


def test_a_client_that_leaves_stops_the_rest_of_its_study(server: str) -> None:
    # 2 s each (their explanations run to the limit): far longer than the 0.3 s wait below
    slow = [
        SLOW | {"cluster.gpus": gpus, "time_limit_s": 2} for gpus in (1024, 2048, 4096, 8192, 16384)
    ]
    spec = {"base": BASE, "scenarios": [FAST, *slow]}
    solved = metric(server, 'layoutopt_study_scenarios_total{outcome="solved"}')
    with Client(server) as client:
        rows = client.study(spec)
        first = next(rows)
        assert first["status"] == "optimal"
        time.sleep(0.3)  # the second scenario is under way, on the study's one slot
        assert admitted(server) == 1
        rows.close()  # leave mid-stream
    deadline = time.monotonic() + 3.0
    while admitted(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert admitted(server) == 0  # the running scenario was stopped, nothing more started
    time.sleep(0.5)
    assert metric(server, 'layoutopt_study_scenarios_total{outcome="cancelled"}') >= 4
    assert metric(server, 'layoutopt_study_scenarios_total{outcome="solved"}') <= solved + 2


def test_studies_are_bounded_and_refused_with_the_numbers(server: str) -> None:
    with Client(server) as client:
        big = {
            "base": BASE,
            "grid": {"cluster.gpus": [8, 16, 32, 64, 128], "model": ["llama3-8b"] * 5},
        }
        with pytest.raises(LayoutoptError) as raised:
            list(client.study(big))
        assert raised.value.status == 422 and raised.value.field == "grid"
        assert "25 scenarios" in raised.value.message and "limit is 20" in raised.value.message
        with pytest.raises(LayoutoptError) as raised:
            list(client.study({"base": BASE, "grid": {"search.memory_limt_gb": [40]}}))
        assert raised.value.field == "grid.search.memory_limt_gb[0]"


def test_failed_scenarios_stream_as_rows(server: str) -> None:
    base = {k: v for k, v in BASE.items() if k not in ("explain", "time_limit_s")}
    spec = {
        "base": base | {"layout": {"tp": 8}},
        "grid": {"cluster.gpus": [8, 12]},
        "compute": "evaluate",
    }
    with Client(server) as client:
        rows = sorted(client.study(spec), key=lambda row: row["cluster.gpus"])
    assert [row["status"] for row in rows] == ["evaluated", "error"]
    assert rows[1]["error"] and rows[1]["mfu"] is None


def test_a_repeated_scaling_curve_comes_from_the_cache(server: str) -> None:
    request = {
        "model": "llama3-8b",
        "cluster": {"gpu": "h100-sxm"},
        "training": {"global_batch": 256, "seq_len": 4096},
        "gpu_range": {"min_gpus": 8, "max_gpus": 64},
    }
    with Client(server) as client:
        start = time.perf_counter()
        first = client.scaling(request)
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        again = client.scaling(request)
        again_s = time.perf_counter() - start
    assert [point.gpus for point in first.points] == [8, 16, 24, 32, 40, 48, 56, 64]
    assert first.complete and {point.status for point in first.points} == {"optimal"}
    assert all(
        point.tokens_per_s == pytest.approx(point.gpus * point.tokens_per_s_per_gpu, rel=1e-3)
        for point in first.points
    )
    assert again == first
    assert metric(server, 'layoutopt_cache_hits_total{operation="scaling"}') >= 1
    assert again_s < first_s / 5 and again_s < 0.1, (first_s, again_s)


def test_scaling_bounds_name_the_numbers(server: str) -> None:
    with Client(server) as client:
        with pytest.raises(LayoutoptError) as raised:
            client.scaling(
                {
                    "model": "llama3-8b",
                    "cluster": {},
                    "gpu_range": {"min_gpus": 8, "max_gpus": 8192},
                }
            )
        assert raised.value.status == 422 and raised.value.field == "gpu_range"
        assert "1024 whole-node counts" in raised.value.message
        with pytest.raises(LayoutoptError) as raised:
            client.scaling({"model": "llama3-8b", "cluster": {}})
        assert (
            raised.value.status == 422 and "either gpu_counts or gpu_range" in raised.value.message
        )


def test_the_server_log_records_each_study(
    server: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    logs = list(Path(tmp_path_factory.getbasetemp()).glob("studies*/server.log"))
    text = logs[0].read_text()
    assert '"message": "study"' in text and '"rows_sent": 1' in text  # the one that left
