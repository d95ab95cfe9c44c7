"""A study on a real Dask cluster (a LocalCluster of 2 worker processes, one thread each)
gives the very rows the local process pool gives: one code path, any Executor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distributed import LocalCluster

from api.scenarios import scenario_request
from optimizer.studies import (
    TIMING_COLUMNS,
    Row,
    StudySpec,
    check_values,
    dask_executor,
    execute,
    existing_rows,
    expand,
    in_flight_for,
    local_executor,
    run_settings,
    run_study,
)
from tests.helpers import run_cli
from tests.test_studies_cli import spec_file

SPEC: dict[str, Any] = {
    "base": {
        "model": "llama3-8b",
        "cluster": {"gpus": 8},
        "training": {"global_batch": 64, "seq_len": 2048},
        "explain": False,
        "time_limit_s": 5,
    },
    "grid": {
        "model": ["llama3-8b", "mistral-7b"],
        "cluster.gpus": [8, 16, 32],
        "search.memory_limit_gb": [1, 60],  # the 1 GB half is proved infeasible
    },
    "scenarios": [{"cluster.gpus": 12, "search.tp": 8}],  # 8 does not divide 12: infeasible
}


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    with LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


def comparable(rows: list[Row]) -> list[Row]:
    """Sorted by key, wall times left out: everything else is a function of the scenario."""
    return sorted(
        ({k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in rows),
        key=lambda row: row["key"],
    )


def test_dask_gives_the_rows_the_local_pool_gives(scheduler: str) -> None:
    spec = StudySpec.model_validate(SPEC)
    check_values(spec, scenario_request)
    scenarios, settings = expand(spec), run_settings(spec, scenario_request)
    with local_executor(2) as pool:
        local = list(run_study(scenarios, settings, pool, in_flight_for(2)))
    with dask_executor(scheduler) as (executor, threads):
        assert threads == 2
        on_dask = list(run_study(scenarios, settings, executor, in_flight_for(threads)))
    assert len(local) == len(on_dask) == 13
    assert comparable(local) == comparable(on_dask)
    statuses = {row["status"] for row in local}
    assert statuses == {"optimal", "infeasible"}


def test_the_cli_runs_on_a_dask_scheduler_named_by_flag_or_environment(
    scheduler: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = spec_file(tmp_path, {**SPEC, "scenarios": []})
    address = "dask://" + scheduler.removeprefix("tcp://")
    out = tmp_path / "dask.csv"
    status, _, err = run_cli(["study", str(spec), "--out", str(out), "--executor", address], capsys)
    assert status == 0, err
    assert len(existing_rows(out)) == 12
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", scheduler)
    status, _, err = run_cli(["study", str(spec), "--out", str(out), "--force"], capsys)
    assert status == 0 and "12 run" in err, err


def test_an_unreachable_scheduler_is_said_plainly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(execute, "DASK_CONNECT_TIMEOUT_S", 1)  # nothing listens: no need to wait
    spec = spec_file(tmp_path, {**SPEC, "scenarios": []})
    argv = [
        "study",
        str(spec),
        "--out",
        str(tmp_path / "r.csv"),
        "--executor",
        "dask://127.0.0.1:9",
    ]
    status, _, err = run_cli(argv, capsys)
    assert status == 1 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in err
    assert "Traceback" not in err
