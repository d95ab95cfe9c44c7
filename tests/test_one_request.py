"""One body, one meaning: the optimum's layout POSTed back to evaluate with the same body is
priced to the same figures, on 50 requests drawn over every preset and engine (the routes
share their defaults: profile standard, engine megatron); a study row and a plan job of the
same body carry the HTTP answer's warnings and engine verdict; evaluate lays a layout without
a placement in the engine's own rank order."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.scenarios import scenario_request
from api.schemas import PLATE_EXAMPLE
from models.presets import model_presets
from optimizer.engines import ENGINES, get_engine
from optimizer.studies import StudySpec, expand, run_scenario, run_settings

FIGURES = ("mfu", "step_time_s", "bubble", "fits", "warnings", "export", "export_error")


def _cases(count: int, seed: int = 43) -> list[tuple[str, str, int]]:
    """(preset, engine, gpus) drawn at random, every engine and preset among them."""
    rng = random.Random(seed)
    presets, engines = sorted(model_presets()), sorted(ENGINES)
    cases = [(presets[i % len(presets)], engines[i % len(engines)], 0) for i in range(count)]
    return [(preset, engine, rng.choice((64, 256, 1024))) for preset, engine, _ in cases]


def _body(preset: str, engine: str, gpus: int) -> dict[str, Any]:
    return {
        "model": preset,
        "cluster": {"gpus": gpus},
        "training": {"global_batch": 1024, "seq_len": 4096},
        "engine": engine,
    }


CASES = _cases(50)


@pytest.mark.parametrize(("preset", "engine", "gpus"), CASES)
def test_evaluating_the_optimum_gives_the_optimums_figures(
    api: TestClient, preset: str, engine: str, gpus: int
) -> None:
    body = _body(preset, engine, gpus)
    answer = api.post("/v1/optimize", json=body | {"explain": False, "time_limit_s": 20}).json()
    row = _study_row(body | {"explain": False, "time_limit_s": 20}, "optimize")
    assert row["status"] == answer.get("status", "error")
    if answer.get("status") not in ("optimal", "feasible"):
        pytest.skip(f"{preset} under {engine} on {gpus} GPUs: {answer.get('status')}, no layout")
    best = answer["best"]
    again = api.post("/v1/evaluate", json=body | {"layout": best["layout"]})
    assert again.status_code == 200, again.text
    priced = again.json()
    assert priced["layout"] == best["layout"]
    assert priced["memory_gb"] == best["memory_gb"]
    for figure in FIGURES:
        assert priced.get(figure) == best.get(figure), figure
    # the study row of the same body: the same optimum, warnings and engine verdict
    assert (row["mfu"], row["step_time_s"]) == (best["mfu"], best["step_time_s"])
    assert json.loads(row["warnings"]) == best["warnings"]
    assert row["export_error"] == best["export_error"]


@pytest.mark.parametrize(("preset", "engine", "gpus"), CASES[::3])
def test_a_plan_job_carries_the_warnings_and_export_of_its_layouts_http_answer(
    api: TestClient, preset: str, engine: str, gpus: int
) -> None:
    body = _body(preset, engine, gpus)
    # a plan job's request is the body less its cluster: the plan's pools are the cluster
    request = {k: v for k, v in body.items() if k != "cluster"}
    job = {"name": "one", "request": request, "min_gpus": gpus, "max_gpus": gpus}
    pool = {"name": "h100", "gpu": "h100-sxm", "nodes": gpus // 8}
    response = api.post("/v1/plan", json={"cluster": {"pools": [pool]}, "jobs": [job]})
    assert response.status_code == 200, response.text
    plan = response.json()
    planned = next((j for j in plan.get("jobs", []) if j["name"] == "one"), None)
    if planned is None or planned["best"] is None:
        pytest.skip(f"{preset} under {engine} on {gpus} GPUs: not planned ({plan.get('status')})")
    priced = api.post("/v1/evaluate", json=body | {"layout": planned["best"]["layout"]}).json()
    assert planned["best"]["warnings"] == priced["warnings"]
    assert planned["best"]["mfu"] == priced["mfu"]
    assert (planned["export"] is None) == (priced["export"] is None)
    if planned["export"] is not None:
        assert planned["export"]["engine"] == priced["export"]["engine"]
        assert planned["export"]["filename"] == priced["export"]["filename"]


def test_the_same_body_without_profile_or_engine_means_the_same_on_both_routes(
    api: TestClient,
) -> None:
    # the case: the optimum at cp 4 was priced as if cp were free when evaluate
    # defaulted to the plate's workshop profile
    body = {"model": "llama3-70b", "cluster": {"gpus": 1024}, "training": {"global_batch": 1024}}
    best = api.post("/v1/optimize", json=body | {"explain": False}).json()["best"]
    layout = {k: v for k, v in best["layout"].items() if k != "placement"}
    priced = api.post("/v1/evaluate", json=body | {"layout": layout}).json()
    assert priced["layout"]["placement"] == best["layout"]["placement"]
    assert (priced["mfu"], priced["step_time_s"]) == (best["mfu"], best["step_time_s"])


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_evaluate_lays_an_unplaced_layout_in_the_engines_rank_order(
    api: TestClient, engine: str
) -> None:
    body = _body("llama3-8b", engine, 64) | {"layout": {"tp": 2, "pp": 4}}
    placement = api.post("/v1/evaluate", json=body).json()["layout"]["placement"]
    orders = get_engine(engine).rank_orders
    assert placement == list(orders[0] if orders else ("tp", "cp", "pp", "dp"))


def test_a_stated_micro_batch_count_must_be_the_derived_one(api: TestClient) -> None:
    body = _body("llama3-8b", "megatron", 64) | {"layout": {"tp": 2, "micro_batches": 3}}
    error = api.post("/v1/evaluate", json=body).json()["error"]
    assert error["field"] == "layout.micro_batches"
    assert "= 32" in error["message"]  # 1024 / (dp 32 * micro-batch 1)


# --- the same verdict in a study row ----------------------------------------------------------


def _study_row(base: dict[str, Any], compute: str, **spec: Any) -> dict[str, Any]:
    study = StudySpec.model_validate({"base": base, "compute": compute, **spec})
    return run_scenario(expand(study)[0], run_settings(study, scenario_request))


def test_a_study_row_carries_the_engines_verdict_as_the_http_answer_does(api: TestClient) -> None:
    # the plate's ZeRO-2 at pp 16: Megatron-LM shards gradients only through Megatron-FSDP,
    # which the exports write only without a pipeline
    body = {**PLATE_EXAMPLE, "engine": "megatron"}
    answer = api.post("/v1/evaluate", json=body).json()
    row = _study_row(body, "evaluate")
    assert answer["export"] is None and answer["export_error"]
    assert row["export_error"] == answer["export_error"]
    assert json.loads(row["warnings"]) == answer["warnings"]
    assert (row["mfu"], row["step_time_s"]) == (answer["mfu"], answer["step_time_s"])


def test_an_infeasible_study_row_says_why() -> None:
    # Llama 3 405B on 8 GPUs: no layout fits, and the row names the clashing rules
    base = {"model": "llama3-405b", "cluster": {"gpus": 8}, "time_limit_s": 20}
    row = _study_row(base, "optimize")
    assert row["status"] == "infeasible"
    assert any("memory" in reason for reason in json.loads(row["conflict"]))


def test_gpu_hours_are_priced_by_gpu_type() -> None:
    base = {"model": "llama3-8b", "cluster": {"gpus": 8, "gpu": "b200"}, "explain": False}
    prices = {"h100-sxm": 2.0, "b200": 5.0}
    row = _study_row(base, "optimize", gpu_hour_cost=prices)
    assert row["cost"] == pytest.approx(5.0 * row["gpu_hours"], rel=1e-3)
    unpriced = _study_row(base, "optimize", gpu_hour_cost={"h100-sxm": 2.0})
    assert unpriced["status"] == "error" and unpriced["error_field"] == "gpu_hour_cost"
    assert "'b200'" in unpriced["error"] and "h100-sxm" in unpriced["error"]
