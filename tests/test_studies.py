"""Studies in process: the spec and its expansion, stable keys, checks that name the field,
rows (failures too), the writers and their resume, plots, and the executor loop."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from api.scenarios import scenario_request
from optimizer import Request, SolveSettings
from optimizer.engines import get_engine
from optimizer.search import SearchSpace
from optimizer.searches import stage_plans
from optimizer.staging.oracle import ORACLE_MODEL
from optimizer.studies import (
    RowWriter,
    ScenarioError,
    StudyError,
    StudySpec,
    check_count,
    check_values,
    columns,
    existing_rows,
    expand,
    plot_study,
    run_scenario,
    run_settings,
    run_study,
    scheduler_address,
    sidecar_of,
    whole_node_counts,
    with_overrides,
)
from tests.helpers import NO_RUNTIME, plate_job

BASE: dict[str, Any] = {
    "model": "llama3-8b",
    "cluster": {"gpus": 8, "gpu": "h100-sxm"},
    "training": {"global_batch": 64, "seq_len": 2048},
    "explain": False,
    "time_limit_s": 5,
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def small_spec(**extra: Any) -> StudySpec:
    data = {
        "base": BASE,
        "grid": {"model": ["llama3-8b", "mistral-7b"], "cluster.gpus": [8, 16]},
        "train_tokens": 1e12,
        "gpu_hour_cost": 2.0,
    }
    return StudySpec.model_validate(data | extra)


def test_the_grid_is_a_product_and_scenarios_add_to_it() -> None:
    spec = small_spec(scenarios=[{"training.seq_len": 4096}, {"model": "llama3-8b"}])
    scenarios = expand(spec)
    # 2 x 2 grid + 2 explicit, of which {"model": "llama3-8b"} is the base again (8 GPUs),
    # the grid's first scenario: dropped as computing the same
    assert spec.count() == 6 and len(scenarios) == 5
    assert [s.index for s in scenarios] == list(range(5))
    assert scenarios[0].request["cluster"] == {"gpus": 8, "gpu": "h100-sxm"}
    assert scenarios[3].overrides == {"model": "mistral-7b", "cluster.gpus": 16}
    assert scenarios[4].request["training"]["seq_len"] == 4096


def test_keys_are_stable_and_ignore_the_order_of_the_spec() -> None:
    keys = {s.key for s in expand(small_spec())}
    flipped = small_spec(grid={"cluster.gpus": [16, 8], "model": ["mistral-7b", "llama3-8b"]})
    assert {s.key for s in expand(flipped)} == keys
    assert len(keys) == 4
    evaluate = small_spec(compute="evaluate", base={**BASE, "layout": {"tp": 1}})
    assert not {s.key for s in expand(evaluate)} & keys  # another computation, other keys


def test_overrides_that_cannot_be_laid_on_say_why() -> None:
    assert with_overrides(BASE, {"search.memory_limit_gb": 40})["search"] == {"memory_limit_gb": 40}
    with pytest.raises(ScenarioError, match='cluster.gpu is "h100-sxm", not an object'):
        with_overrides(BASE, {"cluster.gpu.memory_gb": 40})


@pytest.mark.parametrize(
    ("grid", "field", "words"),
    [
        ({"cluster.gpus": [8, -16]}, "grid.cluster.gpus[1]", "greater than 0"),
        ({"cluster.gpuz": [8]}, "grid.cluster.gpuz[0]", "unknown field"),
        ({"model": ["llama3-8b", "gpt-9"]}, "grid.model[1]", "unknown model preset 'gpt-9'"),
        ({"search.memory_limit_gb": ["80"]}, "grid.search.memory_limit_gb[0]", "valid number"),
        ({"cluster.gpu.memory_gb": [40]}, "grid.cluster.gpu.memory_gb[0]", "not an object"),
    ],
)
def test_a_bad_path_or_value_names_its_field(grid: dict, field: str, words: str) -> None:
    spec = small_spec(grid=grid)
    with pytest.raises(StudyError) as raised:
        check_values(spec, scenario_request)
    assert raised.value.field == field and words in raised.value.message


def test_a_bad_base_names_the_base_and_a_bad_explicit_scenario_its_position() -> None:
    with pytest.raises(StudyError) as raised:
        check_values(small_spec(base={**BASE, "profile": "nope"}), scenario_request)
    assert raised.value.field == "base.profile"
    # a field the grid supplies need not be in the base
    check_values(small_spec(base={"cluster": {"gpus": 8}, "explain": False}), scenario_request)
    spec = small_spec(grid={}, scenarios=[{"cluster.gpus": 8}, {"training.seq_len": 0}])
    with pytest.raises(StudyError) as raised:
        check_values(spec, scenario_request)
    assert raised.value.field == "scenarios[1]"


def test_the_count_is_bounded_with_the_numbers() -> None:
    spec = small_spec(grid={"cluster.gpus": list(range(8, 8 * 51, 8)), "model": ["a"] * 30})
    with pytest.raises(StudyError, match=r"1,500 scenarios \(a grid of 50 x 30.*limit is 1,000"):
        check_count(spec, 1000)
    with pytest.raises(ValueError, match="grid.cluster.gpus holds 0 values"):
        small_spec(grid={"cluster.gpus": []})


def test_a_row_has_the_layout_memory_throughput_and_time_to_train() -> None:
    spec = small_spec()
    settings = run_settings(spec, scenario_request)
    row = run_scenario(expand(spec)[1], settings)  # llama3-8b on 16 GPUs
    assert list(row) == columns(settings.override_paths)
    assert (row["status"], row["model"], row["cluster.gpus"], row["gpus"]) == (
        "optimal",
        "llama3-8b",
        16,
        16,
    )
    assert row["tp"] * row["pp"] * row["cp"] * row["dp"] == 16
    tensors = ("weights", "gradients", "optimizer", "activations")
    parts = sum(row[f"memory_{p}_gb"] for p in (*tensors, "fragmentation", "runtime"))
    assert row["memory_runtime_gb"] > 0  # the CUDA context and NCCL's buffers
    assert abs(parts - row["memory_total_gb"]) < 0.03 and row["fits"] is True
    assert row["tokens_per_s"] == pytest.approx(row["tokens_per_s_per_gpu"] * 16, rel=1e-3)
    seconds = 1e12 / row["tokens_per_s"]
    assert row["days_to_train"] == pytest.approx(seconds / 86400, rel=1e-3)
    assert row["gpu_hours"] == pytest.approx(16 * seconds / 3600, rel=1e-3)
    assert row["cost"] == pytest.approx(2.0 * row["gpu_hours"], rel=1e-3)
    assert row["binding"] is None  # explanations off


def test_explanations_name_the_binding_rule_and_what_relaxing_it_buys() -> None:
    spec = small_spec(base={**BASE, "explain": True, "search": {"memory_limit_gb": 30}})
    row = run_scenario(expand(spec)[0], run_settings(spec, scenario_request))
    assert row["status"] == "optimal" and row["binding"] == "memory_limit"
    assert row["binding_buys_mfu"] > 0
    # three figures each rounded to 4 decimals: their sum may be off by 1.5e-4
    assert row["binding_relaxed_mfu"] == pytest.approx(
        row["mfu"] + row["binding_buys_mfu"], abs=1.5e-4 + 1e-12
    )


def test_failures_are_rows_with_their_error_and_honest_statuses() -> None:
    evaluate = small_spec(
        compute="evaluate",
        base={k: v for k, v in BASE.items() if k not in ("explain", "time_limit_s")}
        | {"layout": {"tp": 8}},
        grid={"cluster.gpus": [8, 12]},
    )
    rows = [run_scenario(s, run_settings(evaluate, scenario_request)) for s in expand(evaluate)]
    assert [r["status"] for r in rows] == ["evaluated", "error"]
    assert "12" in rows[1]["error"] and rows[1]["mfu"] is None
    infeasible = small_spec(grid={"search.memory_limit_gb": [1]})
    row = run_scenario(expand(infeasible)[0], run_settings(infeasible, scenario_request))
    assert row["status"] == "infeasible" and row["tp"] is None and row["error"] is None


def test_pareto_rows_carry_their_frontier() -> None:
    spec = small_spec(compute="pareto", grid={"cluster.gpus": [8]})
    row = run_scenario(expand(spec)[0], run_settings(spec, scenario_request))
    frontier = json.loads(row["frontier"])
    assert row["status"] == "optimal" and row["frontier_points"] == len(frontier) > 1
    assert frontier[-1][1] == row["mfu"]  # the row's layout is the best-MFU end


def test_the_executor_loop_yields_every_row_once_with_few_in_flight() -> None:
    spec = small_spec()
    scenarios = expand(spec)
    with ThreadPoolExecutor(2) as pool:
        rows = list(run_study(scenarios, run_settings(spec, scenario_request), pool, 2))
    assert sorted(r["key"] for r in rows) == sorted(s.key for s in scenarios)


def _rows() -> tuple[list[dict], list[str]]:
    spec = small_spec(grid={"cluster.gpus": [8, 16], "search.memory_limit_gb": [1, 40.5]})
    settings = run_settings(spec, scenario_request)
    return [run_scenario(s, settings) for s in expand(spec)], columns(settings.override_paths)


@pytest.mark.parametrize("name", ["out.csv", "out.jsonl", "out.parquet"])
def test_each_format_reads_back_what_was_written(tmp_path: Path, name: str) -> None:
    rows, names = _rows()
    path = tmp_path / name
    writer = RowWriter(path, names, "new")
    for row in rows:
        writer.write(row)
    writer.finish()
    assert not sidecar_of(path).exists()
    back = existing_rows(path)
    assert back == rows
    with pytest.raises(StudyError, match="exists: pass --resume"):
        RowWriter(path, names, "new")


def test_resume_drops_a_row_cut_off_mid_write(tmp_path: Path) -> None:
    rows, names = _rows()
    path = tmp_path / "out.csv"
    with RowWriter(path, names, "new") as writer:
        writer.write(rows[0])
        writer.write(rows[1])
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # killed in the middle of the second row
    with RowWriter(path, names, "resume"):
        assert [r["key"] for r in existing_rows(path)] == [rows[0]["key"]]
    with pytest.raises(StudyError, match="another study's columns"):
        RowWriter(path, ["key", "other"], "resume")


def test_a_finished_parquet_study_resumes_through_a_new_sidecar(tmp_path: Path) -> None:
    rows, names = _rows()
    path = tmp_path / "out.parquet"
    writer = RowWriter(path, names, "new")
    writer.write(rows[0])
    writer.finish()
    writer = RowWriter(path, names, "resume")
    assert [r["key"] for r in existing_rows(path)] == [rows[0]["key"]]
    writer.write(rows[1])
    writer.finish()
    assert [r["key"] for r in existing_rows(path)] == [rows[0]["key"], rows[1]["key"]]


def test_plots_are_written_as_png_and_svg(tmp_path: Path) -> None:
    rows, _ = _rows()
    written = plot_study(rows, tmp_path, source="test")
    names = {path.name for path in written}
    assert {"scaling.png", "days_to_train.png", "memory_by_part.svg"} <= names
    for path in written:
        assert path.stat().st_size > 1000
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == PNG_MAGIC
    assert plot_study([r | {"status": "error", "mfu": None} for r in rows], tmp_path) == []


def test_pareto_studies_plot_their_frontiers(tmp_path: Path) -> None:
    spec = small_spec(compute="pareto", grid={"cluster.gpus": [8, 16]})
    settings = run_settings(spec, scenario_request)
    rows = [run_scenario(s, settings) for s in expand(spec)]
    assert (tmp_path / "frontiers.png") in plot_study(rows, tmp_path)


def test_executor_names_and_node_counts() -> None:
    assert scheduler_address("local") is None
    assert scheduler_address("dask://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert scheduler_address("tls://sched:8786") == "tls://sched:8786"
    with pytest.raises(StudyError, match="local or dask://HOST:PORT"):
        scheduler_address("ray://x")
    assert whole_node_counts(60, 100, 8) == [64, 72, 80, 88, 96]
    with pytest.raises(StudyError, match="125 whole-node counts lie from 8 to 1000"):
        whole_node_counts(8, 1000, 8)


def test_stage_rows_carry_each_ranks_layers_and_what_the_plan_buys() -> None:
    search = {
        "tp": 2,
        "cp": 1,
        "zero_stages": [1],
        "micro_batches": [1],
        "schedules": ["1f1b"],
        "recompute": ["none", "full"],
    }
    base = {
        "model": ORACLE_MODEL.model_dump(mode="json", exclude_defaults=True),
        "cluster": {"gpus": 16, "gpu": "h100-sxm"},
        "training": {"global_batch": 32, "seq_len": 8192},
        "engine": "generic",
        "search": search,
        "time_limit_s": 60,
        "assumptions": NO_RUNTIME.model_dump(exclude_unset=True),  # limits for tensors alone
    }
    spec = StudySpec.model_validate(
        {"compute": "stages", "base": base, "grid": {"search.memory_limit_gb": [8, 9]}}
    )
    rows = [run_scenario(s, run_settings(spec, scenario_request)) for s in expand(spec)]
    job = plate_job(16, ORACLE_MODEL, global_batch=32)
    for row, limit_gb in zip(rows, (8, 9), strict=True):
        assert row["status"] == "optimal" and row["error"] is None
        layers = json.loads(row["stage_layers"])
        assert sum(layers) == ORACLE_MODEL.num_layers and len(layers) == row["pp"]
        direct = stage_plans(
            Request(
                job,
                space=SearchSpace(**search, memory_limit_gb=limit_gb),
                assumptions=NO_RUNTIME,
                engine=get_engine("generic"),
            ),
            SolveSettings(time_limit_s=60),
        )
        assert direct.best is not None
        assert row["mfu"] == pytest.approx(direct.best.price.mfu, abs=1e-4)
        assert row["memory_total_gb"] <= limit_gb
    # at 8 GB no even split fits (no gain to state); at 9 GB the plan beats the best one
    assert rows[0]["even_mfu"] is None and rows[0]["stage_gain"] is None
    assert rows[1]["stage_gain"] > 0.01
