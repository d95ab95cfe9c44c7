"""`layoutopt study` stopped as a user or a scheduler stops it: `kill PID` (SIGTERM) stops it as
Ctrl-C does (its workers ended, the rows kept for --resume, exit 143), and `kill -9` of the
CLI alone still leaves no worker behind (each dies with its parent)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import pytest

from optimizer.studies import existing_rows
from tests.test_studies_cli import LAYOUTOPT, ROOT, SLOW, _rows_in, expected_keys, spec_file

# SLOW's first 8 scenarios (~0.3 s each): a few seconds on two workers, few to resume
SPEC = SLOW | {"grid": {**SLOW["grid"], "training.seq_len": [2048]}}
SCENARIOS = 8
HALF = SCENARIOS // 2
EXIT_WITHIN_S = 15  # generous: 2 shared cores; the CLI takes well under a second
GONE_WITHIN_S = 10


def study_command(tmp_path: Path) -> tuple[list[str], Path]:
    out = tmp_path / "r.csv"
    spec = spec_file(tmp_path, SPEC)
    return [*LAYOUTOPT, "study", str(spec), "--out", str(out), "--workers", "2"], out


@contextmanager
def started(command: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The CLI in a session of its own (so that a failing test can still end all of it)."""
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=ROOT, stderr=sink, start_new_session=True)
    try:
        yield process
    finally:  # whatever the test found, nothing of its session outlives it
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture
def study(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, list[str]]]:
    command, out = study_command(tmp_path)
    with started(command, tmp_path / "stderr.log") as process:
        yield process, out, command


def workers_once_rows_appear(process: subprocess.Popen[bytes], out: Path) -> list[psutil.Process]:
    """Every process under the CLI once it has written half its rows (half left to resume):
    its workers and multiprocessing's resource tracker."""
    deadline = time.monotonic() + 120
    while _rows_in(out) < HALF and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert _rows_in(out) >= HALF and process.poll() is None, "the study never got going"
    children = psutil.Process(process.pid).children(recursive=True)
    workers = [c for c in children if "spawn_main" in " ".join(c.cmdline())]
    assert len(workers) == 2, [c.cmdline() for c in children]
    return children


def left_alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(processes, timeout=GONE_WITHIN_S)
    return alive


def test_sigterm_stops_the_study_as_ctrl_c_does_and_leaves_no_worker(
    study: tuple[subprocess.Popen[bytes], Path, list[str]], tmp_path: Path
) -> None:
    process, out, command = study
    children = workers_once_rows_appear(process, out)
    os.kill(process.pid, signal.SIGTERM)  # `kill PID`: the CLI alone, not its group
    assert process.wait(timeout=EXIT_WITHIN_S) == 143
    err = (tmp_path / "stderr.log").read_text()
    assert "terminated" in err and "rerun with --resume" in err
    assert "Traceback" not in err, err
    assert left_alive(children) == []
    kept = {row["key"] for row in existing_rows(out)}
    assert HALF <= len(kept) < SCENARIOS, "terminated too late to test a resume"
    resumed = subprocess.run(
        [*command, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert resumed.returncode == 0, resumed.stderr
    keys = [row["key"] for row in existing_rows(out)]
    assert len(keys) == len(set(keys)) == SCENARIOS
    assert set(keys) == expected_keys(SPEC) and kept <= set(keys)


def test_kill_9_of_the_cli_takes_its_workers_with_it(
    study: tuple[subprocess.Popen[bytes], Path, list[str]],
) -> None:
    process, out, _ = study
    children = workers_once_rows_appear(process, out)
    os.kill(process.pid, signal.SIGKILL)  # no handler runs: the workers must see it alone
    process.wait(timeout=EXIT_WITHIN_S)
    assert left_alive(children) == []
