"""Training logs read into measurements: a real excerpt of each engine's log (tests/data/logs,
its README names each source) parses to the step time and memory it prints, worked by hand
here; malformed logs are refused naming the line or saying what was looked for. The joins
to a run's request through the CLI and HTTP are at the end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from models.errors import InvalidSpec
from models.layout import Layout
from optimizer import Request
from optimizer.calibration import run_from_log
from optimizer.calibration.logs import (
    MAX_LOG_LINES,
    WARMUP_STEPS,
    LogReading,
    read_log,
)
from optimizer.engines import get_engine
from tests.helpers import plate_job, run_cli

LOGS = Path(__file__).parent / "data" / "logs"


def read(name: str, format_: str | None = None) -> LogReading:
    return read_log((LOGS / name).read_text(encoding="utf-8"), format_)


# --- one real excerpt per engine ----------------------------------------------------------


def test_megatron_lm_log() -> None:
    # NVIDIA/Megatron-LM issue #756 (Mixtral 8x7B on 16 H100): iterations 2, 3 are warm-up
    # (within the first 10); 29, 30, 31 print 5912.1, 5571.1, 5718.9 ms: median 5718.9 ms.
    # Memory: max allocated 54250.98583984375 MB of 2**20 bytes = 56.886 GB
    reading = read("megatron-lm-issue-756.log")
    assert reading.format == "megatron" and reading.measure == "step_time_s"
    assert reading.value == pytest.approx(5.7189)
    assert reading.steps_used == (29, 30, 31) and reading.warmup_dropped == 2
    assert reading.peak_memory_gb == pytest.approx(54250.98583984375 * 2**20 / 1e9)
    assert reading.peak_memory_gb == pytest.approx(56.886, abs=1e-3)
    assert reading.memory_kind == "allocated"


def test_nemo2_log() -> None:
    # amanshanbhag/NeMo-AWS PERF_README.md: steps 74-76 print 8.768, 8.748, 8.756 s: median
    # 8.756 s; max_memory_allocated 62777982976 bytes = 62.778 GB (reserved, 64.29 GB, is not
    # what the tensors held)
    reading = read("nemo2-aws-perf-readme.log")
    assert (reading.format, reading.measure) == ("nemo", "step_time_s")
    assert reading.value == pytest.approx(8.756) and reading.steps_used == (74, 75, 76)
    assert reading.peak_memory_gb == pytest.approx(62.777982976)
    assert reading.memory_kind == "allocated"


def test_nemo1_progress_bar_log() -> None:
    # NVIDIA/dgxc-benchmarking nemotron/README_340b.md: the last step's progress line,
    # global_step=99.00, train_step_timing in s=3.590; no memory printed
    reading = read("nemo1-dgxc-nemotron-340b.log")
    assert reading.format == "nemo" and reading.value == pytest.approx(3.59)
    assert reading.steps_used == (99,) and reading.peak_memory_gb is None


def test_torchtitan_log() -> None:
    # pytorch/torchtitan PR #1287: steps 200-250 every 10 (the GC and profiler lines between
    # are not step lines): tps 5,856 5,593 5,868 5,869 5,864 5,862, sorted 5593 5856 5862
    # 5864 5868 5869, median (5862 + 5864) / 2 = 5863 tokens/s per GPU; memory 49.66 GiB
    # (max reserved) = 49.66 * 2**30 / 1e9 = 53.322 GB
    reading = read("torchtitan-pr-1287.log")
    assert (reading.format, reading.measure) == ("torchtitan", "tokens_per_s_per_gpu")
    assert reading.value == pytest.approx(5863.0)
    assert reading.interval == 10 and reading.steps_used == (200, 210, 220, 230, 240, 250)
    assert reading.peak_memory_gb == pytest.approx(53.322, abs=1e-3)
    assert reading.memory_kind == "reserved"


def test_deepspeed_log() -> None:
    # deepspeedai/DeepSpeed issue #2629 (0.7.7's timer): steps 17-22, CurrSamplesPerSec
    # 159.63 145.09 157.81 155.10 155.01 155.14 (not the running averages beside them),
    # median (155.10475468488542 + 155.14401867030702) / 2 = 155.1244 samples/s;
    # MaxMemAllocated 2.62 "GB", GiB by the timer's / 1024**3: 2.62 * 2**30 / 1e9 = 2.813 GB
    reading = read("deepspeed-issue-2629.log")
    assert (reading.format, reading.measure) == ("deepspeed", "samples_per_s")
    assert reading.value == pytest.approx((155.10475468488542 + 155.14401867030702) / 2)
    assert reading.steps_used == (17, 18, 19, 20, 21, 22)
    assert reading.peak_memory_gb == pytest.approx(2.62 * 2**30 / 1e9)


def test_a_log_printing_two_engines_lines_reads_megatrons_unless_named() -> None:
    # deepspeedai/DeepSpeed issue #3742, GPT-NeoX on DeepSpeed, step 34: GPT-NeoX's Megatron
    # line prints 4103.1 ms (detected first: a step time needs no batch size); named
    # deepspeed, the step's two sample rates (the timer's 8.009, GPT-NeoX's 7.799) count
    # once, at the slower, 7.799 samples/s, and MaxMemAllocated 63.31 GiB = 67.979 GB
    detected = read("deepspeed-issue-3742.log")
    assert detected.format == "megatron" and detected.value == pytest.approx(4.1031)
    named = read("deepspeed-issue-3742.log", "deepspeed")
    assert named.measure == "samples_per_s" and named.value == pytest.approx(7.799)
    assert named.steps_read == 1 and named.peak_memory_gb == pytest.approx(67.979, abs=1e-3)
    # the two figures agree: 7.799 samples/s over a global batch of 32 is 4.103 s a step
    assert 32 / named.value == pytest.approx(detected.value, rel=1e-3)


def test_a_bridge_log_of_warm_up_steps_alone_is_refused_naming_the_line() -> None:
    # verdimrc/playground-nemo-2.0-gh: Megatron-Bridge prints Megatron-LM's lines; its one
    # iteration line is step 10 of a 10-step run, all warm-up
    with pytest.raises(InvalidSpec) as refused:
        read("megatron-bridge-playground.log")
    assert refused.value.message.startswith("line 7: every step the log reports (10)")
    assert f"log at least {WARMUP_STEPS + 1} steps" in refused.value.message


# --- steady state ---------------------------------------------------------------------------


def megatron_line(step: int, ms: float | str) -> str:
    return f" iteration {step:8d}/     100 | elapsed time per iteration (ms): {ms} | lm loss: 2.0 |"


def test_a_line_averaging_over_warm_up_steps_is_dropped() -> None:
    # logged every 8 steps: the line of step 16 is the mean of steps 9-16, which reaches into
    # the first 10; those of 24 and 32 are steady: median of 2.0 and 4.0 s is 3.0 s
    text = "\n".join(
        megatron_line(s, ms) for s, ms in ((8, 90000), (16, 9000), (24, 2000), (32, 4000))
    )
    reading = read_log(text)
    assert reading.interval == 8 and reading.steps_used == (24, 32)
    assert reading.warmup_dropped == 2 and reading.value == pytest.approx(3.0)
    assert "2 dropped as warm-up" in reading.summary


def test_a_step_every_rank_prints_counts_once_at_its_slowest() -> None:
    lines = [megatron_line(s, ms) for s in (11, 12, 13) for ms in (1000, 1100)]
    reading = read_log("\n".join(lines))
    assert reading.steps_read == 3 and reading.value == pytest.approx(1.1)


def test_colour_codes_are_read_through() -> None:
    # torchtitan colours each field of its line
    line = (
        "\x1b[31mstep: 20  \x1b[32mloss:  6.1384  \x1b[33mmemory: 10.00GiB(12.50%)  "
        "\x1b[34mtps: 1,234  \x1b[36mtflops: 10.00  \x1b[35mmfu: 1.00%\x1b[39m"
    )
    reading = read_log(line)
    assert reading.value == 1234 and reading.peak_memory_gb == pytest.approx(10 * 2**30 / 1e9)


# --- malformed logs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "format_", "message"),
    [
        # no step lines: says what each engine's lines look like
        ("loading checkpoint\nstarting training\n", None, "no step lines in 2 lines: looked for"),
        ("", None, "no step lines in 0 lines"),
        ('{"model": "llama3-8b", "cluster": {"gpus": 8}}', None, "torchtitan's 'step: N"),
        # a format named whose lines the log lacks
        (megatron_line(20, 1000), "torchtitan", "no torchtitan step lines: looked for 'step: N"),
        (megatron_line(20, 1000), "jax", "log format 'jax' is none of megatron"),
        # garbled numbers, each naming its line
        ("x\n" + megatron_line(20, "12.3.4"), None, "line 2: elapsed time per iteration (ms) '12.3.4' is not a number"),
        (megatron_line(20, "nan"), None, "line 1: elapsed time per iteration (ms) 'nan' is not a positive"),
        (megatron_line(20, "-5"), None, "is not a positive finite number"),
        ("elapsed time per iteration (ms): 1000.0 |", None, "line 1: elapsed time per iteration (ms) printed without the step"),
        ("step: 20  loss: 1.0  memory: 1.OGiB(1%)  tps: 1,000", None, "line 1: memory (GiB) '1.O'"),
        ("Training epoch 0, iteration 20/99 | train_step_timing in s: fast", None, "line 1: train_step_timing in s 'fast'"),
        ("[timer.py:215:stop] epoch=0/micro_step=20/global_step=20, RunningAvgSamplesPerSec=1, CurrSamplesPerSec=inf, MemAllocated=1GB", None, "line 1: samples per second 'inf'"),
    ],
)  # fmt: skip
def test_a_malformed_log_is_refused_saying_why(
    text: str, format_: str | None, message: str
) -> None:
    with pytest.raises(InvalidSpec) as refused:
        read_log(text, format_)
    assert message in refused.value.message
    assert refused.value.field == "log"


def test_a_log_over_its_line_limit_is_refused_before_it_is_read() -> None:
    with pytest.raises(InvalidSpec) as refused:
        read_log("\n" * (MAX_LOG_LINES + 1))
    assert f"over {MAX_LOG_LINES:,}" in refused.value.message


# --- joined to the run's request: the library, the CLI and HTTP ----------------------------


def test_a_sample_rate_is_a_step_time_through_the_requests_global_batch() -> None:
    # deepspeedai/DeepSpeed issue #3742 read as DeepSpeed's: 7.799 samples/s of a global batch
    # of 32 is 32 / 7.799 = 4.1031 s a step; the timer's peak memory comes with it
    job, layout = plate_job(8, "llama3-8b", global_batch=32, seq_len=2048), Layout(zero=1)
    text = (LOGS / "deepspeed-issue-3742.log").read_text()
    request = Request(job, layout=layout, engine=get_engine("deepspeed"))
    run = run_from_log("neox", request, text, "deepspeed")
    assert run.measure == "samples_per_s" and run.step_time_s == pytest.approx(32 / 7.799)
    assert run.peak_memory_gb == pytest.approx(67.979, abs=1e-3)
    assert run.log is not None and run.log.steps_used == (34,)


MIXTRAL_REQUEST = {
    "model": "mixtral-8x7b",
    "cluster": {"gpus": 16, "gpu": "h100-sxm"},
    "training": {"global_batch": 128, "seq_len": 4096},
    "layout": {"tp": 2, "pp": 1, "ep": 8, "zero": 1, "recompute": "full"},
    "engine": "megatron",
}


def trial_file(tmp_path: Path, request: dict[str, Any], name: str = "trial.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"name": "mixtral trial", "request": request}))
    return path


def test_cli_reads_a_log_beside_its_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the Megatron-LM excerpt's 5.7189 s and 56.886 GB become the run's measurement
    log = LOGS / "megatron-lm-issue-756.log"
    argv = ["calibrate", "--log", str(log), "--request", str(trial_file(tmp_path, MIXTRAL_REQUEST))]
    code, out, err = run_cli([*argv, "--json", "--no-loo"], capsys)
    assert code == 0, err
    (run,) = json.loads(out)["fit"]["runs"]
    assert run["name"] == "mixtral trial" and run["measured"] == "step_time_s"
    assert run["measured_step_time_s"] == pytest.approx(5.7189)
    assert run["peak_memory_gb"] == pytest.approx(56.886, abs=1e-3)
    assert run["log"]["format"] == "megatron" and run["log"]["steps_used"] == [29, 30, 31]
    # as text: the run's line says how its log was read
    code, _, err = run_cli([*argv, "--no-loo"], capsys)
    assert code == 0 and "read from its megatron log: step_time_s 5.7189" in err


def test_cli_runs_file_names_logs_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a runs file's log paths are relative to its folder; a log and a typed-in run side by side
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "trial.log").write_text((LOGS / "megatron-lm-issue-756.log").read_text())
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        json.dumps({"request": MIXTRAL_REQUEST, "log": {"path": "logs/trial.log", "format": "megatron"}})
        + "\n"
        + json.dumps({"request": MIXTRAL_REQUEST | {"layout": {"tp": 4, "ep": 4, "zero": 1, "recompute": "full"}}, "measured": {"step_time_s": 6.0}})
        + "\n"
    )  # fmt: skip
    code, out, err = run_cli(["calibrate", str(runs), "--json", "--no-loo"], capsys)
    assert code == 0, err
    steps = [r["measured_step_time_s"] for r in json.loads(out)["fit"]["runs"]]
    assert steps == pytest.approx([5.7189, 6.0])


@pytest.mark.parametrize(
    ("log_text", "message"),
    [
        ("loading\nno steps here\n", "bad.log: no step lines in 2 lines: looked for megatron's"),
        (" iteration 20/ 100 | elapsed time per iteration (ms): 5.7.1 |\n", "bad.log: line 1: elapsed time per iteration (ms) '5.7.1' is not a number"),
        ("\0\1\2binary", "bad.log is not a text log: it holds NUL bytes"),
    ],
)  # fmt: skip
def test_cli_refuses_a_malformed_log_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], log_text: str, message: str
) -> None:
    log = tmp_path / "bad.log"
    log.write_text(log_text)
    trial = trial_file(tmp_path, MIXTRAL_REQUEST)
    code, out, err = run_cli(["calibrate", "--log", str(log), "--request", str(trial)], capsys)
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err


def test_cli_refuses_a_log_over_its_size_before_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("api.cli.training_logs.MAX_LOG_BYTES", 100)
    log = tmp_path / "big.log"
    log.write_text("x" * 101)
    trial = trial_file(tmp_path, MIXTRAL_REQUEST)
    code, _, err = run_cli(["calibrate", "--log", str(log), "--request", str(trial)], capsys)
    assert code == 2 and "big.log is 101 bytes, over the 100 a log may be" in err


def test_cli_pairs_each_log_with_a_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = str(LOGS / "megatron-lm-issue-756.log")
    code, _, err = run_cli(["calibrate", "--log", log], capsys)
    assert code == 2 and "each --log needs its --request, in order: 1 --log, 0 --request" in err
    code, _, err = run_cli(["calibrate"], capsys)
    assert code == 2 and "give RUNS (JSONL or CSV), or --log FILE --request TRIAL.json" in err


def test_http_reads_a_log_in_the_body(make_api: Callable[..., TestClient]) -> None:
    # torchtitan's 5863 tokens/s per GPU on 8 GPUs, 8 x 8192 tokens a step: 65536 / (5863 * 8)
    # = 1.39724 s a step
    api = make_api(solver_time_limit_s=60)
    request = {
        "model": "llama3-8b",
        "cluster": {"gpus": 8, "gpu": "h100-sxm"},
        "training": {"global_batch": 8, "seq_len": 8192},
        "layout": {"zero": 3},
        "engine": "torchtitan",
    }
    text = (LOGS / "torchtitan-pr-1287.log").read_text()
    body = {"runs": [{"request": request, "log": {"text": text}}], "leave_one_out": False}
    answer = api.post("/v1/calibrate", json=body)
    assert answer.status_code == 200, answer.text
    (run,) = answer.json()["fit"]["runs"]
    assert run["measured"] == "tokens_per_s_per_gpu" and run["measured_value"] == 5863
    assert run["measured_step_time_s"] == pytest.approx(65536 / (5863 * 8), rel=1e-6)
    assert run["log"]["memory_kind"] == "reserved"
    # a malformed log, a format no reader reads, a run with both a log and a measurement: 422
    refusals = [
        ({"text": text.replace("tps: 5,868", "tps: 5,8x8")}, "runs.0.log: line 6: tps '5,8x8'"),
        ({"text": text, "format": "jax"}, "log format 'jax' is none of megatron"),
        ({"text": "hello"}, "runs.0.log: no step lines in 1 lines"),
    ]
    for log, message in refusals:
        refused = api.post("/v1/calibrate", json={"runs": [{"request": request, "log": log}]})
        assert refused.status_code == 422 and message in refused.json()["error"]["message"]
    both = {"request": request, "log": {"text": text}, "measured": {"step_time_s": 1.0}}
    refused = api.post("/v1/calibrate", json={"runs": [both]})
    assert refused.status_code == 422
    assert "exactly one of measured and log" in refused.json()["error"]["message"]
