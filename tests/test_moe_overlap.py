"""Megatron-Core's EP all-to-all overlap (overlap_moe_expert_parallel_comm) and where a job on
NVL72 racks places its ranks: figures worked by hand from the schedule's warm-up count and the
layer's compute (docs/cost-model.md, 'Expert all-to-all')."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from models.errors import InvalidSpec
from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.costmodel.standard import times as tim
from optimizer.engines import engine_assumptions, get_engine


def test_paired_share_is_what_the_warm_up_leaves() -> None:
    # interleaved, p 4, v 4, m 64: 256 chunk forwards, 2*3 + 3*4 + 1 = 19 alone
    assert tim.paired_pass_share(64, 4, 4) == pytest.approx(237 / 256)
    # no pipeline: the first micro-batch's forward alone, 7 of 8 paired
    assert tim.paired_pass_share(8, 1, 1) == pytest.approx(7 / 8)
    # a step no longer than the warm-up pairs nothing
    assert tim.paired_pass_share(2, 4, 4) == 0.0


def test_paired_all_to_all_hides_under_the_compute_it_pairs_with() -> None:
    # 1 s of all-to-all beside 3 s of compute, slowdown 0.2: hidden but for 0.2 s; half paired
    assert tim.paired_all_to_all_s(1.0, 3.0, 0.5, 0.2) == pytest.approx(0.5 * 0.2 + 0.5 * 1.0)
    # 5 s beside 1 s: the compute hides 0.8 of a second (its share left after the slowdown)
    assert tim.paired_all_to_all_s(5.0, 1.0, 1.0, 0.2) == pytest.approx(4.2)


def deepseek_job(gpus: int = 512, domain: int | None = None) -> TrainingJob:
    return TrainingJob(
        model=model_preset("deepseek-v3-shaped"),
        cluster=ClusterSpec(
            gpus=gpus, gpu=gpu_preset("gb200"), gpus_per_node=4, nvlink_domain=domain
        ),
        training=TrainingSpec(global_batch=4096, seq_len=4096, precision="mxfp8"),
    )


def priced(job: TrainingJob, layout: Layout, **settings: object) -> dict[str, float]:
    engine = get_engine("megatron", settings)
    a = engine_assumptions(engine, CostAssumptions(), job.training.precision)
    return dict(evaluate(job, layout, "standard", a).times_s)


# Megatron-Core's rank order: ep's ranks are data-parallel ones, pp outermost
MCORE_ORDER = ("tp", "cp", "dp", "pp")
LAYOUT = Layout(tp=2, pp=4, vpp=4, ep=32, zero=1, recompute="selective", placement=MCORE_ORDER)


def test_the_setting_hides_the_all_to_all_in_the_paired_passes() -> None:
    job = deepseek_job()
    off = priced(job, LAYOUT, overlap_moe_expert_parallel_comm=False)
    on = priced(job, LAYOUT, overlap_moe_expert_parallel_comm=True)
    # the newest version's export writes it where it runs: the bare engine prices it
    assert priced(job, LAYOUT) == on
    slowdown = CostAssumptions().overlap_compute_slowdown
    whole, compute = off["moe_all_to_all"], off["matmul"] + off["attention"]
    # dp 64: 4096 / 64 = 64 micro-batches, 237 of 256 chunk passes paired (as above)
    hidden = max(whole - (1 - slowdown) * compute, slowdown * whole)
    expected = 237 / 256 * hidden + 19 / 256 * whole
    assert on["moe_all_to_all"] == pytest.approx(expected, rel=1e-9)
    assert on["moe_all_to_all"] < 0.5 * whole
    # what Megatron-Core refuses runs unpaired: a pipeline without interleaving, full recompute
    for refused in (
        LAYOUT.model_copy(update={"vpp": 1}),
        LAYOUT.model_copy(update={"recompute": "full"}),
    ):
        assert priced(job, refused, overlap_moe_expert_parallel_comm=True)[
            "moe_all_to_all"
        ] == pytest.approx(
            priced(job, refused, overlap_moe_expert_parallel_comm=False)["moe_all_to_all"]
        )


def test_versions_before_the_overlap_refuse_it() -> None:
    with pytest.raises(InvalidSpec, match="overlap_moe_expert_parallel_comm"):
        get_engine("megatron@core_r0.8.0", {"overlap_moe_expert_parallel_comm": True})


def export_text(api: TestClient, engine: str, layout: dict[str, object]) -> str:
    body = {
        "model": "deepseek-v3-shaped",
        "cluster": {"gpus": 512, "gpu": "gb200", "gpus_per_node": 4},
        "training": {"global_batch": 4096, "seq_len": 4096},
        "layout": layout,
        "engine": engine,
        "engine_settings": {"overlap_moe_expert_parallel_comm": True},
    }
    answer = api.post("/v1/export", json=body)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["text"])


def test_the_exports_write_the_overlap_where_it_runs(api: TestClient) -> None:
    layout = {"tp": 2, "pp": 4, "vpp": 4, "ep": 32, "zero": 1, "recompute": "selective"}
    assert "--overlap-moe-expert-parallel-comm" in export_text(api, "megatron", layout)
    nemo = export_text(api, "nemo", layout).splitlines()
    assert "comm_overlap.overlap_moe_expert_parallel_comm=true" in nemo
    # Megatron-Core refuses it beside the shared-expert overlap DeepSeek-V3's provider sets
    assert "model.moe_shared_expert_overlap=false" in nemo
    # without interleaving Megatron-Core asserts: the flag is left off, as it is priced
    plain = export_text(api, "megatron", layout | {"vpp": 1})
    assert "--overlap-moe-expert-parallel-comm" not in plain


def test_a_job_fills_power_of_two_groups_of_an_nvl72_rack() -> None:
    gb200 = gpu_preset("gb200")
    assert ClusterSpec(gpus=512, gpu=gb200, gpus_per_node=4).job_nvlink_domain == 64
    assert ClusterSpec(gpus=8192, gpu=gb200, gpus_per_node=4).job_nvlink_domain == 64
    # whole racks are taken as they are; a stated 72 is the rack, the job still runs 64 a rack
    assert ClusterSpec(gpus=576, gpu=gb200, gpus_per_node=4).job_nvlink_domain == 72
    stated = ClusterSpec(gpus=512, gpu=gb200, gpus_per_node=4, nvlink_domain=72)
    assert stated.job_nvlink_domain == 64
    # tp 2 x ep 32 spans 64 ranks: inside a rack, the all-to-all on NVLink alone; on 8 whole
    # racks of 72 (2,304 GPUs, dp 288) the groups from rank 64 on straddle two and cross the network
    on_racks = priced(deepseek_job(), LAYOUT)["moe_all_to_all"]
    assert on_racks == pytest.approx(priced(deepseek_job(domain=64), LAYOUT)["moe_all_to_all"])
    whole_racks = deepseek_job(2304).model_copy(
        update={"training": TrainingSpec(global_batch=4608, seq_len=4096, precision="mxfp8")}
    )
    assert on_racks < priced(whole_racks, LAYOUT)["moe_all_to_all"] / 2


def test_the_overlaps_peak_activations_are_1f1bs() -> None:
    job = deepseek_job()

    def activations(**settings: object) -> float:
        engine = get_engine("megatron", settings)
        a = engine_assumptions(engine, CostAssumptions(), job.training.precision)
        return float(evaluate(job, LAYOUT, "standard", a).memory.activations)

    # the overlap warms up with one chunk forward more (19 + 1 on the first rank), then runs
    # each forward beside a backward that frees a layer as the forward builds one: its peak is
    # the 20 chunks 1F1B holds after its own 20th forward
    assert activations(overlap_moe_expert_parallel_comm=True) == activations(
        overlap_moe_expert_parallel_comm=False
    )


def test_bridges_performance_script_flag_prices_the_same_overlap() -> None:
    job = deepseek_job()

    def a2a(engine: str, **settings: object) -> float:
        a = engine_assumptions(get_engine(engine, settings), CostAssumptions(), "mxfp8")
        return float(evaluate(job, LAYOUT, "standard", a).times_s["moe_all_to_all"])

    assert a2a("nemo", moe_a2a_overlap=True) == a2a("nemo", overlap_moe_expert_parallel_comm=True)
    # Megatron-Bridge 0.4.2 (NeMo 26.04.01) leaves it off unless a recipe sets it, with the
    # alltoall dispatcher the MoE recipes set
    recipe = {"moe_token_dispatcher_type": "alltoall"}
    assert a2a("nemo@26.04.01", moe_a2a_overlap=True, **recipe) < a2a("nemo@26.04.01", **recipe)
    # beside its default allgather dispatcher Megatron-Core refuses the overlap: unpaired
    assert a2a("nemo@26.04.01", moe_a2a_overlap=True) == a2a("nemo@26.04.01")
    with pytest.raises(InvalidSpec, match="moe_a2a_overlap"):
        get_engine("nemo@24.09", {"moe_a2a_overlap": True})
    with pytest.raises(InvalidSpec, match="moe_a2a_overlap"):
        get_engine("megatron", {"moe_a2a_overlap": True})


def test_before_blackwell_tensor_parallelism_keeps_the_all_to_all_unpaired(
    api: TestClient,
) -> None:
    def h100_job() -> TrainingJob:
        return TrainingJob(
            model=model_preset("deepseek-v3-shaped"),
            cluster=ClusterSpec(gpus=512, gpu=gpu_preset("h100-sxm")),
            training=TrainingSpec(global_batch=4096, seq_len=4096, precision="fp8"),
        )

    # tp 2 on H100 runs with CUDA_DEVICE_MAX_CONNECTIONS=1: the overlap is priced unpaired
    on = priced(h100_job(), LAYOUT, overlap_moe_expert_parallel_comm=True)["moe_all_to_all"]
    off = priced(h100_job(), LAYOUT, overlap_moe_expert_parallel_comm=False)["moe_all_to_all"]
    assert on == off
    # without tensor or context parallelism the streams run apart on H100 too
    tp1 = LAYOUT.model_copy(update={"tp": 1})
    on = priced(h100_job(), tp1, overlap_moe_expert_parallel_comm=True)["moe_all_to_all"]
    assert on < priced(h100_job(), tp1, overlap_moe_expert_parallel_comm=False)["moe_all_to_all"]
    body = {
        "model": "deepseek-v3-shaped",
        "cluster": {"gpus": 512, "gpu": "h100-sxm"},
        "training": {"global_batch": 4096, "seq_len": 4096},
        "layout": {"tp": 2, "pp": 4, "vpp": 4, "ep": 32, "zero": 1, "recompute": "selective"},
        "engine": "megatron",
    }
    text = api.post("/v1/export", json=body).json()["text"]
    assert "--overlap-moe-expert-parallel-comm" not in text
