"""Every route's whole request ends within its time limit plus the margin docs/deploy.md gives
for building the answer, and a client that leaves stops its work (the solver thread really
stops computing: `solver_running` back to 0), against a real `layoutopt serve` on loopback
(conftest.py's `make_server`). The bounds are generous for a shared 2-core machine and still
far below what these requests took when a stage ignored its deadline (a plan on a
100,000-node pool: 27-40 s for a 1 s limit)."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import httpx

from api.schemas import CALIBRATE_EXAMPLE
from tests.test_reliability import _until_admitted

# docs/deploy.md's margin is 1 s plus a few ms a job; the rest is the machine's share and
# the server's first use of a path (imports, caches).
MARGIN_S = 3.0
# A disconnected request's worker must stop within a second; polling and loopback add a bit.
STOPPED_WITHIN_S = 2.0


def plan_on_big_pools(jobs: int, time_limit_s: float) -> dict[str, Any]:
    """The issue's plan: jobs of 2,162 GPUs or more on pools of 100,000 nodes each."""
    return {
        "jobs": [
            {"name": f"j{k}", "min_gpus": 2162, "request": {"model": "llama3-70b"}}
            for k in range(jobs)
        ],
        "cluster": {
            "pools": [{"nodes": 100_000, "gpu": "b200", "name": f"n{k}"} for k in range(jobs)]
        },
        "time_limit_s": time_limit_s,
    }


def timed_post(url: str, path: str, body: dict[str, Any]) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    answer = httpx.post(url + path, json=body, timeout=60)
    return answer, time.perf_counter() - start


def test_a_plan_on_a_100000_node_pool_keeps_its_time_limit(make_server: Any) -> None:
    server = make_server(WORKERS="1")
    answer, wall_s = timed_post(server.url, "/v1/plan", plan_on_big_pools(1, 1))
    assert answer.status_code == 200, answer.text
    assert wall_s < 1 + MARGIN_S, wall_s
    plan = answer.json()
    assert plan["status"] in ("optimal", "feasible")
    (job,) = plan["jobs"]
    assert len(job["nodes"]) * 8 == job["gpus"] >= 2162


def test_four_jobs_on_four_100000_node_pools_keep_the_time_limit(make_server: Any) -> None:
    server = make_server(WORKERS="1")
    answer, wall_s = timed_post(server.url, "/v1/plan", plan_on_big_pools(4, 1))
    assert answer.status_code == 200, answer.text
    assert wall_s < 1 + MARGIN_S, wall_s
    assert answer.json()["status"] in ("optimal", "feasible", "unknown")


async def _running_after_leaving(url: str, path: str, body: dict[str, Any]) -> float:
    """Seconds from the client leaving a running request to its worker being idle again."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        request = asyncio.create_task(client.post(path, json=body))
        await _until_admitted(client, 1, "running")
        await asyncio.sleep(0.3)  # well into the work
        assert not request.done(), "the request ended before the client could leave"
        request.cancel()  # closes the connection: the server sees a disconnect
        gone = time.monotonic()
        while (await client.get("/readyz")).json()["solver_running"] > 0:
            assert time.monotonic() - gone < 10, "the worker never stopped"
            await asyncio.sleep(0.02)
        stopped_s = time.monotonic() - gone
        assert (await client.get("/readyz")).json()["solver_admitted"] == 0
        return stopped_s


def test_a_plan_whose_client_leaves_stops_its_worker(make_server: Any) -> None:
    # 4 jobs x 4 pools of 100,000 nodes, many counts each: seconds of pricing and solving
    server = make_server(WORKERS="1", SOLVER_TIME_LIMIT_S="20")
    body = plan_on_big_pools(4, 20)
    for job in body["jobs"]:
        job["node_counts"] = list(range(271, 331))
    stopped_s = asyncio.run(_running_after_leaving(server.url, "/v1/plan", body))
    assert stopped_s < STOPPED_WITHIN_S, stopped_s


SCALING = {
    "model": "llama3-70b",
    "cluster": {"gpu": "h100-sxm"},
    "gpu_counts": [64 * k for k in range(1, 65)],
    "explain": True,
}


def test_scaling_keeps_the_time_limit_and_says_which_counts_it_did_not_reach(
    make_server: Any,
) -> None:
    server = make_server(WORKERS="1", SOLVER_TIME_LIMIT_S="2")
    answer, wall_s = timed_post(server.url, "/v1/scaling", SCALING)
    assert answer.status_code == 200, answer.text
    assert wall_s < 2 + MARGIN_S, wall_s
    curve = answer.json()
    assert len(curve["points"]) == 64  # none dropped
    missed = [p for p in curve["points"] if not p["reached"]]
    assert missed and all(p["status"] == "unknown" for p in missed)
    assert not curve["complete"] and "not reached" in curve["warnings"][0]
    assert all(p["status"] != "infeasible" for p in missed)


def test_a_scaling_curve_whose_client_leaves_stops_its_worker(make_server: Any) -> None:
    server = make_server(WORKERS="1", SOLVER_TIME_LIMIT_S="20")
    stopped_s = asyncio.run(_running_after_leaving(server.url, "/v1/scaling", SCALING))
    assert stopped_s < STOPPED_WITHIN_S, stopped_s


def calibration_runs(count: int) -> dict[str, Any]:
    """`count` runs of the example's shape over 64-512 GPUs and tp 1-8: seconds of fitting."""
    runs = []
    for i in range(count):
        run = copy.deepcopy(CALIBRATE_EXAMPLE["runs"][0])
        gpus = 64 * 2 ** (i % 4)
        run["name"] = f"run {i}"
        run["request"]["cluster"]["gpus"] = gpus
        run["request"]["layout"] = {"tp": 2 ** (i % 4), "pp": 1, "cp": 2 - i // 4 % 2, "zero": 1}
        run["measured"] = {"step_time_s": 13.08 * 64 / gpus * (1 + 0.05 * i)}
        runs.append(run)
    return {"runs": runs}


def test_calibrate_keeps_the_time_limit_and_says_what_it_cut(make_server: Any) -> None:
    server = make_server(WORKERS="1", SOLVER_TIME_LIMIT_S="2")
    answer, wall_s = timed_post(server.url, "/v1/calibrate", calibration_runs(8))
    assert answer.status_code == 200, answer.text
    # the margin also covers importing scipy, which the first fit in a process does (~1.5 s)
    assert wall_s < 2 + MARGIN_S, wall_s
    fit = answer.json()["fit"]
    assert fit["complete"] is False
    assert fit["leave_one_out"] is None and fit["leave_one_out_note"].startswith("out of time")


def test_a_calibration_whose_client_leaves_stops_its_worker(make_server: Any) -> None:
    server = make_server(WORKERS="1", SOLVER_TIME_LIMIT_S="20")
    # a first fit imports scipy (about a second, not interruptible): done before leaving
    first = httpx.post(server.url + "/v1/calibrate", json=calibration_runs(1), timeout=60)
    assert first.status_code == 200, first.text
    body = calibration_runs(8)
    stopped_s = asyncio.run(_running_after_leaving(server.url, "/v1/calibrate", body))
    assert stopped_s < STOPPED_WITHIN_S, stopped_s


def test_a_study_whose_client_leaves_stops_its_worker(make_server: Any) -> None:
    server = make_server(WORKERS="1", SOLVER_TIME_LIMIT_S="20")
    study = {
        "base": {**SCALING, "explain": True, "cluster": {"gpu": "h100-sxm", "gpus": 64}},
        "grid": {"cluster.gpus": [64 * k for k in range(1, 33)]},
    }
    del study["base"]["gpu_counts"]
    stopped_s = asyncio.run(_running_after_leaving(server.url, "/v1/studies", study))
    assert stopped_s < STOPPED_WITHIN_S, stopped_s
