"""`layoutopt study` and `layoutopt scaling` as a user runs them: outputs in each format, a
progress bar only on a terminal, a study killed mid-run and resumed with no row lost or
repeated, and bad specs refused with the field named."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.scenarios import scenario_request
from optimizer.studies import StudySpec, check_values, existing_rows, expand
from tests.helpers import run_cli

BASE: dict[str, Any] = {
    "model": "llama3-8b",
    "cluster": {"gpus": 8, "gpu": "h100-sxm"},
    "training": {"global_batch": 64, "seq_len": 2048},
    "explain": False,
    "time_limit_s": 5,
}
SMALL = {"base": BASE, "grid": {"model": ["llama3-8b", "mistral-7b"], "cluster.gpus": [8, 16]}}
# ~0.3 s a scenario with explanations on, 16 of them: long enough to kill in the middle.
SLOW = {
    "base": BASE | {"explain": True},
    "grid": {
        "model": ["llama3-8b", "mistral-7b"],
        "cluster.gpus": [8, 16, 32, 64],
        "training.seq_len": [2048, 4096],
    },
}
LAYOUTOPT = [sys.executable, "-c", "import sys; from api.cli import main; sys.exit(main())"]
ROOT = Path(__file__).resolve().parent.parent


def spec_file(tmp_path: Path, spec: dict[str, Any], name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    text = yaml.safe_dump(spec) if name.endswith(".yaml") else json.dumps(spec)
    path.write_text(text)
    return path


def expected_keys(spec: dict[str, Any]) -> set[str]:
    study = StudySpec.model_validate(spec)
    check_values(study, scenario_request)
    return {scenario.key for scenario in expand(study)}


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_a_study_writes_every_row_in_each_format(
    tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_file(tmp_path, SMALL)
    out = tmp_path / f"results{suffix}"
    status, _, err = run_cli(["study", str(spec), "--out", str(out), "--workers", "1"], capsys)
    assert status == 0, err
    rows = existing_rows(out)
    assert {row["key"] for row in rows} == expected_keys(SMALL) and len(rows) == 4
    assert {row["status"] for row in rows} == {"optimal"}
    assert "study: 4 scenarios (4 run, 0 already" in err and "4 optimal" in err
    again, _, err = run_cli(["study", str(spec), "--out", str(out)], capsys)
    assert again == 2 and "exists: pass --resume" in err


def test_yaml_reads_token_counts_as_numbers_and_json_works_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        "base: {model: llama3-8b, cluster: {gpus: 8}, explain: false}\n"
        "train_tokens: 15e12\ngpu_hour_cost: 2.5\n"
    )
    out = tmp_path / "one.jsonl"
    status, _, err = run_cli(["study", str(path), "--out", str(out), "--workers", "1"], capsys)
    assert status == 0, err
    (row,) = existing_rows(out)
    assert row["days_to_train"] == pytest.approx(15e12 / row["tokens_per_s"] / 86400, rel=1e-3)
    assert row["cost"] == pytest.approx(2.5 * row["gpu_hours"], rel=1e-3)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"base": BASE, "grid": {"cluster.gpus": [8, 0]}}, "grid.cluster.gpus[1]: Input should be"),
        ({"base": BASE, "grid": {"Cluster": [1]}}, "grid: 'Cluster' is not a dotted field path"),
        ({"base": BASE, "compute": "guess"}, "compute"),
        (
            {"base": BASE, "grid": {"cluster.gpus": list(range(1, 401)), "model": ["x"] * 300}},
            "120,000 scenarios",
        ),
    ],
)
def test_a_bad_spec_exits_2_naming_the_field(
    tmp_path: Path, spec: dict[str, Any], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = spec_file(tmp_path, spec, "spec.json")
    status, _, err = run_cli(["study", str(path), "--out", str(tmp_path / "r.csv")], capsys)
    assert status == 2 and words in err and "Traceback" not in err, err
    assert not (tmp_path / "r.csv").exists()


def test_the_progress_bar_stays_quiet_off_a_terminal(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, SMALL)
    command = [*LAYOUTOPT, "study", str(spec), "--out", str(tmp_path / "r.csv"), "--workers", "1"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "scenario/s" not in done.stderr and "%|" not in done.stderr
    assert done.stderr.count("\n") == 1  # the summary line alone


def test_the_progress_bar_shows_on_a_terminal(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, SMALL)
    command = [*LAYOUTOPT, "study", str(spec), "--out", str(tmp_path / "r.csv"), "--workers", "1"]
    terminal, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 120 columns
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=side)
    os.close(side)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([terminal], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout=30)
    os.close(terminal)
    text = seen.decode(errors="replace")
    assert "4/4" in text and "scenario" in text and "failed=0" in text, text


def _rows_in(path: Path) -> int:
    return max(0, path.read_text().count("\n") - 1) if path.exists() else 0


def test_a_killed_study_resumes_with_no_row_lost_or_repeated(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, SLOW)
    out = tmp_path / "r.csv"
    command = [*LAYOUTOPT, "study", str(spec), "--out", str(out), "--workers", "1"]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while _rows_in(out) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the CLI and its worker, mid-study
    process.wait(timeout=30)
    before = {row["key"] for row in existing_rows(out)}
    assert 3 <= len(before) < 16, "killed too late to test a resume"
    resumed = subprocess.run(
        [*command, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    keys = [row["key"] for row in existing_rows(out)]
    assert len(keys) == len(set(keys)) == 16
    assert set(keys) == expected_keys(SLOW) and before <= set(keys)
    assert f"already in {out}" in resumed.stderr


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_stops_at_once_and_keeps_the_rows(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, SLOW)
    out = tmp_path / "r.jsonl"
    command = [*LAYOUTOPT, "study", str(spec), "--out", str(out), "--workers", "1"]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # as at a terminal: a suite started in the background (`make test &`) has SIGINT
        # ignored, which its children inherit, and Python then never raises Ctrl-C
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 60
    while not (out.exists() and out.read_text().count("\n") >= 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    rows_at_signal = len(existing_rows(out))
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole group
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130 and "rerun with --resume" in err, (
        f"{rows_at_signal} rows at the signal, {len(existing_rows(out))} at exit: {err[-500:]}"
    )
    assert "Traceback" not in err, err
    assert len(existing_rows(out)) >= 2


def test_scaling_prints_the_curve_and_exits_by_status(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["scaling", "--model", "llama3-8b", "--gpu-counts", "8,16,32", "--global-batch", "64"]
    status, out, err = run_cli([*argv, "--seq-len", "2048"], capsys)
    assert status == 0, err
    assert "every point proved" in out and out.count("optimal") == 3
    status, out, _ = run_cli([*argv, "--json", "--memory-limit-gb", "1"], capsys)
    answer = json.loads(out)
    assert status == 3 and {p["status"] for p in answer["points"]} == {"infeasible"}
    status, _, err = run_cli(["scaling", "--model", "llama3-8b", "--gpu-range", "8:4096"], capsys)
    assert status == 2 and "512 whole-node counts" in err
