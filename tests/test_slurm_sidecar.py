"""The Slurm plugin's sidecar (api/integrations/slurm_submit.py) alone, without Slurm: host
lists, the nodes other jobs hold, the pools a partition may use, what a plan's answer sets,
and that it runs as a lone script (standard library only). tests/test_slurm_job_submit.py
runs it under a real slurmctld."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from api.integrations.slurm_submit import (
    Unchanged,
    expand_hostlist,
    held_nodes,
    plan_request,
    rewrite,
)

ROOT = Path(__file__).resolve().parents[1]
POOLS = [
    {"name": "h100", "gpu": "h100-sxm", "nodes": "h[1-3]", "gres_type": "h100", "feature": "h100"},
    {"name": "a100", "gpu": "a100-80gb", "nodes": "a[1-2]", "gres_type": "a100", "feature": "a100"},
]
OPT_IN = 'layoutopt:{"request":{"model":"llama3-8b"}}'


def test_host_lists_expand_as_slurm_writes_them() -> None:
    assert expand_hostlist("gpu[01-03,7],login") == ["gpu01", "gpu02", "gpu03", "gpu7", "login"]
    assert expand_hostlist("r[1-2]-n[8-9]") == ["r1-n8", "r1-n9", "r2-n8", "r2-n9"]
    assert expand_hostlist("") == []


def test_held_nodes_are_allocations_and_earlier_plans_of_pending_jobs() -> None:
    jobs = [
        {"state": 1, "nodes": "h[1-2]"},  # running
        {"state": 3 | 0x8000, "nodes": "a1"},  # complete, still releasing its node
        {"state": 3, "nodes": "h3"},  # complete
        {"state": 0, "admin_comment": "layoutopt:pool=a100;gpus=8;nodes=a2;tp=1"},  # planned
        {"state": 0, "admin_comment": "nodes=a3"},  # pending, an admin's own note
        {"state": 0, "nodes": None, "admin_comment": None},
    ]
    assert held_nodes(jobs) == {"h1", "h2", "a1", "a2"}


def test_a_job_in_a_partition_is_planned_on_the_pools_that_serve_it() -> None:
    config = {"pools": [POOLS[0] | {"partition": "train"}, POOLS[1] | {"partition": "eval"}]}
    job = {"name": "x", "comment": OPT_IN, "jobs": [{"state": 1, "nodes": "a2"}]}
    request = plan_request(config, job | {"partition": "eval"}, 1.0)
    assert request["cluster"]["pools"] == [
        {"name": "a100", "gpu": "a100-80gb", "nodes": 2, "unavailable_nodes": [1]}
    ]
    assert [p["name"] for p in plan_request(config, job, 1.0)["cluster"]["pools"]] == [
        "h100",
        "a100",
    ]
    with pytest.raises(Unchanged, match="no configured pool serves partition debug"):
        plan_request(config, job | {"partition": "debug"}, 1.0)


def test_a_plan_that_gives_the_job_nothing_leaves_it_unchanged() -> None:
    answer = {"status": "optimal", "jobs": [{"name": "wrap", "pool": None, "nodes": [], "gpus": 0}]}
    with pytest.raises(Unchanged, match="gives it nothing"):
        rewrite({"pools": POOLS}, answer)


def test_the_pool_feature_joins_the_jobs_own_where_it_can() -> None:
    answer = {"status": "optimal", "jobs": [{"pool": "a100", "nodes": [1], "gpus": 4}]}
    assert rewrite({"pools": POOLS}, answer)["tres_per_node"] == "gres:gpu:a100:4"
    assert rewrite({"pools": POOLS}, answer, "ib")["features"] == "ib&a100"
    assert rewrite({"pools": POOLS}, answer, "ib|eth")["features"] == "ib|eth"


def test_the_sidecar_runs_alone_and_explains_a_comment_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "layoutopt.json").write_text(
        json.dumps({"url": "http://127.0.0.1:9", "pools": POOLS})
    )
    job = {"name": "x", "comment": "layoutopt:{not json", "jobs": []}
    done = subprocess.run(
        [sys.executable, "-I", ROOT / "api" / "integrations" / "slurm_submit.py"]
        + [tmp_path / "layoutopt.json", "1"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    status, reason = done.stdout.splitlines()
    assert status == "status=unchanged"
    assert reason.startswith("reason=the comment after 'layoutopt:' is not JSON")
