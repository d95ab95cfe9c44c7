"""The plan at the edge: POST /v1/plan (TestClient and a real server through the client),
`layoutopt plan` and its exit codes. Real scaling curves: small models under the workshop
profile, a few node counts, so the optimize calls stay in the tens of milliseconds."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.client import Client, LayoutoptError
from api.schemas import EstimateOut, PlanOut, estimate_out
from bench.server import free_port, start_server, stop_server
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer import Request
from optimizer.costmodel import evaluate
from optimizer.engines import get_engine
from optimizer.planning import CURVE_CACHE, Pool
from optimizer.searches import finish_estimate
from tests.helpers import run_cli


def _job(name: str, model: str, counts: list[int], **extra: Any) -> dict[str, Any]:
    training = {"global_batch": 256, "seq_len": 4096}
    request = {"model": model, "profile": "workshop", "training": training}
    return {"name": name, "request": request, "node_counts": counts, **extra}


SMALL: dict[str, Any] = {
    "cluster": {
        "pools": [
            {
                "name": "h100",
                "gpu": "h100-sxm",
                "nodes": 8,
                "nodes_per_rack": 4,
                "unavailable_nodes": [7],
            },
            {"name": "a100", "gpu": "a100-80gb", "nodes": 4, "nodes_per_rack": 4},
        ]
    },
    "jobs": [
        _job("a", "llama3-8b", [1, 2, 4], running={"pool": "h100", "nodes": [0, 1]}),
        _job("b", "mistral-7b", [1, 2, 4], weight=2.0),
        _job("c", "llama3-8b", [1, 2], preemptible=False),
    ],
    "time_limit_s": 20,
}


@pytest.fixture
def small() -> dict[str, Any]:
    return copy.deepcopy(SMALL)


def priced(
    body: dict[str, Any], name: str, pool_name: str, nodes: int, best: EstimateOut
) -> EstimateOut:
    """The job's layout as the cost model prices it on its pool and node count, with its
    engine's verdict."""
    job = next(j for j in body["jobs"] if j["name"] == name)
    spec = next(p for p in body["cluster"]["pools"] if p["name"] == pool_name)
    pool = Pool(pool_name, gpu_preset(spec["gpu"]), spec["nodes"], spec.get("gpus_per_node", 8))
    training = TrainingSpec(**job["request"]["training"])
    from models.job import TrainingJob

    on = TrainingJob(
        model=model_preset(job["request"]["model"]), cluster=pool.cluster(nodes), training=training
    )
    layout = Layout.model_validate(best.layout.model_dump(exclude={"micro_batches"}))
    engine = job["request"].get("engine", "megatron")
    judged = finish_estimate(
        Request(on, profile="workshop", engine=get_engine(engine)), evaluate(on, layout, "workshop")
    )
    return estimate_out(replace(judged, export=None))  # the job carries it, once


def test_plan_over_http_prices_every_layout_with_the_cost_model(
    api: TestClient, small: dict[str, Any]
) -> None:
    response = api.post("/v1/plan", json=small)
    assert response.status_code == 200, response.text
    answer = PlanOut.model_validate(response.json())
    assert answer.status == "optimal" and answer.gap == 0
    assert [job.name for job in answer.jobs] == ["a", "b", "c"]
    held: set[tuple[str, int]] = set()
    for job in answer.jobs:
        assert job.pool is not None and job.best is not None, job.name
        assert job.best == priced(small, job.name, job.pool, len(job.nodes), job.best)
        assert job.tokens_per_s == pytest.approx(job.best.tokens_per_s_per_gpu * job.gpus, rel=1e-4)
        assert job.placement is not None
        # each job's layout in its engine's input (searches default to Megatron-LM)
        assert job.export is not None and job.export.engine == job.engine == "megatron"
        assert job.best.export is None  # carried once, by the job
        assert f"--tensor-model-parallel-size {job.best.layout.tp}" in job.export.text
        assert not held & {(job.pool, n) for n in job.nodes}
        held |= {(job.pool, n) for n in job.nodes}
    assert ("h100", 7) not in held  # unavailable
    assert answer.explanations is not None and len(answer.explanations.pools) == 2
    assert not any("export is null" in w for w in answer.warnings)


def test_the_same_request_gives_the_same_plan_digest(
    make_api: Callable[..., TestClient], small: dict[str, Any]
) -> None:
    digests = {
        make_api(cache_size=0).post("/v1/plan", json=small).json()["plan_digest"] for _ in range(2)
    }
    assert len(digests) == 1


def test_plan_waits_for_a_solver_slot_like_every_search(
    make_api: Callable[..., TestClient], small: dict[str, Any]
) -> None:
    api = make_api(workers=1, queue_depth=0)
    slot = api.app.state.solver.pool.reserve()  # type: ignore[attr-defined]
    try:
        response = api.post("/v1/plan", json=small)
    finally:
        slot.release()
    assert response.status_code == 503 and "Retry-After" in response.headers


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (
            lambda b: b["jobs"][0]["running"].update(pool="tpu"),
            "jobs.running.pool",
            "not in the cluster",
        ),
        (
            lambda b: b["jobs"][1].update(running={"pool": "h100", "nodes": [1]}),
            "jobs.running.nodes",
            "both run on node 1",
        ),
        (
            lambda b: b["jobs"][2].update(deadline={"tokens": 1e9, "by": "2030-01-01T00:00:00Z"}),
            "jobs.deadline.by",
            "needs the plan's `now`",
        ),
        (
            lambda b: b["cluster"]["pools"][0].update(racks=2),
            "cluster.pools.racks",
            "unknown field",
        ),
        (
            lambda b: b["jobs"][0].update(min_gpus=64, max_gpus=8),
            "jobs.max_gpus",
            "max_gpus(8) < min_gpus(64)",
        ),
    ],
)
def test_bad_plans_get_422_naming_the_field(
    api: TestClient, small: dict[str, Any], change: Callable[[dict], None], field: str, words: str
) -> None:
    change(small)
    response = api.post("/v1/plan", json=small)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == field and words in error["message"]


def infeasible(body: dict[str, Any]) -> dict[str, Any]:
    """Two jobs that may not be preempted, of 5 nodes each: the 4-node pool takes neither,
    the other (7 of 8 nodes available) only one."""
    for job in body["jobs"][1:]:
        job.update(preemptible=False, min_gpus=40, node_counts=[5])
    return body


def test_an_infeasible_plan_is_an_answer_with_its_minimal_conflict(
    api: TestClient, small: dict[str, Any]
) -> None:
    answer = api.post("/v1/plan", json=infeasible(small)).json()
    assert answer["status"] == "infeasible" and answer["jobs"] == []
    names = {item["name"] for item in answer["conflict"]}
    assert names == {"must_run:b", "must_run:c", "capacity:h100"}, answer["conflict"]


def test_cli_plan_exit_codes(
    tmp_path: Path, small: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "plan.json"
    spec.write_text(json.dumps(small))
    status, out, _ = run_cli(["plan", str(spec)], capsys)
    assert status == 0 and out.startswith("status   optimal")
    status, out, _ = run_cli(["plan", "--spec", str(spec), "--json", "--workers", "2"], capsys)
    assert status == 0 and PlanOut.model_validate_json(out).status == "optimal"
    spec.write_text(json.dumps(infeasible(copy.deepcopy(small))))
    assert run_cli(["plan", str(spec)], capsys)[0] == 3
    CURVE_CACHE.clear()
    spec.write_text(json.dumps({**small, "time_limit_s": 0.001}))
    status, out, _ = run_cli(["plan", str(spec)], capsys)  # nothing priced in time: no proof
    assert status == 4 and out.startswith("status   unknown")
    spec.write_text(json.dumps({**small, "objective": "speed"}))
    status, _, err = run_cli(["plan", str(spec)], capsys)
    assert status == 2 and "objective" in err
    assert run_cli(["plan", str(tmp_path / "missing.json")], capsys)[0] == 2


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    port = free_port()
    log = tmp_path_factory.mktemp("plan-server") / "server.log"
    with log.open("wb") as out:
        server = start_server(port, {"WORKERS": "1", "SOLVER_TIME_LIMIT_S": "20"}, out)
    try:
        with Client(f"http://127.0.0.1:{port}") as client:
            yield client
    finally:
        stop_server(server)


def test_client_plans_against_a_real_server(client: Client) -> None:
    answer = client.plan(SMALL)
    assert answer.status == "optimal" and len(answer.jobs) == 3
    with pytest.raises(LayoutoptError) as refused:
        client.plan({**SMALL, "jobs": [{"name": "x"}]})
    assert refused.value.status == 422


def test_a_job_short_of_a_pools_unavailable_nodes_is_told_so_not_who_holds_them(
    api: TestClient,
) -> None:
    # one job alone wants the whole pool, two of its nodes are down: no other job holds any
    body = {
        "cluster": {
            "pools": [{"name": "h100", "gpu": "h100-sxm", "nodes": 8, "unavailable_nodes": [3, 5]}]
        },
        "jobs": [_job("a", "llama3-8b", [2, 4, 8])],
        "time_limit_s": 20,
    }
    response = api.post("/v1/plan", json=body)
    assert response.status_code == 200, response.text
    reasons = [
        reason["message"]
        for shortfall in response.json()["explanations"]["jobs"]
        for reason in shortfall["reasons"]
    ]
    assert any("has 6 available nodes (2 unavailable)" in why for why in reasons), reasons
    assert not any("held by )" in why for why in reasons)
