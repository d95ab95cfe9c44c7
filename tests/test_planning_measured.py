"""Jobs that bring their own measured throughput (per GPU type and count, in their own unit)
and the throughput objective that adds jobs of different sizes: each job's weighted share of
its best alone. Every figure below is arithmetic on the tables given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.schemas import PlanOut
from tests.helpers import run_cli


def _cluster() -> dict[str, Any]:
    return {
        "pools": [
            {"name": "h100", "gpu": "h100-sxm", "nodes": 8, "nodes_per_rack": 8},
            {"name": "a100", "gpu": "a100-80gb", "nodes": 8, "nodes_per_rack": 8},
        ]
    }


# The case: a weight-3 70B job at 131K tokens/s on 64 H100 and 25K on 64 A100, and
# an 8B job at 800K on 64 H100 and 300K on 64 A100. Raw weighted tokens/s would swap them
# (3 * 25K + 800K = 875K beats 3 * 131K + 300K = 693K); the weighted shares keep the 70B on
# its H100s: 3 * 1 + 300/800 = 3.375 against 3 * 25/131 + 1 = 1.5725.
SWAP = {
    "cluster": _cluster(),
    "jobs": [
        {
            "name": "pretrain-70b",
            "weight": 3.0,
            "min_gpus": 64,
            "throughput": {"h100-sxm": {"64": 131_000.0}, "a100-80gb": {"64": 25_000.0}},
        },
        {
            "name": "finetune-8b",
            "min_gpus": 64,
            "throughput": {"h100-sxm": {"64": 800_000.0}, "a100-80gb": {"64": 300_000.0}},
        },
    ],
    "time_limit_s": 10,
}


def test_throughput_weighs_each_job_by_its_share_of_its_best_alone(api: TestClient) -> None:
    response = api.post("/v1/plan", json=SWAP)
    assert response.status_code == 200, response.text
    answer = PlanOut.model_validate(response.json())
    assert answer.status == "optimal"
    assert [(job.name, job.pool, job.gpus) for job in answer.jobs] == [
        ("pretrain-70b", "h100", 64),
        ("finetune-8b", "a100", 64),
    ]
    assert answer.objective_value == pytest.approx(3 + 300 / 800, abs=1e-6)
    assert answer.objective_terms["weighted_tokens_per_s"] == pytest.approx(3 * 131_000 + 300_000)
    # measured jobs are priced from their figures alone: no layout, no launch file
    assert all(job.best is None and job.export is None for job in answer.jobs)
    assert [job.tokens_per_s for job in answer.jobs] == [131_000.0, 300_000.0]
    assert answer.explanations is not None
    (short,) = answer.explanations.jobs
    assert short.job == "finetune-8b"
    trade_off = short.reasons[-1].message
    # the best plan that gives the 8B its H100s: 1.5725, so 3.375 - 1.5725 = 1.802
    cost = 3 + 300 / 800 - (3 * 25 / 131 + 1)
    assert f"cost the plan {cost:.4g} in weighted shares of best alone" in trade_off


def test_the_tokens_objective_sums_weighted_tokens_as_they_are(api: TestClient) -> None:
    # for a script that wants the raw sum: it swaps the jobs, as the issue saw the old
    # `throughput` do (3 * 25K + 800K = 875K against 693K)
    response = api.post("/v1/plan", json=SWAP | {"objective": "tokens"})
    assert response.status_code == 200, response.text
    answer = PlanOut.model_validate(response.json())
    assert answer.status == "optimal"
    assert [(job.name, job.pool) for job in answer.jobs] == [
        ("pretrain-70b", "a100"),
        ("finetune-8b", "h100"),
    ]
    assert answer.objective_value == pytest.approx(3 * 25_000 + 800_000, rel=1e-9)


def test_a_measured_job_and_a_priced_job_share_one_plan(api: TestClient) -> None:
    priced = {
        "name": "priced-8b",
        "request": {
            "model": "llama3-8b",
            "profile": "workshop",
            "training": {"global_batch": 256, "seq_len": 4096},
        },
        "node_counts": [1, 2],
    }
    # 12 GPUs is not whole nodes of either pool: never offered; 16 on A100 is
    measured = {"name": "resnet", "throughput": {"a100-80gb": {"12": 900.0, "16": 1_200.0}}}
    body = {"cluster": _cluster(), "jobs": [priced, measured], "time_limit_s": 20}
    response = api.post("/v1/plan", json=body)
    assert response.status_code == 200, response.text
    answer = PlanOut.model_validate(response.json())
    by_name = {job.name: job for job in answer.jobs}
    assert by_name["resnet"].pool == "a100" and by_name["resnet"].gpus == 16
    assert by_name["resnet"].tokens_per_s == 1_200.0 and by_name["resnet"].best is None
    assert by_name["priced-8b"].best is not None and by_name["priced-8b"].gpus == 16
    # each at its best alone: the sum of weighted shares is the number of jobs
    assert answer.objective_value == pytest.approx(2.0, abs=1e-6)


@pytest.mark.parametrize(
    ("job", "field", "words"),
    [
        ({"name": "x"}, "jobs", "its `request` (to be priced) or its `throughput`"),
        (
            {"name": "x", "throughput": {"a100": {"8": 1.0}}},
            "jobs.throughput",
            "neither a pool's GPU type",
        ),
        (
            {"name": "x", "throughput": {"a100-80gb": {"0": 1.0}}},
            "jobs.throughput.a100-80gb.0",
            "'0' is not a GPU count",
        ),
        (
            {"name": "x", "throughput": {"a100-80gb": {"8": -1.0}}},
            "jobs.throughput.a100-80gb.8",
            "greater than 0",
        ),
        ({"name": "x", "throughput": {"a100-80gb": {}}}, "jobs.throughput.a100-80gb", "1 item"),
    ],
)
def test_bad_measured_throughput_is_refused_naming_the_field(
    api: TestClient, job: dict[str, Any], field: str, words: str
) -> None:
    response = api.post("/v1/plan", json={"cluster": _cluster(), "jobs": [job]})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == field and words in error["message"], error


def test_cli_plans_measured_jobs_and_says_their_units_do_not_add_as_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "plan.json"
    spec.write_text(json.dumps(SWAP))
    status, out, err = run_cli(["plan", str(spec)], capsys)
    assert status == 0, err
    assert "objective throughput 3.375" in out
    assert f"measured jobs' own units) {3 * 131_000 + 300_000:,}" in out
