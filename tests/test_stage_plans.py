"""Stage plans: the cost model's per-rank pricing agrees with the profile on the plans a
layout implies, and the CP-SAT stage search agrees with the exhaustive oracle."""

from __future__ import annotations

import json

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from api.schemas import StagesRequest, stages_answer
from models.errors import InvalidSpec
from models.layout import Layout, resolve_layout
from models.stage_plan import StagePlan
from optimizer import Request
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.costmodel import stage_plans as sp
from optimizer.engines import get_engine
from optimizer.search import SearchSpace, SolveSettings
from optimizer.searches import prepare_search, stage_plans
from optimizer.staging import search_stage_plans
from optimizer.staging.bounds import least_busy_units, step_bound_s
from optimizer.staging.oracle import ORACLE_MODEL, best_plan_exhaustive, compositions
from optimizer.staging.search import solve_candidate
from optimizer.staging.tables import plan_tables
from tests.helpers import NO_RUNTIME, plate_job

A = CostAssumptions()
SMALL = ORACLE_MODEL


def small_job(gpus: int = 8):
    return plate_job(gpus, SMALL, global_batch=32)


@pytest.mark.parametrize(
    "layout",
    [
        Layout(tp=8, pp=16, vpp=4, zero=1, recompute="selective"),  # Llama 3's 7, 8, ..., 8, 7
        Layout(tp=8, pp=8, zero=1, recompute="full"),  # 126 = 15 + 6 x 16 + 15
        Layout(tp=4, pp=16, cp=8, vpp=4, zero=1),
        Layout(tp=8, pp=2, zero=3, recompute="selective"),
        Layout(tp=8, pp=1, zero=1),
    ],
)
def test_even_plan_prices_as_the_profile(layout: Layout) -> None:
    job = plate_job()
    layout = resolve_layout(layout, job)
    estimate = evaluate(job, layout, "standard", A)
    price = sp.price_plan(job, A, layout, sp.even_plan(job, layout))
    assert price.mfu == pytest.approx(estimate.mfu, rel=1e-12)
    assert price.memory_bytes == pytest.approx(estimate.memory.total, rel=1e-12)
    assert price.step_time_s == pytest.approx(estimate.step_time_s, rel=1e-12)


def test_compositions_count() -> None:
    # 8 layers on 4 ranks of at least 1: C(7, 3) = 35; at least 2: only 2, 2, 2, 2
    assert len(list(compositions(8, 4, 1))) == 35
    assert list(compositions(8, 4, 2)) == [(2, 2, 2, 2)]


def _tight_limit(job, layout: Layout) -> float:
    """A memory limit the even, no-recompute plan breaks: recompute must be placed."""
    even = sp.price_plan(job, A, layout, sp.even_plan(job, layout))
    return 0.9 * even.memory_bytes


@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize(
    "layout",
    [Layout(tp=1, pp=4, zero=1), Layout(tp=2, pp=4, vpp=2, zero=1), Layout(tp=1, pp=8, zero=0)],
)
def test_solver_finds_the_oracles_plan(layout: Layout, uniform: bool) -> None:
    job = small_job(8 * layout.tp * layout.pp // 4)
    layout = resolve_layout(layout, job)
    limit = _tight_limit(job, layout)
    # three modes on 4 ranks (81 choices a split), two on 8 (256): the oracle stays quick
    modes = (0, 1, 2) if layout.pp <= 4 else (0, 2)
    oracle = best_plan_exhaustive(job, A, layout, modes, uniform, limit)
    found, proved, rounding = solve_candidate(
        job, A, layout, modes, uniform, limit, SolveSettings(30.0)
    )
    assert oracle is not None and found is not None and proved
    assert found.price.step_time_s == pytest.approx(oracle.price.step_time_s, rel=1e-6)
    assert found.price.memory_bytes <= limit
    # the capacity bound and the step bound never exceed the optimum
    tables = plan_tables(job, A, sp.plan_terms(job, A, layout), modes, limit)
    busy = least_busy_units(tables, uniform)
    assert busy is not None
    assert step_bound_s(tables, busy) <= oracle.price.step_time_s * (1 + 1e-6)


@pytest.mark.parametrize("memory_limit_gb", [8.0, 9.0])
def test_the_search_is_the_oracle_over_every_layout(memory_limit_gb: float) -> None:
    # a space small enough to price every plan of every layout: tp 2 on 16 GPUs, one
    # micro-batch size, schedule and placement, recompute none or full per rank. At 8 GB no
    # even split fits and a plan does; at 9 GB a plan beats the best even split
    job = small_job(16)
    space = SearchSpace(
        tp=2,
        cp=1,
        zero_stages=[1],
        micro_batches=[1],
        schedules=["1f1b"],
        recompute=["none", "full"],
        placement=("tp", "cp", "pp", "dp"),
        memory_limit_gb=memory_limit_gb,
    )
    # the limits were set for the tensors: no runtime beside them (it is one constant a
    # layout, which shifts no plan against another)
    problem, costs = prepare_search(Request(job, space=space, assumptions=NO_RUNTIME, engine=None))
    result = search_stage_plans(problem, costs, time_limit_s=60)
    assert result.proved and result.best is not None
    even = result.even_best
    assert even is None or result.best.price.mfu > even.price.mfu * 1.01
    oracle = []
    for pp in (1, 2, 4, 8):
        for vpp in range(1, SMALL.num_layers // pp + 1):
            if vpp > 1 and pp == 1:
                continue
            layout = resolve_layout(Layout(tp=2, pp=pp, vpp=vpp, zero=1), job)
            found = best_plan_exhaustive(job, costs, layout, (0, 2), False, memory_limit_gb * 1e9)
            if found is not None:
                oracle.append(found.price.step_time_s)
    assert result.best.price.step_time_s == pytest.approx(min(oracle), rel=1e-6)
    # and what it answers is a plan the cost model prices as it says
    price = sp.price_plan(job, costs, result.best.layout, result.best.plan)
    assert price.step_time_s == pytest.approx(result.best.price.step_time_s, rel=1e-12)
    assert price.memory_bytes <= memory_limit_gb * 1e9


def test_the_plates_stage_search_is_proved() -> None:
    """405B on 16,384 H100 under Megatron-LM: every layout solved or pruned by its bound."""
    problem, costs = prepare_search(Request(plate_job(), engine=get_engine("megatron")))
    result = search_stage_plans(problem, costs, time_limit_s=120, engine="megatron")
    assert result.proved and result.best is not None and result.even_best is not None
    assert result.best.price.mfu >= result.even_best.price.mfu
    assert result.space_size > 10**12
    assert result.best.plan.uniform_recompute  # Megatron-Core: one recompute setting
    assert result.solved + result.pruned == result.layouts


def test_engines_say_what_a_plan_may_be() -> None:
    problem, costs = prepare_search(Request(small_job(), engine=get_engine("torchtitan")))
    with pytest.raises(InvalidSpec, match="per-rank layer split"):
        search_stage_plans(problem, costs, engine="torchtitan")
    problem, costs = prepare_search(Request(small_job(), engine=get_engine("megatron")))
    with pytest.raises(InvalidSpec, match="recompute once"):
        search_stage_plans(problem, costs, engine="megatron", per_stage_recompute=True)


def test_a_plan_that_misplaces_layers_is_refused() -> None:
    job = small_job()
    layout = resolve_layout(Layout(tp=1, pp=4), job)
    with pytest.raises(InvalidSpec, match="places 9 layers"):
        sp.price_plan(job, A, layout, StagePlan(layers=(3, 2, 2, 2), recompute=("none",) * 4))


def _stages_body() -> dict:
    return {
        "model": SMALL.model_dump(mode="json", exclude_defaults=True),
        "cluster": {"gpus": 16, "gpu": "h100-sxm"},
        "training": {"global_batch": 32, "seq_len": 8192},
        "search": {"tp": 2, "zero_stages": [1], "memory_limit_gb": 20.0},
        "engine": "generic",
    }


def test_stages_over_http_answers_a_plan_the_cost_model_prices(api) -> None:
    response = api.post("/v1/stages", json=_stages_body())
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "optimal" and answer["solver"]["proved_optimal"]
    best = answer["best"]
    layers = tuple(r["layers"] for r in best["ranks"])
    assert sum(layers) == SMALL.num_layers and len(layers) == best["layout"]["pp"]
    job = small_job(16)
    x = best["layout"]
    layout = resolve_layout(
        Layout(tp=x["tp"], pp=x["pp"], cp=x["cp"], vpp=x["vpp"], zero=x["zero"]), job
    )
    plan = StagePlan(layers=layers, recompute=tuple(r["recompute"] for r in best["ranks"]))
    price = sp.price_plan(job, A, layout, plan)  # the generic engine prices as the defaults
    assert best["mfu"] == pytest.approx(price.mfu, abs=1e-4)
    assert max(r["memory_gb"] for r in best["ranks"]) <= 20.0
    assert best["pipeline_layout"].startswith("E") and best["pipeline_layout"].endswith("L")


def test_stages_over_http_refuses_what_the_engine_cannot_launch(api) -> None:
    response = api.post("/v1/stages", json=_stages_body() | {"engine": "torchtitan"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "engine" and "per-rank layer split" in error["message"]


def test_stages_on_the_command_line(capsys, tmp_path) -> None:
    from tests.helpers import run_cli

    spec = tmp_path / "stages.json"
    spec.write_text(json.dumps(_stages_body()))
    status, out, _ = run_cli(["stages", "--spec", str(spec)], capsys)
    assert status == 0
    assert "status: optimal" in out and "--pipeline-model-parallel-layout" in out


def test_a_stage_search_too_large_is_refused_before_pricing() -> None:
    # the DeepSeek-V3-shaped preset on 16,384 GPUs at two micro-batch sizes has more than 4M
    # layouts to price (one placement a class): refused as soon as their count passes,
    # before any is priced
    job = plate_job(16384, "deepseek-v3-shaped")
    problem, costs = prepare_search(
        Request(job, space=SearchSpace(micro_batches=[1, 2]), engine=None)
    )
    with pytest.raises(InvalidSpec, match="more than 4,000,000 layouts"):
        search_stage_plans(problem, costs, time_limit_s=600)


def test_a_stage_search_out_of_time_claims_nothing() -> None:
    problem, costs = prepare_search(Request(plate_job(), engine=get_engine("megatron")))
    result = search_stage_plans(problem, costs, time_limit_s=1e-6, engine="megatron")
    assert not result.proved and result.best is None


def test_stages_over_http_out_of_time_is_unknown(api) -> None:
    body = _stages_body() | {"time_limit_s": 1e-6}
    answer = api.post("/v1/stages", json=body).json()
    assert answer["status"] == "unknown" and not answer["solver"]["proved_optimal"]


def _layout_chunks(layout: str) -> list[int]:
    """Decoder layers per chunk of a --pipeline-model-parallel-layout string, read by hand:
    chunks split by '|', 't' one layer, 't*k' k of them, E and L the embedding and loss."""
    chunks = []
    for chunk in layout.split("|"):
        body = chunk.removeprefix("E").removesuffix("L")
        chunks.append(0 if not body else int(body.partition("*")[2] or 1))
    return chunks


def test_the_plate_plan_exports_as_megatron_and_nemo_launch_it() -> None:
    body = {"model": "llama3-405b", "cluster": {"gpus": 16384}}
    for engine in ("megatron", "nemo"):
        request = StagesRequest.model_validate(body | {"engine": engine}).to_request()
        answer = stages_answer(request, stage_plans(request, SolveSettings(120)))
        best = answer.best
        assert best is not None and best.export is not None
        chunks = _layout_chunks(best.pipeline_layout)
        pp, vpp = best.layout.pp, best.layout.vpp
        assert len(chunks) == pp * vpp and min(chunks) >= 1 and sum(chunks) == 126
        # chunk v * pp + r is rank r's v-th: each rank's chunks add up to its layers
        for rank in best.ranks:
            assert sum(chunks[v * pp + rank.rank] for v in range(vpp)) == rank.layers
        text = best.export.text
        if engine == "megatron":
            assert f"--pipeline-model-parallel-layout '{best.pipeline_layout}'" in text
            assert "--num-virtual-stages-per-pipeline-rank" not in text  # the layout says it
        else:
            lines = [x for x in text.splitlines() if x and not x.startswith("#")]
            parsed = {
                o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(lines)
            }
            assert parsed["model.pipeline_model_parallel_layout"] == best.pipeline_layout


def test_a_stage_search_with_no_layout_is_infeasible(api) -> None:
    # tp 1, pp 1, cp 1 on 16,384 GPUs is dp 16,384: more replicas than the 2,048 sequences
    body = {
        "model": "llama3-405b",
        "cluster": {"gpus": 16384},
        "search": {"tp": 1, "pp": 1, "cp": 1},
        "engine": "megatron",
    }
    answer = api.post("/v1/stages", json=body).json()
    assert answer["status"] == "infeasible" and answer["best"] is None


def test_stages_are_priced_by_profile_standard_only(api) -> None:
    response = api.post("/v1/stages", json=_stages_body() | {"profile": "workshop"})
    assert response.status_code == 422
    assert "profile standard" in response.json()["error"]["message"]
