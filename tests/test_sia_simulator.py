"""The planner inside Sia's simulator, end to end on a slice of a Philly workload (three
jobs, a few rounds). Runs only where a checkout of the simulator is given (SIA_PATH, its
sia-simulator/ folder) and its dependencies import; CI has neither. One round of the
harness's pure half (plan_round) runs everywhere."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.sia_mapping import SiaAllocation, SiaJob, rejected
from bench.sia_simulator import RoundLog, main, plan_round
from optimizer.planning import PlanSettings

ROOT = Path(__file__).resolve().parent.parent
SIA_DEPS = ("cvxpy", "pandas", "rich", "psutil", "autograd", "scipy")


def _sia_path() -> Path:
    where = os.environ.get("SIA_PATH")
    if not where or not (Path(where) / "sia.py").is_file():
        pytest.skip("SIA_PATH is not a sia-simulator/ checkout (siasosp23/artifacts)")
    missing = [m for m in SIA_DEPS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the simulator's dependencies do not import here: {', '.join(missing)}")
    return Path(where)


def test_planner_runs_rounds_of_a_philly_slice_with_no_rejected_assignment(tmp_path: Path) -> None:
    sia = _sia_path()
    rows = (sia / "workloads" / "philly" / "workload-1.csv").read_text().splitlines()[:4]
    workload = tmp_path / "philly-slice.csv"
    workload.write_text("\n".join(rows) + "\n")
    command = [
        sys.executable,
        "-m",
        "bench.sia_simulator",
        "run",
        "--trace",
        str(workload),
        "--policy",
        "planner-a",
        "--out",
        str(tmp_path),
        "--max-rounds",
        "6",
        "--no-ftf",
    ]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads((tmp_path / "planner-a-philly-slice.json").read_text())
    assert figures["jobs"] == 3 and figures["rounds"] >= 5
    assert figures["rejected"] == 0 and figures["unsolved_rounds"] == 0
    lines = (tmp_path / "planner-a-philly-slice.log").read_text().splitlines()
    log = [json.loads(line) for line in lines]
    # every allocation the planner made is a GPU type of Sia's cluster and fits its nodes
    per_node = {"aws": 4, "rtx": 8, "dgx-ext": 8}
    for entry in log:
        held: dict[tuple[str, int], int] = {}
        for job in entry["submitted_jobs"]:
            if job["allocation"] and job["allocation"][0] is not None:
                gpu_type, nodes = job["allocation"]
                for node in nodes:
                    held[(gpu_type, node)] = held.get((gpu_type, node), 0) + 1
        assert all(gpus <= per_node[t] for (t, _), gpus in held.items())


def test_mode_b_is_refused_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["run", "--trace", "x", "--policy", "planner-b", "--out", str(tmp_path)])
    assert stopped.value.code == 2
    assert "hold no GPT job" in capsys.readouterr().err


def test_a_packed_round_gives_the_same_counts_as_a_named_one_on_whole_nodes() -> None:
    # plan_round is the harness's pure half: no simulator needed. Two Sia nodes of 4 T4s
    # and one of 8 RTXs; the job that holds node 0's four T4s is kept there in both modes.
    cluster = {"aws": (2, 4), "rtx": (1, 8)}
    jobs = [
        SiaJob("a", {"aws": {1: 1.0, 4: 3.0}, "rtx": {1: 1.2, 8: 5.0}}, 0.0),
        SiaJob("b", {"aws": {1: 1.0, 2: 1.8, 4: 3.2}}, 600.0),
        SiaJob("c", {"aws": {1: 1.0, 4: 3.5}, "rtx": {4: 4.0}}, 0.0),
    ]
    previous = {"b": ("aws", (0, 0, 0, 0))}
    settings = PlanSettings(time_limit_s=10, explain=False)
    named, packed = RoundLog(), RoundLog()
    by_name = plan_round(jobs, cluster, previous, settings, named)
    by_count = plan_round(jobs, cluster, previous, settings, packed, packed=True)

    def counts(allocations: dict[str, SiaAllocation]) -> dict[str, tuple[str | None, int]]:
        return {name: (gpu_type, len(nodes)) for name, (gpu_type, nodes) in allocations.items()}

    assert counts(by_count) == counts(by_name)
    assert by_count["b"] == previous["b"]  # kept: no restart
    tables = {job.name: job.goodput for job in jobs}
    assert rejected(by_count, tables, cluster, {"aws": 2, "rtx": 1}) == []
    for gpu_type, nodes in by_count.values():  # each job on as few Sia nodes as it can be
        if gpu_type is not None:
            assert len(set(nodes)) == -(-len(nodes) // cluster[gpu_type][1])
    assert named.topology_unproved == packed.topology_unproved == 0
