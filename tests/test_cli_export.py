"""`layoutopt export` as a user runs it: the engine's artefact on stdout or in a file, the
engine's refusal (exit 2) naming its rules, and `--from-optimize` with optimize's statuses.

Expected flags are read off the layout (tp 8 is `--tensor-model-parallel-size 8`) and the
refusals off the rules in docs/engines.md.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from api.cli import export as export_command
from api.schemas import PLATE_EXAMPLE
from models.layout import Layout
from optimizer import OptimizeResult, Request
from optimizer.costmodel import evaluate
from optimizer.searches import finish_estimate
from tests.helpers import plate_job
from tests.helpers import run_cli as run

PLATE = ["--model", "llama3-405b", "--gpus", "16384", "--tp", "8", "--pp", "16", "--vpp", "4"]
MEGATRON_ZERO_1 = ["export", *PLATE, "--zero", "1", "--engine", "megatron"]


def flag_value(text: str, flag: str) -> str:
    words = text.split()
    return words[words.index(flag) + 1]


def test_megatron_flags_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(MEGATRON_ZERO_1, capsys)
    assert status == 0 and err == ""
    assert out.startswith("# Megatron-LM")
    assert flag_value(out, "--tensor-model-parallel-size") == "8"
    assert flag_value(out, "--pipeline-model-parallel-size") == "16"
    assert flag_value(out, "--num-virtual-stages-per-pipeline-rank") == "4"
    assert flag_value(out, "--global-batch-size") == "2048"
    assert "--use-distributed-optimizer" in out.split()  # ZeRO-1


def test_out_writes_the_same_artefact_to_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, printed, _ = run(MEGATRON_ZERO_1, capsys)
    path = tmp_path / "megatron_args.sh"
    status, out, err = run([*MEGATRON_ZERO_1, "--out", str(path)], capsys)
    assert status == 0 and out == ""
    assert path.read_text(encoding="utf-8") == printed
    assert f"wrote megatron-args for megatron to {path}" in err


def test_json_is_the_export_object_of_the_http_api(capsys: pytest.CaptureFixture[str]) -> None:
    _, printed, _ = run(MEGATRON_ZERO_1, capsys)
    status, out, _ = run([*MEGATRON_ZERO_1, "--json"], capsys)
    assert status == 0
    assert json.loads(out) == {
        "engine": "megatron",
        "format": "megatron-args",
        "filename": "megatron_args.sh",
        "text": printed,
    }


def test_the_engine_refusing_the_layout_is_exit_2_with_its_rules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the plate's ZeRO-2 at pp 16: Megatron-FSDP is exported only at pp 1
    status, out, err = run(["export", *PLATE, "--zero", "2", "--engine", "megatron"], capsys)
    assert status == 2 and out == ""
    assert "Megatron-LM cannot run this layout" in err and "zero 2 with pp 16" in err
    status, _, err = run(
        ["export", *PLATE, "--zero", "2", "--engine", "megatron", "--json"], capsys
    )
    error = json.loads(err)["error"]
    assert (status, error["code"], error["field"]) == (2, "invalid_spec", "engine")


def test_the_spec_from_stdin_names_its_engine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # DeepSpeed's JSON for Llama 3 70B, tp 8 without a pipeline on 1,024 GPUs: dp 128, and
    # 1024 sequences at micro-batch 2 are 1024 / (2 * 128) = 4 accumulation steps
    spec = {
        "model": "llama3-70b",
        "cluster": {"gpus": 1024},
        "training": {"global_batch": 1024},
        "layout": {"tp": 8, "micro_batch": 2, "zero": 1},
        "engine": "deepspeed",
    }
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(spec)))
    status, out, _ = run(["export", "--spec", "-"], capsys)
    config = json.loads(out)
    assert status == 0
    assert config["train_batch_size"] == 1024 == 2 * config["gradient_accumulation_steps"] * 128
    assert config["gradient_accumulation_steps"] == 4


def test_an_unknown_engine_is_a_bad_request(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(["export", *PLATE, "--engine", "megatron-lm", "--json"], capsys)
    error = json.loads(err)["error"]
    assert status == 2 and out == ""
    assert error["field"] == "engine" and "known: megatron, torchtitan" in error["message"]


def test_engine_flag_lists_the_engines(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(["export", "--help"], capsys)
    shown = " ".join(capsys.readouterr().out.split())
    assert "megatron, torchtitan, deepspeed, nemo, generic" in shown
    assert "--from-optimize" in shown and "--out FILE" in shown


def test_evaluate_shows_what_the_engine_says(capsys: pytest.CaptureFixture[str]) -> None:
    _, runs, _ = run(["evaluate", *PLATE, "--zero", "1", "--engine", "megatron"], capsys)
    assert "engine   megatron runs it: `layoutopt export` writes megatron_args.sh" in runs
    _, refused, _ = run(["evaluate", *PLATE, "--zero", "2", "--engine", "megatron"], capsys)
    assert "engine   Megatron-LM cannot run this layout (the warnings say why)" in refused
    assert "warning: Megatron-LM shards gradients (ZeRO-2/3) only through Megatron-FSDP" in refused


# --- --from-optimize ----------------------------------------------------------------------------


def test_from_optimize_exports_the_best_layout(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--model", "llama3-405b", "--gpus", "16384", "--profile", "workshop"]
    _, optimized, _ = run(["optimize", *flags, "--engine", "generic", "--json"], capsys)
    status, out, _ = run(["export", *flags, "--engine", "generic", "--from-optimize"], capsys)
    best = json.loads(optimized)["best"]
    assert status == 0
    assert json.loads(out) == {
        "layout": {k: v for k, v in best["layout"].items() if k != "micro_batches"},
        "micro_batches": best["layout"]["micro_batches"],
    }


def test_from_optimize_layout_flags_fix_the_search(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--model", "llama3-8b", "--gpus", "64", "--engine", "generic", "--from-optimize"]
    status, out, _ = run(
        ["export", *flags, "--tp", "2", "--zero", "1", "--micro-batch", "2"], capsys
    )
    layout = json.loads(out)["layout"]
    assert status == 0
    assert (layout["tp"], layout["zero"], layout["micro_batch"]) == (2, 1, 2)


def test_from_optimize_infeasible_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    # 405B on 64 GPUs: the weights alone exceed 80 GB a device
    status, out, err = run(
        ["export", "--model", "llama3-405b", "--gpus", "64", "--from-optimize"], capsys
    )
    assert status == 3 and out == ""
    assert "optimize proved that no layout satisfies the request" in err


def test_from_optimize_out_of_time_is_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--model", "llama3-70b", "--gpus", "1024", "--from-optimize", "--json"]
    status, out, err = run(["export", *flags, "--time-limit-s", "0.0001"], capsys)
    error = json.loads(err)["error"]
    assert status == 4 and out == ""
    assert error["code"] == "unknown" and "infeasibility is NOT proved" in error["message"]


def test_from_optimize_refused_by_the_engine_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a search that does not keep Megatron-LM's rules answers the plate's ZeRO-2 at pp 16
    plate = Layout.model_validate(PLATE_EXAMPLE["layout"])
    best = finish_estimate(Request(plate_job()), evaluate(plate_job(), plate, "workshop"))

    def answers_the_plate(*_: Any, **__: Any) -> OptimizeResult:
        return OptimizeResult("optimal", best)

    monkeypatch.setattr(export_command, "searched", answers_the_plate)
    flags = ["--model", "llama3-405b", "--gpus", "16384", "--engine", "megatron"]
    status, out, err = run(["export", *flags, "--from-optimize"], capsys)
    assert status == 2 and out == ""
    assert "Megatron-LM cannot run this layout" in err and "zero 2 with pp 16" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dp", "4", "--from-optimize"], "--dp is derived"),
        (["--time-limit-s", "1"], "--time-limit-s applies only with --from-optimize"),
    ],
)
def test_flags_that_do_not_apply_are_refused(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(["export", "--model", "llama3-8b", "--gpus", "64", *flags], capsys)
    assert status == 2 and out == "" and message in err
