"""Scaling curves kept on disk (`CURVE_STORE`): a restarted server plans a cluster it planned
before without pricing it again, and gives the same answer; a store another version of the
code wrote is not read."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.settings import Settings
from bench.server import stop_server
from optimizer.planning import CURVE_CACHE, PlanSettings, plan
from optimizer.planning import store as stores
from optimizer.planning.store import StoredCurveCache, curve_cache
from tests.planning_cases import REQUEST, REQUEST_GPU

PLAN = {
    "cluster": {"pools": [{"name": "h100", "gpu": "h100-sxm", "nodes": 4, "nodes_per_rack": 4}]},
    "jobs": [
        {
            "name": name,
            "request": {
                "model": model,
                "profile": "workshop",
                "training": {"global_batch": 256, "seq_len": 4096},
            },
            "node_counts": [1, 2],
        }
        for name, model in (("a", "llama3-8b"), ("b", "mistral-7b"))
    ],
    "time_limit_s": 20,
}


def _problem():  # type: ignore[no-untyped-def]
    from optimizer.planning import PlanJob, PlanProblem, Pool

    pool = Pool("h100", REQUEST_GPU, 4, 8, None, 4)
    return PlanProblem((pool,), (PlanJob("a", REQUEST, node_counts=(1, 2)),))


def test_a_new_process_reads_what_the_last_one_priced(tmp_path: Path) -> None:
    first = StoredCurveCache(tmp_path / "curves")
    priced = plan(_problem(), PlanSettings(time_limit_s=20), cache=first)
    assert priced.stats.optimize_calls == 2 and priced.stats.curve_cache_hits == 0
    # a second cache on the same folder is what a restarted process opens: memory empty
    second = StoredCurveCache(tmp_path / "curves")
    again = plan(_problem(), PlanSettings(time_limit_s=20), cache=second)
    assert again.stats.optimize_calls == 0 and again.stats.curve_cache_hits == 2
    assert [j.estimate for j in again.jobs] == [j.estimate for j in priced.jobs]
    assert again.objective_value == priced.objective_value


def test_curves_another_version_of_the_code_priced_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan(_problem(), PlanSettings(time_limit_s=20), cache=StoredCurveCache(tmp_path / "c"))
    monkeypatch.setattr(stores, "code_fingerprint", lambda: "another-release")
    fresh = plan(_problem(), PlanSettings(time_limit_s=20), cache=StoredCurveCache(tmp_path / "c"))
    assert fresh.stats.optimize_calls == 2 and fresh.stats.curve_cache_hits == 0


def test_no_store_is_the_memory_cache_and_a_path_opens_once(tmp_path: Path) -> None:
    assert curve_cache("") is CURVE_CACHE and curve_cache(None) is CURVE_CACHE
    assert curve_cache(tmp_path / "s") is curve_cache(str(tmp_path / "s"))
    assert Settings().curve_store == ""  # memory only unless asked


def _plan_over_http(url: str) -> dict[str, Any]:
    response = httpx.post(f"{url}/v1/plan", json=copy.deepcopy(PLAN), timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_restarted_server_plans_from_the_store(make_server: Any, tmp_path: Path) -> None:
    store = str(tmp_path / "curves")
    first = make_server(CURVE_STORE=store, SOLVE_IN="processes", WORKERS="1")
    cold = _plan_over_http(first.url)
    assert cold["solver"]["optimize_calls"] == 4 and cold["solver"]["curve_cache_hits"] == 0
    stop_server(first.process)
    second = make_server(CURVE_STORE=store, SOLVE_IN="processes", WORKERS="1")
    warm = _plan_over_http(second.url)
    assert warm["solver"]["optimize_calls"] == 0 and warm["solver"]["curve_cache_hits"] == 4
    for answer in (cold, warm):
        answer.pop("solver")
    assert json.dumps(warm, sort_keys=True) == json.dumps(cold, sort_keys=True)


def test_a_store_that_cannot_be_a_folder_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pydantic import ValidationError

    from tests.helpers import run_cli

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(ValidationError, match="curve store .* cannot be a folder of curves"):
        Settings(curve_store=str(blocked / "curves"))
    spec = tmp_path / "plan.json"
    spec.write_text(json.dumps(PLAN))
    status, _, err = run_cli(["plan", str(spec), "--curve-store", str(blocked / "c")], capsys)
    assert status == 2 and "cannot be a folder of curves" in err and "Traceback" not in err
