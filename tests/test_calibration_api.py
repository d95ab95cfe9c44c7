"""Calibration through its doors: `layoutopt calibrate` (file in, assumptions file out),
`POST /v1/calibrate` and `Client.calibrate`, each answering as the library fits the same runs,
and refusing bad input with the reason."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.cli import main
from api.client import Client
from api.http.app import create_app
from api.http.settings import Settings
from optimizer.calibration import calibrate
from optimizer.costmodel import CostAssumptions, kernel_efficiency
from tests.helpers import plate_job
from tests.test_calibration import SHAPES, TRUTH, synthetic

# --- the CLI -------------------------------------------------------------------------------


def runs_jsonl(tmp_path: Path) -> Path:
    lines = []
    for i, run in enumerate(synthetic(TRUTH, SHAPES[:3])):
        request = {
            "model": "llama3-8b",
            "cluster": {"gpus": run.job.cluster.gpus, "gpu": "h100-sxm"},
            "training": {"global_batch": run.job.training.global_batch, "seq_len": 8192},
            "layout": run.layout.model_dump(mode="json", exclude={"dp"}),
            "engine": "generic",  # as the library's runs (tests/test_calibration.py)
        }
        measured_ = {"step_time_s": run.step_time_s}
        if i == 0:
            measured_["peak_memory_gb"] = 60.0
        lines.append(
            json.dumps({"name": f"tp {run.layout.tp}", "request": request, "measured": measured_})
        )
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines) + "\n\n")
    return path


@pytest.fixture(scope="module")
def library_fit() -> float:
    """The kernel efficiency the library fits to the runs the round trips send, prior and
    all: what the CLI, the HTTP route and the client must each give back."""
    return calibrate(synthetic(TRUTH, SHAPES[:3])).fitted["kernel_efficiency"]


def test_cli_round_trip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], library_fit: float
) -> None:
    out = tmp_path / "calibrated.json"
    assert main(["calibrate", str(runs_jsonl(tmp_path)), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assumptions = json.loads(out.read_text())
    # as the library fits the same runs, prior and all: between the default and the truth
    # (the file holds its ratio to the runs' GPU's default: it prices that GPU as fitted)
    written = kernel_efficiency(
        plate_job(64, "llama3-8b"), CostAssumptions.model_validate(assumptions)
    )
    assert written == pytest.approx(library_fit, abs=5e-4)  # as written: a four-decimal ratio
    assert TRUTH["kernel_efficiency"] < library_fit < 0.6
    assert "leave-one-out" in captured.err and "pinned" in captured.err
    assert "memory" in captured.err  # the run with a peak memory is compared
    # the fitted kernel efficiency is a share of the runs' GPU's peak: the report says so
    assert "note: kernel_efficiency" in captured.err and "h100-sxm peak" in captured.err
    # and where it applies: the runs' engine, GPU, precision, kind of model and hidden size
    assert (
        "applies to requests under generic, on h100-sxm, in bf16, dense models, hidden sizes "
        "of 4,096; elsewhere its default" in captured.err
    )
    # the file is any request's `assumptions`: evaluate takes it as it stands
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "model": "llama3-8b",
                "cluster": {"gpus": 8},
                "profile": "standard",
                "assumptions": assumptions,
            }
        )
    )
    assert main(["evaluate", "--spec", str(spec), "--json"]) == 0
    # under megatron, the default engine, it lies outside the fit's reach: the answer says so
    (note,) = [
        w for w in json.loads(capsys.readouterr().out)["warnings"] if "kernel_efficiency" in w
    ]
    assert "megatron@core_r0.20.0, not generic" in note and "its default prices it" in note


def test_cli_json_prints_the_http_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", str(runs_jsonl(tmp_path)), "--json", "--no-loo"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert set(answer) == {"assumptions", "fit"}
    assert answer["fit"]["leave_one_out"] is None
    assert answer["fit"]["leave_one_out_note"] == "not asked for"
    statuses = {p["name"]: p["status"] for p in answer["fit"]["parameters"]}
    assert statuses["kernel_efficiency"] == "fitted"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 1 is not a JSON object"),
        (
            json.dumps({"request": {"model": "llama3-8b", "cluster": {"gpus": 8}}, "measured": {}}),
            "exactly one of",
        ),
        (
            json.dumps(
                {
                    "request": {"model": "llama3-8b", "cluster": {"gpus": 8}},
                    "measured": {"mfu": 0.4, "step_time_s": 3},
                }
            ),
            "exactly one of",
        ),
        (
            json.dumps(
                {
                    "request": {"model": "llama3-8b", "cluster": {"gpus": 8}, "engine": "jax"},
                    "measured": {"mfu": 0.4},
                }
            ),
            "engine",
        ),
    ],
)
def test_cli_refuses_a_bad_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(line + "\n")
    assert main(["calibrate", str(path)]) == 2
    assert message in capsys.readouterr().err


def runs_csv(tmp_path: Path) -> Path:
    """The runs of runs_jsonl as a spreadsheet would hold them: a run a row, each header a
    dotted path (the name, the request's fields, the measured figures)."""
    runs = [json.loads(line) for line in runs_jsonl(tmp_path).read_text().split("\n") if line]
    headers = ["name", "model", "cluster.gpus", "cluster.gpu", "training.global_batch"]
    headers += ["training.seq_len", "engine", "measured.step_time_s", "measured.peak_memory_gb"]
    layout_keys = list(runs[0]["request"]["layout"])
    headers += [f"layout.{key}" for key in layout_keys]

    def cell(run: dict[str, Any], header: str) -> str:
        node: Any = run if header == "name" or header.startswith("measured.") else run["request"]
        for part in header.split("."):
            if not isinstance(node, dict) or part not in node:
                return ""  # an empty cell: the field unset
            node = node[part]
        return json.dumps(node) if isinstance(node, list) else str(node)

    path = tmp_path / "runs.csv"
    with path.open("w", newline="") as file:  # quoted where a cell holds a comma
        writer = csv.writer(file)
        writer.writerow(headers)
        writer.writerows([cell(run, h) for h in headers] for run in runs)
    return path


def test_cli_takes_the_runs_as_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the issue's `layoutopt calibrate runs.csv`: the same runs fit the same assumptions
    from_jsonl, from_csv = tmp_path / "jsonl.json", tmp_path / "csv.json"
    assert main(["calibrate", str(runs_jsonl(tmp_path)), "--out", str(from_jsonl)]) == 0
    jsonl_report = capsys.readouterr().err
    assert main(["calibrate", str(runs_csv(tmp_path)), "--out", str(from_csv)]) == 0
    csv_report = capsys.readouterr().err
    assert json.loads(from_csv.read_text()) == json.loads(from_jsonl.read_text())
    assert "fitted kernel_efficiency" in csv_report
    assert csv_report.replace(str(from_csv), "") == jsonl_report.replace(str(from_jsonl), "")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model,cluster.gpus\nllama3-8b,8,9\n", "line 2 has more cells than the header"),
        (
            "model,cluster.gpus,measured.mfu\nllama3-8b,8,0.4\nllama3-8b,eight,0.4\n",
            "line 3: request.cluster.gpus",
        ),
        ("model,,measured.mfu\nllama3-8b,8,0.4\n", "needs a header row"),
        (
            "model,cluster,cluster.gpus,measured.mfu\nllama3-8b,8,8,0.4\n",
            "line 2: cannot set cluster.gpus: cluster is 8",
        ),
        ("model,cluster.gpus,measured.mfu\n", "holds no runs"),
        ("model,cluster.gpus,measured.mfu\n  ,  , \n", "holds no runs"),  # blank cells
        ("model,cluster.gpus,measured.mfu\nllama3-8b,8\n", "exactly one of"),  # a short row
    ],
)
def test_cli_refuses_a_bad_csv_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(text)
    assert main(["calibrate", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_a_csv_a_spreadsheet_saved_with_a_byte_order_mark_reads_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = runs_csv(tmp_path)
    marked = tmp_path / "marked.csv"
    marked.write_text("\ufeff" + plain.read_text(), encoding="utf-8")
    assert main(["calibrate", str(plain), "--json", "--no-loo"]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main(["calibrate", str(marked), "--json", "--no-loo"]) == 0
    assert json.loads(capsys.readouterr().out) == expected


def test_csv_cells_read_as_json_would_give_them() -> None:
    from api.cli.calibrate import csv_value

    assert [csv_value(c) for c in ("8", "0.45", "1e3", "true", "False", "megatron")] == [
        8, 0.45, 1000.0, True, False, "megatron",
    ]  # fmt: skip
    assert csv_value('["tp", "cp", "dp", "pp"]') == ["tp", "cp", "dp", "pp"]


# --- HTTP and the client -------------------------------------------------------------------


@pytest.fixture
def api(make_api: Callable[..., TestClient]) -> TestClient:
    # the time limit bounds a calibration's whole call, refits included: room for the three
    # runs' fit and refits on a loaded machine (tests/test_reliability_deadlines.py cuts it)
    return make_api(solver_time_limit_s=60)


def http_body(tmp_path: Path) -> dict[str, Any]:
    return {
        "runs": [json.loads(line) for line in runs_jsonl(tmp_path).read_text().split("\n") if line]
    }


def test_http_round_trip(api: TestClient, tmp_path: Path) -> None:
    answer = api.post("/v1/calibrate", json=http_body(tmp_path))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    CostAssumptions.model_validate(body["assumptions"])
    fit = body["fit"]
    assert len(fit["runs"]) == 3 and fit["rms_log_error"] < fit["rms_log_error_before"]
    assert len(fit["leave_one_out"]["runs"]) == 3
    assert fit["runs"][0]["memory_error"] is not None
    # the answer's assumptions priced through /v1/evaluate: as the same scale stated by hand
    # within the fit's reach (the runs' engine and GPU), as the defaults outside it (A100)
    fitted = next(p for p in fit["parameters"] if p["name"] == "kernel_efficiency")
    assert fitted["applies_to"].startswith("requests under generic, on h100-sxm")
    scale = {"kernel_efficiency_scale": body["assumptions"]["kernel_efficiency_scale"]}

    def step_s(assumptions: dict[str, Any], gpu: str) -> tuple[float, list[str]]:
        evaluate_body = {
            "model": "llama3-8b",
            "cluster": {"gpus": 8, "gpu": gpu},
            "engine": "generic",
            "profile": "standard",
            "assumptions": assumptions,
        }
        answer = api.post("/v1/evaluate", json=evaluate_body)
        assert answer.status_code == 200, answer.text
        return answer.json()["step_time_s"], answer.json()["warnings"]

    assert step_s(body["assumptions"], "h100-sxm")[0] == step_s(scale, "h100-sxm")[0]
    assert step_s(body["assumptions"], "h100-sxm")[0] != step_s({}, "h100-sxm")[0]
    outside, warnings = step_s(body["assumptions"], "a100-80gb")
    assert outside == step_s({}, "a100-80gb")[0] != step_s(scale, "a100-80gb")[0]
    assert any("on a100-80gb, not h100-sxm" in w for w in warnings)


def test_http_refuses_bad_bodies(api: TestClient) -> None:
    assert api.post("/v1/calibrate", json={"runs": []}).status_code == 422
    two_profiles = {
        "runs": [
            {
                "request": {"model": "llama3-8b", "cluster": {"gpus": 8}, "profile": p},
                "measured": {"mfu": 0.4},
            }
            for p in ("standard", "workshop")
        ]
    }
    answer = api.post("/v1/calibrate", json=two_profiles)
    assert answer.status_code == 422 and "same profile" in answer.json()["error"]["message"]


def test_calibrate_is_pooled_like_the_searches(tmp_path: Path) -> None:
    # no worker and no queue: the pooled route is refused before its body is parsed
    app = create_app(Settings(workers=1, queue_depth=0))
    with TestClient(app) as api:
        slot = app.state.solver.pool.reserve()  # the only slot taken
        try:
            answer = api.post("/v1/calibrate", json=http_body(tmp_path))
            assert answer.status_code == 503 and "Retry-After" in answer.headers
        finally:
            slot.release()


def test_client_calibrate(api: TestClient, tmp_path: Path, library_fit: float) -> None:
    client = Client("http://testserver", transport=api._transport)
    answer = client.calibrate(http_body(tmp_path))
    written = CostAssumptions.model_validate(answer.assumptions)
    assert kernel_efficiency(plate_job(64, "llama3-8b"), written) == pytest.approx(
        library_fit, abs=5e-4
    )
    assert answer.fit.leave_one_out is not None


HEADER = "model,cluster.gpus,training.global_batch,measured.mfu,layout.tp,layout.placement\n"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.text(
        alphabet=st.sampled_from(list(',."[]{}\n \t-:;0123456789abcdefgtrue')), max_size=80
    )
)
def test_no_csv_text_gives_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> None:
    # whatever a spreadsheet holds, the answer is a fit or a bad request naming why, never a
    # trace (exit 1)
    path = tmp_path / "runs.csv"
    path.write_text(HEADER + "llama3-8b,8," + body)
    assert main(["calibrate", str(path), "--no-loo", "--json"]) in (0, 2)
    capsys.readouterr()
