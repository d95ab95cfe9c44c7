"""`/v1/optimize` and `/v1/pareto` through TestClient: answers priced by the cost model,
the request's time limit capped by the server's, bad search input named by field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.schemas import SEARCH_EXAMPLE, EstimateOut, SearchRequest, estimate_out
from models.layout import Layout
from optimizer import searches as search
from optimizer.costmodel.profiles import evaluate
from optimizer.searches import finish_estimate


def cost_model_price(
    request_body: dict[str, Any], answer: dict[str, Any], judged: bool = True
) -> EstimateOut:
    """The cost model's own estimate of the layout an answer chose, for the same job; unless
    `judged` is false, with what the request's engine says of it (the rules it breaks, and
    its export or refusal), as the answer's best layout and frontier points carry."""
    request = SearchRequest.model_validate(request_body)
    chosen = {key: value for key, value in answer["layout"].items() if key != "micro_batches"}
    layout = Layout.model_validate(chosen)
    estimate = evaluate(request.job(), layout, request.profile, request.assumptions)
    if not judged:
        return estimate_out(estimate)
    return estimate_out(finish_estimate(request.to_request(), estimate))


@pytest.fixture
def search_body() -> dict[str, Any]:
    return copy.deepcopy(SEARCH_EXAMPLE)


def test_optimize_answers_a_layout_the_cost_model_prices_the_same(
    api: TestClient, search_body: dict[str, Any]
) -> None:
    response = api.post("/v1/optimize", json=search_body)
    answer = response.json()
    assert response.status_code == 200
    assert answer["status"] == "optimal"
    assert answer["solver"]["proved_optimal"] is True
    assert EstimateOut.model_validate(answer["best"]) == cost_model_price(
        search_body, answer["best"]
    )
    assert answer["best"]["fits"] is True


def test_optimize_prices_each_less_common_choice(api: TestClient) -> None:
    # the plate under standard at the plate's 4 chunks: cp 8 with DualPipe; each choice comes
    # with the best layout without it, priced by the cost model like any answer
    body = {"model": "llama3-405b", "cluster": {"gpus": 16384}, "search": {"max_vpp": 4}}
    body["engine"] = "generic"  # no engine's rules: DualPipe is Megatron-LM's to refuse
    answer = api.post("/v1/optimize", json=body).json()
    choices = {choice["name"]: choice for choice in answer["choices"]}
    assert set(choices) == {"context_parallel", "schedule"}
    without_cp = choices["context_parallel"]["without"]
    assert without_cp["layout"]["cp"] == 1
    assert EstimateOut.model_validate(without_cp) == cost_model_price(body, without_cp, False)
    assert choices["context_parallel"]["without_mfu"] == without_cp["mfu"] < answer["best"]["mfu"]


def test_pareto_frontier_is_priced_by_the_cost_model_and_ordered(
    api: TestClient, search_body: dict[str, Any]
) -> None:
    response = api.post("/v1/pareto", json=search_body)
    frontier = response.json()["frontier"]
    assert response.status_code == 200
    assert len(frontier) >= 2
    for point in frontier:
        assert EstimateOut.model_validate(point) == cost_model_price(search_body, point)
    memory = [point["memory_gb"]["total"] for point in frontier]
    mfu = [point["mfu"] for point in frontier]
    assert memory == sorted(memory) and mfu == sorted(mfu)


def test_time_limit_is_the_requests_capped_by_the_servers(
    make_api: Callable[..., TestClient],
    search_body: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[float] = []
    real_optimize = search.optimize

    def spy(*args: Any, **kwargs: Any) -> search.OptimizeResult:
        asked.append(args[1].time_limit_s)  # the budget, passed second
        return real_optimize(*args, **kwargs)

    monkeypatch.setattr(search, "optimize", spy)
    api = make_api(solver_time_limit_s=3.0)
    for time_limit_s in (600, 2.5):  # over the server's cap, then under it
        api.post("/v1/optimize", json={**search_body, "time_limit_s": time_limit_s})
    api.post("/v1/optimize", json=search_body)  # no limit asked: the server's
    assert asked == [3.0, 2.5, 3.0]


def test_infeasible_search_is_an_answer_not_an_error(
    api: TestClient, search_body: dict[str, Any]
) -> None:
    # 405B on 64 GPUs: no layout fits 80 GB per device (cpsat-notes.md: the memory core)
    search_body["cluster"]["gpus"] = 64
    response = api.post("/v1/optimize", json=search_body)
    answer = response.json()
    assert response.status_code == 200
    assert answer["status"] == "infeasible"
    assert answer["best"] is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"search": {"zero_stages": [5]}}, "search.zero_stages"),
        ({"search": {"max_vpp": -1}}, "search.max_vpp"),
        ({"search": {"memory_limit_gb": "lots"}}, "search.memory_limit_gb"),
        ({"search": {"pipeline": 4}}, "search.pipeline"),
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"layout": {"tp": 8}}, "layout"),  # evaluate's field sent to optimize
    ],
)
def test_bad_search_gets_422_naming_the_field(
    api: TestClient, search_body: dict[str, Any], change: dict[str, Any], field: str
) -> None:
    response = api.post("/v1/optimize", json={**search_body, **change})
    error = response.json()["error"]
    assert response.status_code == 422
    assert error["field"] == field


@pytest.mark.parametrize("path", ["/v1/optimize", "/v1/pareto"])
def test_absurd_efficiency_gets_422_not_a_crash(
    api: TestClient, search_body: dict[str, Any], path: str
) -> None:
    # what schemathesis's coverage phase found: 6 * params * tokens / (peak * 5e-324) is inf,
    # and inf scaled to CP-SAT's int64 coefficients crashed the model (a 500); efficiencies
    # below 1% are now refused at the edge, naming the field
    search_body["assumptions"] = {"kernel_efficiency": 5e-324}
    response = api.post(path, json=search_body)
    error = response.json()["error"]
    assert response.status_code == 422
    assert (error["code"], error["field"]) == ("invalid_request", "assumptions.kernel_efficiency")
