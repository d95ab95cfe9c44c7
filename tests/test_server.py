"""A real `layoutopt serve` (uvicorn) on a free loopback port, driven over HTTP by api.client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.client import Client, LayoutoptError
from api.schemas import (
    PLATE_EXAMPLE,
    SEARCH_EXAMPLE,
    EstimateOut,
    EvaluateRequest,
    SearchRequest,
    estimate_out,
)
from bench.load import optimize_bodies
from bench.server import free_port, start_server, stop_server
from models.layout import Layout, resolve_layout
from models.stage_plan import StagePlan
from optimizer.costmodel import CostAssumptions, stage_plans
from optimizer.costmodel.profiles import evaluate
from optimizer.searches import finish_estimate
from tests.test_stage_plans import SMALL, _stages_body, small_job


@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server") / "server.log"


@pytest.fixture(scope="module")
def client(server_log: Path) -> Iterator[Client]:
    port = free_port()
    with server_log.open("wb") as log:
        server = start_server(port, {"WORKERS": "2", "SOLVER_TIME_LIMIT_S": "5"}, log)
    try:
        with Client(f"http://127.0.0.1:{port}") as client:
            yield client
    finally:
        stop_server(server)


def test_evaluate_over_http_matches_the_cost_model(client: Client) -> None:
    request = EvaluateRequest.model_validate(PLATE_EXAMPLE)
    expected = estimate_out(
        finish_estimate(
            request.to_request(),
            evaluate(request.job(), request.layout, request.profile, request.assumptions),
        )
    )
    answer = client.evaluate(request)
    assert answer == expected
    # and the spec's reference figures, independently of both
    assert (answer.memory_gb.total, answer.bubble, answer.mfu) == (78.56, 0.1899, 0.4255)


def priced_by_cost_model(request: SearchRequest, answer: EstimateOut) -> EstimateOut:
    """The cost model's estimate of the answer's layout, with what the request's engine says
    of it (its broken rules, its export or refusal, as every answer's estimates carry)."""
    chosen = answer.layout.model_dump(exclude={"micro_batches"})
    layout = Layout.model_validate(chosen)
    estimate = evaluate(request.job(), layout, request.profile, request.assumptions)
    return estimate_out(finish_estimate(request.to_request(), estimate))


def test_optimize_and_pareto_over_http_match_the_cost_model(client: Client) -> None:
    request = SearchRequest.model_validate(SEARCH_EXAMPLE)
    optimum = client.optimize(request)
    assert optimum.status == "optimal" and optimum.best is not None
    assert optimum.best == priced_by_cost_model(request, optimum.best)
    frontier = client.pareto(SEARCH_EXAMPLE).frontier  # a dict works as well as a model
    assert frontier
    assert all(point == priced_by_cost_model(request, point) for point in frontier)
    # the optimum is the frontier's best-MFU end
    assert frontier[-1].mfu == optimum.best.mfu


def test_client_accepts_a_dict_and_raises_the_servers_error(client: Client) -> None:
    bad = {**PLATE_EXAMPLE, "cluster": {"gpus": -16}}
    with pytest.raises(LayoutoptError) as raised:
        client.evaluate(bad)
    error = raised.value
    assert (error.status, error.code, error.field) == (422, "invalid_request", "cluster.gpus")
    assert "cluster.gpus" in str(error)
    assert error.request_id


def test_client_exports_what_the_evaluate_answer_carries(client: Client) -> None:
    # the plate at ZeRO-1 runs on Megatron-LM: the artefact POST /v1/export returns is the
    # evaluate answer's `export`, read back into the same model
    body = {**PLATE_EXAMPLE, "layout": {**PLATE_EXAMPLE["layout"], "zero": 1}, "engine": "megatron"}
    artefact = client.export(body)
    assert (artefact.engine, artefact.format, artefact.filename) == (
        "megatron",
        "megatron-args",
        "megatron_args.sh",
    )
    assert "--tensor-model-parallel-size 8" in artefact.text
    assert client.evaluate(body).export == artefact


def test_client_raises_the_engines_refusal(client: Client) -> None:
    # the plate's ZeRO-2 with pp 16: Megatron-LM shards gradients only through Megatron-FSDP,
    # exported only at pp 1
    body = {**PLATE_EXAMPLE, "engine": "megatron"}
    with pytest.raises(LayoutoptError) as raised:
        client.export(body)
    assert (raised.value.status, raised.value.code, raised.value.field) == (
        422,
        "invalid_spec",
        "engine",
    )
    assert "zero 2 with pp 16" in raised.value.message
    refused = client.evaluate(body)
    assert refused.export is None and refused.export_error == raised.value.message


def test_unreachable_server_is_a_layoutopt_error() -> None:
    with (
        Client(f"http://127.0.0.1:{free_port()}") as nobody,
        pytest.raises(LayoutoptError) as raised,
    ):
        nobody.presets()
    assert (raised.value.status, raised.value.code) == (None, "unreachable")


def test_logs_are_json_lines_with_request_ids(client: Client, server_log: Path) -> None:
    client.presets()
    entries = [json.loads(line) for line in server_log.read_text().splitlines() if line]
    requests = [entry for entry in entries if entry["message"] == "request"]
    assert requests
    assert all(len(entry["request_id"]) == 32 for entry in requests)
    assert {"method", "path", "status", "duration_ms"} <= set(requests[-1])


def test_client_stages_over_a_real_server(client: Client) -> None:
    """The stage search through uvicorn: a plan that places every layer, priced as the cost
    model prices it, within the server's time limit."""
    answer = client.stages(_stages_body())
    assert answer.status == "optimal" and answer.best is not None
    best, job = answer.best, small_job(16)
    layout = Layout(tp=best.layout.tp, pp=best.layout.pp, vpp=best.layout.vpp, zero=1)
    plan = StagePlan(
        layers=tuple(r.layers for r in best.ranks),
        recompute=tuple(r.recompute for r in best.ranks),
    )
    assert sum(plan.layers) == SMALL.num_layers
    price = stage_plans.price_plan(job, CostAssumptions(), resolve_layout(layout, job), plan)
    assert best.mfu == pytest.approx(price.mfu, abs=1e-4)


def test_the_load_benchmark_sends_what_a_default_request_is() -> None:
    # its figure is issue 13's "uncached optimize" one, which is about the service's default
    # profile; the bodies once carried the plate example's workshop without saying so
    bodies = optimize_bodies(2.0, "default")
    assert len(bodies) == 9 and all("profile" not in body for body in bodies)
    assert all(body["profile"] == "workshop" for body in optimize_bodies(2.0, "workshop"))
