"""`layoutopt evaluate` as a user runs it: the issue's reference command and malformed input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_cli as run

# The teaching plate, asked for by name (every command defaults to standard and megatron).
PLATE_FLAGS = [
    "--profile",
    "workshop",
    "--engine",
    "generic",
    "--model",
    "llama3-405b",
    "--gpus",
    "16384",
    "--tp",
    "8",
    "--pp",
    "16",
    "--vpp",
    "4",
    "--zero",
    "2",
]


def test_plate_command_reports_the_reference_figures(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["evaluate", *PLATE_FLAGS, "--json"], capsys)
    answer = json.loads(out)
    assert status == 0
    assert answer["memory_gb"] == {
        "weights": 6.34,
        "gradients": 0.05,
        "optimizer": 0.30,
        "activations": 71.87,
        "fragmentation": 0.0,  # the plate prices neither
        "runtime": 0.0,
        "total": 78.56,
        "capacity": 80.0,
    }
    assert (answer["bubble"], answer["mfu"], answer["fits"]) == (0.1899, 0.4255, True)
    assert answer["layout"]["dp"] == 128 and answer["layout"]["micro_batches"] == 16


def test_human_output_shows_bars_against_capacity_and_the_waterfall(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = run(["evaluate", *PLATE_FLAGS], capsys)
    assert status == 0
    assert "capacity 80.00 GB" in out
    assert "activations     71.87  ████" in out
    assert "fits, 1.44 GB free" in out
    assert "after pipeline bubble                 48.6%" in out
    assert "MFU 42.55%" in out


def test_spec_file_and_flags_share_the_request_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {
        "model": "llama3-405b",
        "cluster": {"gpus": 16384, "gpu": "h100-sxm", "gpus_per_node": 8},
        "training": {"global_batch": 2048, "seq_len": 8192},
        "layout": {
            "tp": 8,
            "pp": 16,
            "cp": 1,
            "vpp": 4,
            "micro_batch": 1,
            "zero": 2,
            "recompute": "none",
        },
        "profile": "workshop",
        "engine": "generic",
    }
    path = tmp_path / "plate.json"
    path.write_text(json.dumps(spec))
    _, from_file, _ = run(["evaluate", "--spec", str(path), "--json"], capsys)
    _, from_flags, _ = run(["evaluate", *PLATE_FLAGS, "--json"], capsys)
    assert json.loads(from_file) == json.loads(from_flags)
    # A flag overrides the file: vpp 1 raises the bubble to 15/31.
    _, overridden, _ = run(["evaluate", "--spec", str(path), "--vpp", "1", "--json"], capsys)
    assert json.loads(overridden)["bubble"] == round(15 / 31, 4)


def test_hf_config_file_as_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    _, from_config, _ = run(
        ["evaluate", "--model", str(path), "--gpus", "64", "--tp", "8", "--json"], capsys
    )
    _, from_preset, _ = run(
        ["evaluate", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--json"], capsys
    )
    assert json.loads(from_config)["memory_gb"] == json.loads(from_preset)["memory_gb"]


BAD_REQUESTS = [
    (["--gpus", "0"], "cluster.gpus: Input should be greater than 0"),
    (["--gpus", "-8"], "cluster.gpus: Input should be greater than 0"),
    (["--gpus", "16384", "--tp", "3"], "tp(3) * pp(1) * cp(1) = 3 does not divide gpus(16384)"),
    (
        ["--gpus", "16128", "--tp", "3", "--pp", "16"],
        "tp(3) does not divide num_attention_heads(128)",
    ),
    (
        ["--gpus", "12288", "--tp", "8", "--pp", "16"],
        "global_batch 2048 is not divisible by dp(96) * micro_batch(1)",
    ),
    (
        ["--gpus", "1000", "--tp", "8", "--pp", "16"],
        "tp(8) * pp(16) * cp(1) = 128 does not divide gpus(1000)",
    ),
    (["--gpus", "8", "--gpu", "h900"], "unknown gpu preset 'h900'"),
    (["--gpus", "8", "--zero", "4"], "layout.zero: Input should be less than or equal to 3"),
    (
        ["--gpus", "8", "--recompute", "sometimes"],
        "layout.recompute: Input should be 'none', 'selective' or 'full'",
    ),
    (["--gpus", "99999999999"], "cluster.gpus: Input should be less than or equal to 10000000"),
    (["--gpus", "8", "--seq-len", "0"], "training.seq_len: Input should be greater than 0"),
    (["--gpus", "8", "--profile", "magic"], "unknown profile 'magic'"),
    (
        [
            "--gpus",
            "16384",
            "--tp",
            "8",
            "--pp",
            "16",
            "--recompute",
            "selective",
            "--profile",
            "workshop",
        ],
        "selective recompute needs profile standard",
    ),
]


@pytest.mark.parametrize(("flags", "message"), BAD_REQUESTS)
def test_bad_flags_get_a_clear_message_and_status_2(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(["evaluate", "--model", "llama3-405b", *flags], capsys)
    assert status == 2
    assert message in err
    assert out == "" and "Traceback" not in err


def test_unknown_model_preset(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["evaluate", "--model", "gpt-9", "--gpus", "8"], capsys)
    assert status == 2 and "unknown model preset 'gpt-9'; known: " in err and "llama3-405b" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"model": "llama3-8b", "cluster": {"gpus": 8}, "layuot": {}}', "layuot: unknown field"),
        (
            '{"model": "llama3-8b", "cluster": {"gpus": 8, "nodes": 2}}',
            "cluster.nodes: unknown field",
        ),
        ('{"model": "llama3-8b"}', "cluster: Field required"),
        (
            '{"model": "llama3-8b", "cluster": {"gpus": "eight"}}',
            "cluster.gpus: Input should be a valid integer",
        ),
        (
            '{"model": {"num_layers": 2}, "cluster": {"gpus": 8}}',
            "model.hidden_size: Field required",
        ),
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
    ],
)
def test_malformed_spec_files(
    tmp_path: Path, content: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spec.json"
    path.write_text(content)
    status, _, err = run(["evaluate", "--spec", str(path)], capsys)
    assert status == 2
    assert message in err and "Traceback" not in err


def test_missing_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["evaluate", "--spec", str(tmp_path / "nope.json")], capsys)
    assert status == 2 and "cannot read" in err


def test_installed_console_script_exits_2_without_a_trace() -> None:
    script = Path(sys.executable).parent / "layoutopt"
    done = subprocess.run(
        [str(script), "evaluate", "--model", "llama3-405b", "--gpus", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        done.stderr.startswith("layoutopt: error: cluster.gpus") and "Traceback" not in done.stderr
    )


def test_assume_flag_sets_one_assumption(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama 3 70B, tp 8, pp 2, full recompute: without sequence parallelism each tp rank keeps
    # the other 7 shares of the stored layer inputs, so activations grow; weights do not
    job = ["evaluate", "--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "2"]
    job += ["--profile", "standard", "--recompute", "full", "--json"]
    _, with_sp, _ = run(job, capsys)
    _, without, _ = run([*job, "--assume", "sequence_parallel=false"], capsys)
    sp, no_sp = json.loads(with_sp)["memory_gb"], json.loads(without)["memory_gb"]
    assert no_sp["activations"] > 5 * sp["activations"] and no_sp["weights"] == sp["weights"]
    status, _, err = run([*job, "--assume", "nope=1"], capsys)
    assert status == 2 and "assumptions.nope" in err
    status, _, err = run([*job, "--assume", "kernel_efficiency"], capsys)
    assert status == 2 and "--assume takes NAME=VALUE" in err
