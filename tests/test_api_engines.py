"""The request's `engine` through TestClient: published as an enum, refused by name, defaulted
per route; the engine's broken rules as warnings (figures untouched); the artefact as the
answers' `export` and as POST /v1/export.

Expected sentences and numbers are worked by hand from the rules in docs/engines.md.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.schemas import SEARCH_EXAMPLE, EvaluateRequest, SearchRequest
from models.layout import Layout
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.engines import ENGINES, engine_assumptions, get_engine, violations

ENGINE_NAMES = ["megatron", "torchtitan", "deepspeed", "nemo", "generic"]  # the contract's

# Llama 3 8B on 24 GPUs at tp 8, cp 3 (standard prices cp): the cost model takes seq_len
# 4095 (cp 3 divides it), Megatron-LM's load-balanced CP needs 2 * cp = 6 to: 4095 % 6 = 3.
CP_3 = {
    "model": "llama3-8b",
    "cluster": {"gpus": 24},
    "training": {"global_batch": 64, "seq_len": 4095},
    "layout": {"tp": 1, "cp": 3},
    "profile": "standard",
    "engine": "generic",
}
CP_3_BROKEN = "Megatron-LM requires seq_len % (2 * cp) == 0 when cp > 1: 4095 % 6 != 0"


def megatron_body(plate_body: dict[str, Any], zero: int) -> dict[str, Any]:
    plate_body["layout"]["zero"] = zero
    return plate_body | {"engine": "megatron"}


# --- the field ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "default"), [("EvaluateRequest", "megatron"), ("SearchRequest", "megatron")]
)
def test_engine_is_published_with_its_pattern_and_the_versions_read(
    api: TestClient, schema: str, default: str
) -> None:
    field = api.get("/openapi.json").json()["components"]["schemas"][schema]["properties"]
    # each engine bare (its newest version) and at each version it knows, as examples
    assert [spec.partition("@")[0] for spec in field["engine"]["examples"]] == [
        name for name in ENGINE_NAMES for _ in (None, *ENGINES[name].versions)
    ]
    pattern = re.compile(field["engine"]["pattern"])
    assert all(pattern.match(spec) for spec in field["engine"]["examples"])
    assert pattern.match("nemo@25.09") and not pattern.match("nemo@25.09\nrm -rf /")
    assert not pattern.match("megatronx") and not pattern.match("nemo@")
    assert field["engine"]["default"] == default


def test_export_route_is_published_with_its_errors(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    route = spec["paths"]["/v1/export"]["post"]
    assert route["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/EvaluateRequest"
    )
    assert route["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ExportOut"
    )
    assert {"408", "413", "422", "503"} <= set(route["responses"])


@pytest.mark.parametrize("path", ["/v1/evaluate", "/v1/export", "/v1/optimize", "/v1/pareto"])
@pytest.mark.parametrize(
    ("value", "code"), [("megatron-lm", "invalid_spec"), (3, "invalid_request")]
)
def test_an_unknown_engine_is_refused_naming_the_field(
    api: TestClient, plate_body: dict[str, Any], path: str, value: Any, code: str
) -> None:
    body = plate_body if path in ("/v1/evaluate", "/v1/export") else copy.deepcopy(SEARCH_EXAMPLE)
    response = api.post(path, json=body | {"engine": value})
    error = response.json()["error"]
    assert response.status_code == 422
    assert (error["code"], error["field"]) == (code, "engine")
    if code == "invalid_spec":
        assert "known: megatron, torchtitan, deepspeed, nemo, generic" in error["message"]


def test_evaluate_defaults_to_generic_and_keeps_the_plates_figures(
    api: TestClient, plate_body: dict[str, Any]
) -> None:
    answer = api.post("/v1/evaluate", json=plate_body).json()
    assert (answer["memory_gb"]["total"], answer["bubble"], answer["mfu"]) == (
        78.56,
        0.1899,
        0.4255,
    )
    assert answer["warnings"] == [] and answer["export_error"] is None
    exported = answer["export"]
    assert (exported["engine"], exported["format"], exported["filename"]) == (
        "generic",
        "layout-json",
        "layout.json",
    )
    written = json.loads(exported["text"])
    assert written["micro_batches"] == 16  # 2048 / (128 * 1)
    assert {k: written["layout"][k] for k in ("tp", "pp", "cp", "dp", "vpp", "zero")} == {
        "tp": 8,
        "pp": 16,
        "cp": 1,
        "dp": 128,
        "vpp": 4,
        "zero": 2,
    }


def test_searches_default_to_megatron(api: TestClient) -> None:
    # Whether or not the search obeys Megatron-LM yet, the answer's best layout is judged by
    # its rules: each broken one a warning, and then no export but the reason.
    answer = api.post("/v1/optimize", json=SEARCH_EXAMPLE).json()
    best = answer["best"]
    layout = Layout.model_validate(
        {k: v for k, v in best["layout"].items() if k != "micro_batches"}
    )
    broken = violations(
        get_engine("megatron"), SearchRequest.model_validate(SEARCH_EXAMPLE).job(), layout
    )
    assert all(w in best["warnings"] and w in answer["warnings"] for w in broken)
    if broken:
        assert best["export"] is None
        assert best["export_error"].startswith("Megatron-LM cannot run this layout: ")
    else:
        assert best["export"]["engine"] == "megatron" and best["export_error"] is None


# --- evaluate: the engine's rules as warnings --------------------------------------------------


def test_evaluate_warns_of_each_rule_the_engine_breaks(api: TestClient) -> None:
    generic = api.post("/v1/evaluate", json=CP_3).json()
    megatron = api.post("/v1/evaluate", json=CP_3 | {"engine": "megatron"}).json()
    assert CP_3_BROKEN not in generic["warnings"]
    assert megatron["warnings"] == [*generic["warnings"], CP_3_BROKEN]
    assert megatron["export"] is None
    assert megatron["export_error"] == f"Megatron-LM cannot run this layout: {CP_3_BROKEN}"
    # the memory is the engine's alike; the time is the cost model's under that engine's
    # assumptions (Megatron-LM: an fp32 reduce-scatter plus the parameters' all-gather, ring
    # attention's sends), not the engine-agnostic figure
    assert megatron["memory_gb"] == generic["memory_gb"]
    job = EvaluateRequest.model_validate(CP_3).job()
    costs = engine_assumptions(get_engine("megatron"), CostAssumptions())
    expected = evaluate(job, Layout.model_validate(CP_3["layout"]), "standard", costs)
    assert megatron["mfu"] == pytest.approx(expected.mfu, abs=1e-4)
    assert megatron["times_s"]["step"] == pytest.approx(expected.times_s["step"], rel=1e-4)
    assert megatron["times_s"]["step"] != generic["times_s"]["step"]


def test_an_engine_that_runs_the_layout_adds_no_warning(
    api: TestClient, plate_body: dict[str, Any]
) -> None:
    answer = api.post("/v1/evaluate", json=megatron_body(plate_body, zero=1)).json()
    assert answer["export"]["filename"] == "megatron_args.sh"
    assert not any("Megatron-LM" in warning for warning in answer["warnings"])


# --- the export object and POST /v1/export ------------------------------------------------------


def deepspeed_config(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["export"]["format"] == "deepspeed-json"
    return json.loads(answer["export"]["text"])  # type: ignore[no-any-return]


def test_evaluate_exports_a_deepspeed_config_whose_batch_adds_up(api: TestClient) -> None:
    # Llama 3 70B on 1,024 GPUs, tp 8, no pipeline: dp 128; global 1024 at micro 2 is
    # 1024 / (2 * 128) = 4 accumulation steps
    body = {
        "model": "llama3-70b",
        "cluster": {"gpus": 1024},
        "training": {"global_batch": 1024},
        "layout": {"tp": 8, "micro_batch": 2, "zero": 1, "recompute": "full"},
        "engine": "deepspeed",
    }
    config = deepspeed_config(api.post("/v1/evaluate", json=body).json())
    assert config["train_batch_size"] == 1024
    assert (config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]) == (
        2,
        4,
    )
    assert config["train_batch_size"] == 2 * 4 * 128
    assert config["zero_optimization"]["stage"] == 1
    assert config["tensor_parallel"]["autotp_size"] == 8


def test_optimize_exports_its_best_layout(api: TestClient) -> None:
    # DeepSpeed without a pipeline, at ZeRO-0/1, without selective recompute: rules the
    # search space itself keeps, so the best layout runs on it
    body = {
        "model": "llama3-8b",
        "cluster": {"gpus": 64},
        "engine": "deepspeed",
        "search": {"pp": 1, "cp": 1, "zero_stages": [0, 1], "recompute": ["none", "full"]},
    }
    answer = api.post("/v1/optimize", json=body).json()
    best = answer["best"]
    config = deepspeed_config(best)
    micro, dp = best["layout"]["micro_batch"], best["layout"]["dp"]
    assert config["train_batch_size"] == 2048  # the default global batch
    assert config["train_batch_size"] == micro * config["gradient_accumulation_steps"] * dp
    assert config["tensor_parallel"]["autotp_size"] == best["layout"]["tp"]
    # the alternatives inside the answer carry no export: only the best does
    alternatives = [r["relaxed"] for r in answer["relaxations"] if r["relaxed"]]
    alternatives += [c["without"] for c in answer["choices"] if c["without"]]
    assert all(a["export"] is None and a["export_error"] is None for a in alternatives)


def test_pareto_points_carry_the_engines_verdict(api: TestClient) -> None:
    answer = api.post("/v1/pareto", json=SEARCH_EXAMPLE).json()
    job = SearchRequest.model_validate(SEARCH_EXAMPLE).job()
    breaking = 0
    for point in answer["frontier"]:
        layout = Layout.model_validate(
            {k: v for k, v in point["layout"].items() if k != "micro_batches"}
        )
        broken = violations(get_engine("megatron"), job, layout)
        assert all(w in point["warnings"] for w in broken)
        # the artefact that runs the point, or the refusal naming what it breaks
        assert (point["export"] is None) == bool(broken) == (point["export_error"] is not None)
        breaking += bool(broken)
    summary = f"{breaking} of {len(answer['frontier'])} frontier points break Megatron-LM's rules"
    assert any(w.startswith(summary) for w in answer["warnings"]) == (breaking > 0)


def test_export_route_returns_the_answers_artefact(
    api: TestClient, plate_body: dict[str, Any]
) -> None:
    body = megatron_body(plate_body, zero=1)
    response = api.post("/v1/export", json=body)
    artefact = response.json()
    assert response.status_code == 200
    assert artefact == api.post("/v1/evaluate", json=body).json()["export"]
    flags = artefact["text"].split()
    # the plate's degrees, and ZeRO-1 as Megatron's distributed optimizer
    for flag, value in (
        ("--tensor-model-parallel-size", "8"),
        ("--pipeline-model-parallel-size", "16"),
        ("--num-virtual-stages-per-pipeline-rank", "4"),
        ("--micro-batch-size", "1"),
        ("--global-batch-size", "2048"),
    ):
        assert flags[flags.index(flag) + 1] == value
    assert "--use-distributed-optimizer" in flags


def test_export_route_refuses_what_the_engine_cannot_run(
    api: TestClient, plate_body: dict[str, Any]
) -> None:
    # the plate's ZeRO-2 at pp 16: Megatron-LM shards gradients only through Megatron-FSDP,
    # which the project exports only at pp 1
    response = api.post("/v1/export", json=megatron_body(plate_body, zero=2))
    error = response.json()["error"]
    assert response.status_code == 422
    assert (error["code"], error["field"]) == ("invalid_spec", "engine")
    assert error["message"].startswith("Megatron-LM cannot run this layout: ")
    assert error["message"].endswith("zero 2 with pp 16")


def test_export_route_lists_every_rule_broken(api: TestClient, plate_body: dict[str, Any]) -> None:
    # DeepSpeed: no interleaving (vpp 4), and no ZeRO-2 with a pipeline
    error = api.post("/v1/export", json=plate_body | {"engine": "deepspeed"}).json()["error"]
    assert "vpp 4 interleaves 1f1b" in error["message"]
    assert "zero 2 with pp 16" in error["message"]
