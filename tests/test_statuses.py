"""Answers that claim no more than was proved, and input refused as the schema says: the
statuses of optimize and pareto, strict request fields, and the CLI's exit codes.
(The same behaviours under load, over a real server: tests/test_reliability.py.)"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.schemas import PLATE_EXAMPLE, SEARCH_EXAMPLE
from optimizer import Request, SolveSettings
from optimizer.search.space import SearchSpace
from optimizer.searches import optimize, pareto
from tests.helpers import plate_job
from tests.helpers import run_cli as run

# --- statuses -------------------------------------------------------------------------------


# the plate on the workshop profile, engine-agnostic, the layout alone
PLATE_UNEXPLAINED = Request(
    plate_job(), space=SearchSpace(max_vpp=4), profile="workshop", engine=None, explain=False
)


def test_a_time_out_is_unknown_never_infeasible() -> None:
    result = optimize(
        Request(plate_job(1024, "llama3-70b"), engine=None), SolveSettings(time_limit_s=1e-4)
    )
    assert result.status == "unknown"
    assert result.best is None and result.conflict == () and not result.solver.proved_optimal
    (why,) = [w for w in result.warnings if w.startswith("status unknown")]
    assert "infeasibility is NOT proved" in why and "time_limit_s" in why
    assert "(tp, pp, cp, dp) tuples" in why  # what was searched


def test_a_proof_of_infeasibility_is_infeasible() -> None:
    # 405B on 64 GPUs: the weights alone exceed 80 GB a device (cost-model.md)
    result = optimize(Request(plate_job(64), profile="workshop", engine=None))
    assert result.status == "infeasible" and result.solver.proved_optimal
    assert [item.name for item in result.conflict] == ["memory_limit"]


def test_an_optimum_reports_its_bound_and_no_gap() -> None:
    result = optimize(PLATE_UNEXPLAINED)
    assert result.status == "optimal" and result.best is not None
    assert result.solver.bound == result.best.mfu and result.solver.gap == 0.0


def test_a_layout_short_of_its_proof_is_feasible_with_a_bound_above_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the solve returns the plate's layout unproved, with its proved bound ln(0.5): the
    # answer keeps the layout, says feasible, and reports bound 0.5 and the gap to it
    from models.layout import Layout
    from optimizer import searches
    from optimizer.search import LN_MFU_SCALE, Found

    plate = Layout(tp=8, pp=16, vpp=4, zero=2)
    unproved = Found(plate, False, 1, bound_ln_mfu=round(LN_MFU_SCALE * math.log(0.5)))
    # without explanations the optimum is searched by MFU ceilings (ceiling_search.py)
    monkeypatch.setattr(searches, "best_layout_by_ceilings", lambda *_, **__: unproved)
    result = optimize(PLATE_UNEXPLAINED)
    assert result.status == "feasible" and result.best is not None
    assert result.best.mfu == pytest.approx(0.4255, abs=5e-5)  # the plate's layout, priced
    assert result.solver.bound == pytest.approx(0.5, rel=1e-8)
    assert result.solver.gap == pytest.approx((0.5 - result.best.mfu) / 0.5, rel=1e-7)


def test_a_frontier_cut_short_says_it_is_partial() -> None:
    whole = pareto(
        Request(plate_job(), space=SearchSpace(max_vpp=4), profile="workshop", engine=None),
        SolveSettings(time_limit_s=30.0),
    )
    assert whole.status == "optimal" and whole.proved and len(whole.frontier) > 2
    # with too little time for the first point: nothing, and not "the frontier is empty"
    empty = pareto(
        Request(plate_job(), space=SearchSpace(max_vpp=4), profile="workshop", engine=None),
        SolveSettings(time_limit_s=1e-4),
    )
    assert empty.status == "unknown" and empty.frontier == ()
    assert any(w.startswith("status unknown") for w in empty.warnings)


def test_pareto_answer_carries_status_and_completeness(api: TestClient) -> None:
    body = {**SEARCH_EXAMPLE, "time_limit_s": 1e-4}
    answer = api.post("/v1/pareto", json=body).json()
    assert (answer["status"], answer["complete"], answer["frontier"]) == ("unknown", False, [])
    whole = api.post("/v1/pareto", json=SEARCH_EXAMPLE).json()
    assert (whole["status"], whole["complete"]) == ("optimal", True)


# --- strict input -------------------------------------------------------------------------


def _set(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, leaf = path.split(".")
    target = body
    for key in parents:
        target = target.setdefault(key, {})
    target[leaf] = value
    return body


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("cluster.gpus", True, "cluster.gpus: Input should be a valid integer"),
        ("cluster.gpus", "16384", "cluster.gpus: Input should be a valid integer"),
        ("cluster.gpus", 16384.5, "cluster.gpus: Input should be a valid integer"),
        ("training.global_batch", False, "training.global_batch: Input should be a valid integer"),
        ("search.memory_limit_gb", "80", "search.memory_limit_gb: Input should be a valid number"),
        ("search.even_stages", 1, "search.even_stages: Input should be a valid boolean"),
        ("search.placement", ["dp"], "search.placement: Tuple should have at least 4 items"),
        ("model", "", "model: unknown model preset ''"),
    ],
)
def test_no_coercion_into_numbers_and_the_field_is_named(
    api: TestClient, path: str, value: Any, message: str
) -> None:
    body = _set(json.loads(json.dumps(SEARCH_EXAMPLE)), path, value)
    response = api.post("/v1/optimize", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == path and error["message"].startswith(message)


def test_an_integral_float_is_an_integer_as_json_schema_says(api: TestClient) -> None:
    body = _set(json.loads(json.dumps(PLATE_EXAMPLE)), "cluster.gpus", 16384.0)
    assert api.post("/v1/evaluate", json=body).status_code == 200


def test_nan_is_refused_as_not_finite(api: TestClient) -> None:
    text = json.dumps(SEARCH_EXAMPLE).replace('"max_vpp": 4', '"memory_limit_gb": NaN')
    response = api.post("/v1/optimize", content=text, headers={"content-type": "application/json"})
    error = response.json()["error"]
    assert response.status_code == 422 and error["field"] == "search.memory_limit_gb"
    assert "finite number" in error["message"]


def test_the_published_schema_bounds_what_it_admits(api: TestClient) -> None:
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    placement = schemas["SearchSpace"]["properties"]["placement"]["anyOf"][0]
    assert (placement["minItems"], placement["maxItems"]) == (4, 4)
    model = schemas["SearchRequest"]["properties"]["model"]["anyOf"]
    assert "" not in model[0]["enum"] and "llama3-405b" in model[0]["enum"]
    # bounds in JSON Schema's words, never pydantic's own `gt`/`le`
    dp = schemas["Layout"]["properties"]["dp"]["anyOf"][0]
    assert dp == {"type": "integer", "exclusiveMinimum": 0, "maximum": 10_000_000}
    text = json.dumps(schemas)
    assert all(f'"{bound}":' not in text for bound in ("gt", "ge", "lt", "le"))


def test_a_model_too_large_for_any_memory_is_infeasible_not_blamed_on_assumptions(
    api: TestClient,
) -> None:
    huge = {
        "num_layers": 10_000,
        "hidden_size": 1_000_000,
        "ffn_hidden_size": 16_000_000,
        "num_attention_heads": 1_000_000,
        "num_kv_heads": 1_000_000,
        "vocab_size": 10_000_000,
    }
    body = {**SEARCH_EXAMPLE, "model": huge, "cluster": {"gpus": 64}, "profile": "standard"}
    body["engine"] = "generic"  # memory alone, not also an engine's layer split
    answer = api.post("/v1/optimize", json=body).json()
    assert answer["status"] == "infeasible"
    (conflict,) = answer["conflict"]
    assert (
        conflict["name"] == "memory_limit"
        and "every layout needs more than" in conflict["description"]
    )


# --- the command line -----------------------------------------------------------------------

PLATE_SEARCH = ["--model", "llama3-70b", "--gpus", "1024"]


def test_exit_status_says_what_was_proved(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["optimize", *PLATE_SEARCH, "--time-limit-s", "0.0001", "--json"], capsys)
    assert (status, json.loads(out)["status"]) == (4, "unknown")
    status, out, _ = run(["optimize", "--model", "llama3-405b", "--gpus", "64", "--json"], capsys)
    assert (status, json.loads(out)["status"]) == (3, "infeasible")
    status, _, _ = run(["pareto", *PLATE_SEARCH, "--time-limit-s", "0.0001"], capsys)
    assert status == 4


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        run(["--version"], capsys)
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("layoutopt ")


def test_spec_from_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(PLATE_EXAMPLE)))
    status, out, _ = run(["evaluate", "--spec", "-", "--json"], capsys)
    assert status == 0 and json.loads(out)["mfu"] == 0.4255


@pytest.mark.parametrize(
    ("content", "flags", "message"),
    [
        (b"\xbb\x00\xfe binary", [], "is not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, [], "nests JSON too deeply"),
        (json.dumps({**PLATE_EXAMPLE, "layout": 5}).encode(), ["--tp", "2"], "'layout' in the spec must be an object"),
        (json.dumps({**PLATE_EXAMPLE, "assumptions": []}).encode(), ["--assume", "kernel_efficiency=0.5"], "'assumptions' in the spec must be an object"),
        (b'{"model": "llama3-8b", "cluster": {"gpus": NaN}}', [], "is not valid JSON: NaN is not a JSON number"),
    ],
)  # fmt: skip
def test_unusable_spec_files_exit_2_with_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    flags: list[str],
    message: str,
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_bytes(content)
    status, out, err = run(["evaluate", "--spec", str(spec), *flags], capsys)
    assert status == 2 and out == ""
    assert message in err and "internal error" not in err and "Traceback" not in err


def test_errors_are_json_on_stderr_under_json(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(["evaluate", "--model", "llama3-8b", "--gpus", "0", "--json"], capsys)
    assert status == 2 and out == ""
    error = json.loads(err)["error"]
    assert error["field"] == "cluster.gpus" and error["code"] == "invalid_request"


def test_serve_refuses_a_port_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        run(["serve", "--port", "99999"], capsys)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "port must be 1-65535, got 99999" in err and "Traceback" not in err


def test_explain_false_answers_the_layout_alone(
    api: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    full = api.post("/v1/optimize", json=SEARCH_EXAMPLE).json()
    bare = api.post("/v1/optimize", json={**SEARCH_EXAMPLE, "explain": False}).json()
    assert bare["best"] == full["best"] and bare["status"] == full["status"] == "optimal"
    assert full["binding"] and full["relaxations"]
    assert (bare["binding"], bare["relaxations"], bare["choices"]) == ([], [], [])
    assert bare["explanations_complete"] is False  # nothing was worked out, so none claimed
    assert (bare["explained"], full["explained"]) == (False, True)
    status, out, _ = run(["optimize", *PLATE_SEARCH, "--no-explain", "--json"], capsys)
    assert status == 0 and json.loads(out)["relaxations"] == []
