"""Trial plans: the optimum first, then tied layouts that each test another mechanism, with
their artefacts; the effect that decides between two layouts found by hand; the CLI's trial
files re-price to the trial's figures over HTTP."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.schemas import SearchRequest
from models.layout import Layout
from optimizer.costmodel import MfuStep, evaluate
from optimizer.searches import optimize
from optimizer.trials import deciding_mechanism, plan_trials
from tests.helpers import plate_job, run_cli

BODY: dict[str, Any] = {
    "model": "llama3-70b",
    "cluster": {"gpus": 512, "gpu": "h100-sxm"},
    "training": {"global_batch": 512, "seq_len": 8192},
}


def test_the_deciding_mechanism_is_the_largest_difference_in_charges() -> None:
    base = evaluate(plate_job(), Layout(tp=8, pp=16, vpp=4, micro_batch=1, zero=1), "standard")
    ours = replace(
        base, mfu_steps=(MfuStep("a", 0.6), MfuStep("after x", 0.5), MfuStep("after y", 0.45))
    )
    # charges: ours x 0.10, y 0.05; theirs x 0.08, y 0.12: y differs by 0.07, x by 0.02
    theirs = replace(
        base, mfu_steps=(MfuStep("a", 0.6), MfuStep("after x", 0.52), MfuStep("after y", 0.40))
    )
    name, our_charge, their_charge = deciding_mechanism(ours, theirs)
    assert name == "y"
    assert (our_charge, their_charge) == pytest.approx((0.05, 0.12))


def test_a_plan_is_the_optimum_then_tied_layouts_testing_other_mechanisms() -> None:
    request = SearchRequest.model_validate(BODY).to_request()
    plan = plan_trials(request, k=3)
    best = optimize(replace(request, explain=False)).best
    assert best is not None and plan.status == "optimal"
    assert plan.trials[0].estimate.layout == best.layout and plan.trials[0].mechanism is None
    assert 1 < len(plan.trials) <= 3 and plan.tied >= len(plan.trials)
    interval = best.interval
    assert interval is not None
    width = interval.mfu[1] - interval.mfu[0]
    mechanisms = [trial.mechanism for trial in plan.trials[1:]]
    assert len(set(mechanisms)) == len(mechanisms)  # each run tests something new
    for trial in plan.trials:
        assert best.mfu - trial.estimate.mfu <= width + 1e-12
        assert trial.estimate.export is not None and trial.steps == 30


def test_trials_over_http_and_the_cli_files_reprice_to_the_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = TestClient(create_app())
    answer = client.post("/v1/trials", json=BODY | {"k": 2})
    assert answer.status_code == 200, answer.text
    assert [t["name"] for t in answer.json()["trials"]] == ["optimum", "trial 1"]
    assert client.post("/v1/trials", json=BODY | {"k": 0}).json()["error"]["field"] == "k"
    flags = "--model llama3-70b --gpus 512 --gpu h100-sxm --global-batch 512 --seq-len 8192"
    code, out, _ = run_cli(["trials", *flags.split(), "--k", "2", "--out", str(tmp_path)], capsys)
    assert code == 0 and "layouts tied with the optimum" in out
    record = json.loads((tmp_path / "trial-1" / "trial.json").read_text())
    assert (tmp_path / "trial-1" / "megatron_args.sh").is_file()
    repriced = client.post("/v1/evaluate", json=record["request"]).json()
    trial = answer.json()["trials"][1]
    assert repriced["mfu"] == trial["estimate"]["mfu"]
    assert repriced["step_time_s"] == trial["estimate"]["step_time_s"]
