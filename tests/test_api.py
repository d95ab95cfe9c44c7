"""The HTTP API through FastAPI's TestClient: answers, bad input as a new user sends it,
saturation, the cache, request ids, metrics and the OpenAPI examples."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from api.http import routes
from api.http.app import create_app
from api.http.settings import Settings
from api.http.workers import Saturated, SolverPool
from api.schemas import PLATE_EXAMPLE, SEARCH_EXAMPLE
from models.presets import model_preset


def error_of(response: Any) -> dict[str, Any]:
    """The error body, after checking it has the contract's shape and no trace in it."""
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "field"}
    assert "Traceback" not in response.text
    return body["error"]  # type: ignore[no-any-return]


def test_evaluate_gives_the_spec_reference_figures(api: TestClient) -> None:
    response = api.post("/v1/evaluate", json=PLATE_EXAMPLE)
    answer = response.json()
    assert response.status_code == 200
    # cost-model.md reference table for the plate's layout
    memory = answer["memory_gb"]
    assert (memory["weights"], memory["gradients"], memory["optimizer"]) == (6.34, 0.05, 0.30)
    assert (memory["activations"], memory["total"], memory["capacity"]) == (71.87, 78.56, 80.0)
    assert (answer["bubble"], answer["mfu"]) == (0.1899, 0.4255)
    # dp = 16384 / (8 * 16 * 1) = 128; micro-batches = 2048 / (128 * 1) = 16
    assert answer["layout"]["dp"] == 128
    assert answer["layout"]["micro_batches"] == 16
    assert answer["fits"] is True


def _set(body: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        body = body[key]
    if value is _DELETE:
        del body[leaf]
    else:
        body[leaf] = value


_DELETE = object()

# (what a new user gets wrong, where, the field the error must name)
BAD_FIELDS = [
    ("cluster.gpus", "sixteen thousand", "cluster.gpus"),  # wrong type
    ("layout.tp", 8.5, "layout.tp"),  # a fraction for a degree
    ("model", 42, "model"),
    ("cluster", None, "cluster"),
    ("cluster", _DELETE, "cluster"),  # missing
    ("model", _DELETE, "model"),
    ("training.global_batch", -1, "training.global_batch"),  # negative
    ("layout.pp", 0, "layout.pp"),
    ("cluster.gpus", 10**30, "cluster.gpus"),  # huge
    ("training.seq_len", 10**12, "training.seq_len"),
    ("layout.zero", 4, "layout.zero"),
    ("layout.recompute", "sometimes", "layout.recompute"),
    ("layout.tpp", 8, "layout.tpp"),  # unknown fields, a typo and an invention
    ("priority", "high", "priority"),
    ("cluster.gpu", "h1000", "cluster.gpu"),  # unknown preset
]


@pytest.mark.parametrize(("path", "value", "field"), BAD_FIELDS)
def test_bad_field_gets_422_naming_it(
    api: TestClient, plate_body: dict[str, Any], path: str, value: Any, field: str
) -> None:
    _set(plate_body, path, value)
    response = api.post("/v1/evaluate", json=plate_body)
    error = error_of(response)
    assert response.status_code == 422
    assert error["field"] == field
    assert field in error["message"] or "unknown" in error["message"]


@pytest.mark.parametrize(
    ("path", "value", "field", "numbers"),
    [
        # 8 * 16 * 1 = 128 GPUs per replica does not divide 1000
        ("cluster.gpus", 1000, "layout", ["128", "1000"]),
        # dp is derived: 16384 / 128 = 128, so 64 disagrees
        ("layout.dp", 64, "layout.dp", ["64", "128"]),
    ],
)
def test_infeasible_spec_gets_422_with_the_numbers(
    api: TestClient,
    plate_body: dict[str, Any],
    path: str,
    value: Any,
    field: str,
    numbers: list[str],
) -> None:
    _set(plate_body, path, value)
    response = api.post("/v1/evaluate", json=plate_body)
    error = error_of(response)
    assert response.status_code == 422
    assert error["code"] == "invalid_spec"
    assert error["field"] == field
    assert all(number in error["message"] for number in numbers)


def test_absurd_efficiency_gets_422_naming_it_not_a_silent_null(
    api: TestClient, plate_body: dict[str, Any]
) -> None:
    # 6 * params * tokens / (tp * peak * 5e-324) would overflow to inf, and JSON would say null
    plate_body["assumptions"] = {"kernel_efficiency": 5e-324}
    response = api.post("/v1/evaluate", json=plate_body)
    error = error_of(response)
    assert response.status_code == 422
    assert error["field"] == "assumptions.kernel_efficiency"
    assert "greater than or equal to 0.01" in error["message"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ('{"model": "llama3-405b", ', "invalid_json"),
        ("{'model': 'llama3-405b'}", "invalid_json"),
        ("", "invalid_request"),
        ("[1, 2]", "invalid_request"),
    ],
)
def test_malformed_body_gets_422_json(api: TestClient, body: str, code: str) -> None:
    response = api.post("/v1/evaluate", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert error_of(response)["code"] == code


def test_oversized_body_gets_413_by_its_length(make_api: Callable[..., TestClient]) -> None:
    api = make_api(max_body_bytes=1000)
    response = api.post(
        "/v1/evaluate", content=b" " * 1001, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "body_too_large"
    assert "1,001" in error["message"] and "1,000" in error["message"]


def test_oversized_body_gets_413_as_it_streams(make_api: Callable[..., TestClient]) -> None:
    api = make_api(max_body_bytes=1000)
    chunks = (b" " * 400 for _ in range(3))  # no Content-Length: sent chunked, 1,200 bytes
    response = api.post(
        "/v1/evaluate", content=chunks, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert error_of(response)["code"] == "body_too_large"


def test_body_at_the_limit_is_read(make_api: Callable[..., TestClient]) -> None:
    api = make_api(max_body_bytes=1000)
    body = b'{"model": "llama3-405b"}'.ljust(1000)  # exactly the limit; cluster missing
    response = api.post("/v1/evaluate", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert error_of(response)["field"] == "cluster"


def test_unknown_route_and_method_answer_in_the_error_shape(api: TestClient) -> None:
    assert error_of(api.get("/v1/nothing"))["code"] == "not_found"
    response = api.get("/v1/evaluate")
    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"


def test_fault_gives_json_500_with_request_id_and_no_trace(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: Any) -> None:
        raise RuntimeError("secret detail of a bug")

    monkeypatch.setattr(routes, "price", broken)
    response = api.post("/v1/evaluate", json=PLATE_EXAMPLE)
    error = error_of(response)
    assert response.status_code == 500
    assert error["code"] == "internal_error"
    assert "internal error" in error["message"]
    assert response.headers["X-Request-ID"] in error["message"]
    assert "secret detail" not in response.text


def test_saturated_server_answers_503_with_retry_after(
    make_api: Callable[..., TestClient],
) -> None:
    api = make_api(workers=1, queue_depth=0, retry_after_s=7)
    release = threading.Event()
    blocker = api.app.state.solver.pool.submit(release.wait, 30)  # type: ignore[attr-defined]
    try:
        response = api.post("/v1/optimize", json=SEARCH_EXAMPLE)
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "7"
        assert error_of(response)["code"] == "saturated"
        # pricing does not queue behind solves: it still answers
        assert api.post("/v1/evaluate", json=PLATE_EXAMPLE).status_code == 200
    finally:
        release.set()
        blocker.result(timeout=30)
    assert 'layoutopt_rejections_total{reason="saturated"} 1.0\n' in api.get("/metrics").text


def test_requests_over_the_in_flight_limit_get_503_but_probes_pass() -> None:
    app = create_app(Settings(workers=1, queue_depth=1, max_in_flight=1))
    pool = app.state.solver.pool
    release = threading.Event()
    blocker = pool.submit(release.wait, 30)  # the one worker is busy

    async def scenario() -> tuple[int, int, str, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            queued = asyncio.create_task(client.post("/v1/optimize", json=SEARCH_EXAMPLE))
            while pool.admitted < 2:  # the optimize is in flight, waiting for the worker
                await asyncio.sleep(0.01)
            refused = await client.post("/v1/evaluate", json=PLATE_EXAMPLE)
            live = await client.get("/healthz")
            release.set()
            return refused.status_code, live.status_code, refused.text, (await queued).status_code

    try:
        refused, live, body, queued = asyncio.run(scenario())
    finally:
        release.set()
        blocker.result(timeout=30)
    assert (refused, live, queued) == (503, 200, 200)
    assert json.loads(body)["error"]["code"] == "saturated"
    assert "1 requests in flight" in body


def test_pool_admits_workers_plus_queue_then_refuses() -> None:
    pool = SolverPool(workers=1, queue_depth=1, retry_after_s=1)
    release = threading.Event()
    running, queued = pool.submit(release.wait, 30), pool.submit(release.wait, 30)
    with pytest.raises(Saturated):
        pool.submit(release.wait, 30)
    assert pool.admitted == 2
    release.set()
    assert running.result(timeout=30) and queued.result(timeout=30)
    assert pool.admitted == 0
    pool.submit(int).result(timeout=30)  # slots are free again


def test_a_slot_reserved_before_the_drain_is_refused_when_its_work_comes() -> None:
    # a request takes its slot before its body is parsed: when the drain falls between
    # the two, its work must be refused like the queued work, not started
    pool = SolverPool(workers=1, queue_depth=1, retry_after_s=1)
    slot = pool.reserve()
    pool.drain()
    with pytest.raises(Saturated) as refused:
        pool.submit(int, slot=slot)
    assert refused.value.draining
    slot.release()
    assert pool.admitted == 0


def test_identical_requests_are_served_from_the_cache(
    api: TestClient, plate_body: dict[str, Any]
) -> None:
    first = api.post("/v1/evaluate", json=plate_body).json()
    # The same request spelt differently: the preset written out in full.
    plate_body["model"] = model_preset("llama3-405b").model_dump()
    second = api.post("/v1/evaluate", json=plate_body).json()
    assert second == first
    metrics = api.get("/metrics").text
    assert 'layoutopt_cache_hits_total{operation="evaluate"} 1.0\n' in metrics
    assert 'layoutopt_cache_misses_total{operation="evaluate"} 1.0\n' in metrics
    assert 'layoutopt_solver_wall_seconds_count{operation="evaluate"} 1.0\n' in metrics


def test_cache_keeps_only_the_most_recent(
    make_api: Callable[..., TestClient], plate_body: dict[str, Any]
) -> None:
    api = make_api(cache_size=1)
    other = {**plate_body, "training": {"global_batch": 4096, "seq_len": 8192}}
    for body in (plate_body, other, plate_body):  # `other` evicts the plate
        api.post("/v1/evaluate", json=body)
    assert 'layoutopt_cache_misses_total{operation="evaluate"} 3.0\n' in api.get("/metrics").text


def test_request_id_is_echoed_or_made(api: TestClient) -> None:
    echoed = api.get("/healthz", headers={"X-Request-ID": "job-42.retry:1"})
    assert echoed.headers["X-Request-ID"] == "job-42.retry:1"
    forged = api.get("/healthz", headers={"X-Request-ID": 'a" level="error'})
    assert len(forged.headers["X-Request-ID"]) == 32  # replaced by a fresh uuid4 hex


def test_metrics_count_requests_by_route_and_status(api: TestClient) -> None:
    api.post("/v1/evaluate", json=PLATE_EXAMPLE)
    api.post("/v1/evaluate", json={"model": "llama3-405b"})
    response = api.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = response.text
    assert (
        'layoutopt_http_requests_total{method="POST",route="/v1/evaluate",status="200"} 1.0\n'
        in text
    )
    assert (
        'layoutopt_http_requests_total{method="POST",route="/v1/evaluate",status="422"} 1.0\n'
        in text
    )
    assert (
        'layoutopt_http_request_duration_seconds_count{method="POST",route="/v1/evaluate"} 2.0\n'
        in text
    )


def test_presets_health_and_readiness(api: TestClient) -> None:
    presets = api.get("/v1/presets").json()
    assert presets["gpus"]["h100-sxm"]["spec"]["memory_gb"] == 80
    assert "llama3-405b" in presets["models"]
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"


def test_openapi_shows_the_plate_example_for_each_plan_route(api: TestClient) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    expected = {
        "/v1/evaluate": PLATE_EXAMPLE,
        "/v1/optimize": SEARCH_EXAMPLE,
        "/v1/pareto": SEARCH_EXAMPLE,
    }
    assert {path for path in paths if "post" in paths[path]} >= set(expected)
    for path, example in expected.items():
        media = paths[path]["post"]["requestBody"]["content"]["application/json"]
        assert media["examples"]["plate"]["value"] == example


def test_every_example_the_docs_offer_is_answered(api: TestClient) -> None:
    # what "Try it out" in /docs sends: each POST route's examples, answered, not refused
    paths = api.get("/openapi.json").json()["paths"]
    tried = set()
    for path, methods in paths.items():
        content = methods.get("post", {}).get("requestBody", {}).get("content", {})
        for name, example in content.get("application/json", {}).get("examples", {}).items():
            response = api.post(path, json=example["value"])
            assert response.status_code == 200, (path, name, response.text[:300])
            tried.add(path)
    # the stage search's example once asked for profile workshop, which it refuses
    assert {"/v1/evaluate", "/v1/optimize", "/v1/pareto", "/v1/stages"} <= tried


def test_an_integer_written_with_a_zero_fraction_is_an_integer_everywhere(
    api: TestClient, plate_body: dict[str, Any]
) -> None:
    # JSON Schema counts 3.0 an integer: schemathesis's generated bodies write them so, and a
    # calibration file's run count was refused where every other count was taken
    provenance = {"gpus": ["h100-sxm"], "engines": ["generic"], "runs": 3.0}
    plate_body["assumptions"] = {"calibrated_on": provenance}
    assert api.post("/v1/evaluate", json=plate_body).status_code == 200
    provenance["runs"] = 3.5
    error = api.post("/v1/evaluate", json=plate_body).json()["error"]
    assert error["field"] == "assumptions.calibrated_on.runs"
