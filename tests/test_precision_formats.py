"""The GPUs and GEMM formats of 2025-26: the B300, GB300, MI325X, MI350X and MI355X presets
with their cited figures, GB200's and GB300's NVL72 domain, and training.precision mxfp8 and
nvfp4 under profile standard, each term against figures worked by hand from Transformer
Engine's recipes (docs/cost-model.md, "Precision"), with the refusals of GPUs that lack a
format as 422s naming the field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.cli.render import estimate_text
from api.schemas.answers import estimate_out
from models.errors import InvalidSpec
from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer.calibration.runs import peak_mfu
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.costmodel.standard import precision as prec
from optimizer.costmodel.standard.compute import (
    elementwise_kernels,
    elementwise_s,
    gemm_rates,
    gemm_s,
)
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.engines import get_engine
from optimizer.request import Request
from optimizer.searches import evaluate_on

# Llama 3 70B, by hand: h 8192, 64 heads of 128, 8 KV heads, FFN 28672 (SwiGLU).
H, Q, KV, F = 8192, 8192, 2 * 8 * 128, 28672
LAYER_PARAMS = H * (Q + KV) + Q * H + 3 * H * F  # 855,638,016
NEW_GPUS = ("b300", "gb300", "mi325x", "mi350x", "mi355x")


def job(precision: str, gpu: str, gpus: int = 64) -> TrainingJob:
    return TrainingJob(
        model=model_preset("llama3-70b"),
        cluster=ClusterSpec(gpus=gpus, gpu=gpu_preset(gpu), gpus_per_node=8, nvlink_domain=8),
        training=TrainingSpec(global_batch=256, seq_len=8192, precision=precision),
    )


def degrees(tp: int = 4) -> Degrees:
    return Degrees(
        tp=tp, pp=8, cp=1, dp=64 // (tp * 8), vpp=5, micro_batch=1, zero=1, recompute=0,
        schedule=0, ep=1, tp_span=tp, cp_span=tp, pp_span=64, dp_span=tp * 8,
    )  # fmt: skip


def priced_gemm_s(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: int) -> float:
    """compute.gemm_s at the request's GEMM rates."""
    return float(gemm_s(job.model, gemm_rates(job, a), k, tokens))


def priced_elementwise_s(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: int) -> float:
    """compute.elementwise_s with the request's elementwise kernels."""
    return float(elementwise_s(job.model, elementwise_kernels(job, a), k, tokens))


LAYOUT = Layout(tp=4, pp=8, vpp=5, zero=1, recompute="selective")
NO_ELEMENTWISE = CostAssumptions(elementwise_traffic=False, gemm_shape_throughput=False)


# --- presets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "figures", "cited"),
    [
        # HGX B300: 36 / 72 / 108 PFLOP/s (bf16 / FP8 / FP4, dense FP4) over 8 GPUs
        ("b300", {"peak_tflops": 2250, "fp8_peak_tflops": 4500, "nvfp4_peak_tflops": 13500,
                  "memory_gb": 288, "inter_node_gb_s": 100}, "108 dense over 8"),
        # GB300 NVL72: 180 / 360 / 1,080 PFLOP/s dense over 72 GPUs; 20 TB at 576 TB/s
        ("gb300", {"peak_tflops": 2500, "fp8_peak_tflops": 5000, "nvfp4_peak_tflops": 15000,
                   "memory_bandwidth_gb_s": 8000, "nvlink_domain_gpus": 72}, "1,080 dense"),
        ("mi325x", {"peak_tflops": 1307.4, "fp8_peak_tflops": 2614.9, "memory_gb": 256,
                    "memory_bandwidth_gb_s": 6000, "nvfp4_peak_tflops": None}, "2,614.9"),
        ("mi350x", {"peak_tflops": 2306.9, "mxfp8_peak_tflops": 4613.7, "memory_gb": 288,
                    "nvfp4_peak_tflops": None, "sm_count": 256}, "2,306.9"),
        ("mi355x", {"peak_tflops": 2516.6, "fp8_peak_tflops": 5033.2, "memory_gb": 288,
                    "nvfp4_peak_tflops": None, "sm_count": 256}, "five petaflops"),
    ],
)  # fmt: skip
def test_new_presets_load_with_their_cited_figures(
    name: str, figures: dict[str, Any], cited: str
) -> None:
    gpu = gpu_preset(name)
    assert gpu.name == name
    for field, value in figures.items():
        assert getattr(gpu, field) == value, field
    assert gpu.source is not None and cited in gpu.source
    # a figure no vendor page read here states is said to be so, not passed off as read
    assert "UNVERIFIED" in gpu.source


def test_blackwell_presets_carry_mxfp8_at_the_fp8_rate_and_an_nvfp4_peak() -> None:
    for name, nvfp4 in [("b200", 9000), ("gb200", 10000), ("b300", 13500), ("gb300", 15000)]:
        gpu = gpu_preset(name)
        assert gpu.mxfp8_peak_tflops == gpu.fp8_peak_tflops
        assert gpu.nvfp4_peak_tflops == nvfp4
    for hopper in ("h100-sxm", "h200-sxm"):
        assert gpu_preset(hopper).mxfp8_peak_tflops is None
        assert gpu_preset(hopper).nvfp4_peak_tflops is None


def test_gb200_and_gb300_clusters_default_to_their_nvl72_domain() -> None:
    for name in ("gb200", "gb300"):
        cluster = ClusterSpec(gpus=576, gpu=gpu_preset(name), gpus_per_node=4)
        assert cluster.nvlink_domain_size == 72 and cluster.job_nvlink_domain == 72
        # a stated domain wins (a job filling 64 GPUs a rack), and a small job is its own
        stated = ClusterSpec(gpus=576, gpu=gpu_preset(name), gpus_per_node=4, nvlink_domain=64)
        assert stated.nvlink_domain_size == 64
        assert ClusterSpec(gpus=32, gpu=gpu_preset(name), gpus_per_node=4).job_nvlink_domain == 32
    # an HGX board's domain stays its node
    assert ClusterSpec(gpus=576, gpu=gpu_preset("b300")).nvlink_domain_size == 8


def test_presets_route_lists_every_new_gpu(api: TestClient) -> None:
    gpus = api.get("/v1/presets").json()["gpus"]
    for name in NEW_GPUS:
        assert name in gpus and gpus[name]["source"]
    assert gpus["gb300"]["spec"]["nvfp4_peak_tflops"] == 15000
    assert gpus["gb200"]["spec"]["nvlink_domain_gpus"] == 72
    assert gpus["mi355x"]["spec"]["mxfp8_peak_tflops"] == 5033.2


def test_page_offers_every_new_gpu_and_format(api: TestClient) -> None:
    page = api.get("/").text
    for name in (*NEW_GPUS, "gb200"):
        assert f'<option value="{name}"' in page
    for precision in ("bf16", "fp8", "mxfp8", "nvfp4"):
        assert f'<option value="{precision}"' in page
    # the job the page sends carries the chosen precision
    assert 'precision: $("precision").value' in api.get("/static/requests.js").text


# --- the formats' bytes -----------------------------------------------------------------------


def test_stored_bytes_per_value_by_hand() -> None:
    # FP8: 1 byte, one FP32 scale a tensor (left out)
    assert prec.stored_bytes_per_value(prec.FORMATS["fp8"]) == 1.0
    # MXFP8: 1 byte + one E8M0 byte per 32 values = 1.03125
    assert prec.stored_bytes_per_value(prec.FORMATS["mxfp8"]) == 1 + 1 / 32
    # NVFP4: half a byte (two E2M1 a byte) + one E4M3 byte per 16 values = 0.5625
    assert prec.stored_bytes_per_value(prec.FORMATS["nvfp4"]) == 0.5 + 1 / 16


def test_cast_bytes_per_value_by_hand() -> None:
    stated = CostAssumptions().fp8_cast_bytes_per_value
    # fp8: the assumption's read 2 + FP8 copy and transpose 1 + 1
    assert prec.cast_bytes_per_value("fp8", stated) == 4.0
    # mxfp8: read 2, write rowwise and columnwise copies with their scales: 2 + 2 x 1.03125
    assert prec.cast_bytes_per_value("mxfp8", stated) == 4.0625
    # nvfp4: read 2, write two copies of 0.5625: 2 + 1.125
    assert prec.cast_bytes_per_value("nvfp4", stated) == 3.125
    assert prec.cast_bytes_per_value("bf16", stated) == 0.0


def test_format_casts_add_their_hbm_time_by_hand() -> None:
    # hidden-state operands 4h, projections (q + kv) + q + 2f + f; sequence parallel over tp 4;
    # B200's 8 TB/s: 8,192 x c x (4 x 8192 + 2 x 8192 + 2048 + 3 x 28672) / 4 / 8e12
    values = 4 * H + (2 * Q + KV + 3 * F)  # 137,216 values a token
    on, off = CostAssumptions(), CostAssumptions(elementwise_traffic=False)

    def extra(precision: str) -> float:
        j = job(precision, "b200")
        return float(
            priced_elementwise_s(j, on, degrees(), 8192)
            - priced_elementwise_s(j, off, degrees(), 8192)
        )

    bf16 = extra("bf16")
    for precision, c in [("mxfp8", 4.0625), ("nvfp4", 3.125)]:
        hand = 8192 * c * values / 4 / 8e12
        assert extra(precision) - bf16 == pytest.approx(hand)
    # mxfp8: 8,192 x 4.0625 x 137,216 / 4 / 8e12 = 0.14270 ms a layer
    assert 8192 * 4.0625 * values / 4 / 8e12 == pytest.approx(0.14270e-3, rel=1e-4)


def test_quantised_weight_copies_by_hand() -> None:
    # the first of 8 stages: 10 layers of 855,638,016 / 4 parameters on a tp 4 rank
    params = 10 * LAYER_PARAMS / 4
    bf16 = evaluate(job("bf16", "gb200"), LAYOUT, "standard").memory.weights
    # MXFP8: rowwise and columnwise copies, 2 x 1.03125 = 2.0625 bytes: 4.4119 GB more
    mxfp8 = evaluate(job("mxfp8", "gb200"), LAYOUT, "standard").memory.weights
    assert params * 2.0625 / 1e9 == pytest.approx(4.4119, rel=1e-4)
    assert mxfp8 - bf16 == pytest.approx(params * 2.0625)
    # NVFP4: 2 x 0.5625 = 1.125 bytes: 2.4065 GB more
    nvfp4 = evaluate(job("nvfp4", "gb200"), LAYOUT, "standard").memory.weights
    assert nvfp4 - bf16 == pytest.approx(params * 1.125)
    # MXFP8 weights kept alone (fp8_param_gather): 2.0625 - 2 = 0.0625 a parameter more
    alone = CostAssumptions(fp8_params=True)
    mx_alone = evaluate(job("mxfp8", "gb200"), LAYOUT, "standard", alone).memory.weights
    assert mx_alone - bf16 == pytest.approx(params * 0.0625)
    # the formula takes fp8_params as given: NVFP4 casts alone, 1.125 - 2 = 0.875 a parameter less
    nv_alone = evaluate(job("nvfp4", "gb200"), LAYOUT, "standard", alone).memory.weights
    assert bf16 - nv_alone == pytest.approx(params * 0.875)


def test_no_engine_keeps_nvfp4_weights_alone() -> None:
    # Megatron-Bridge refuses FP4 parameters: the Megatron-Core engines, which keep FP8 and
    # MXFP8 weights alone, keep NVFP4's bf16 weights beside the copy (1.125 bytes more)
    nvfp4 = Request(job("nvfp4", "gb200"), layout=LAYOUT, engine=get_engine("megatron"))
    assert not nvfp4.priced.fp8_params
    mxfp8 = Request(job("mxfp8", "gb200"), layout=LAYOUT, engine=get_engine("megatron"))
    assert mxfp8.priced.fp8_params
    bf16 = Request(job("bf16", "gb200"), layout=LAYOUT, engine=get_engine("megatron"))
    params = 10 * LAYER_PARAMS / 4
    added = evaluate_on(nvfp4).memory.weights - evaluate_on(bf16).memory.weights
    assert added == pytest.approx(params * 1.125)
    # a request that states it there, on any engine, is told so rather than priced
    stated = CostAssumptions(fp8_params=True)
    for engine in ("generic", "megatron", "torchtitan"):
        asked = replace(nvfp4, assumptions=stated, engine=get_engine(engine))
        with pytest.raises(InvalidSpec) as refused:
            evaluate_on(asked)
        assert refused.value.field == "assumptions.fp8_params"


def test_saved_inputs_shrink_to_the_formats_copy_by_hand() -> None:
    model = job("fp8", "b200").model
    none = 0  # mem.RECOMPUTE_NONE

    def saved_bytes(precision: str) -> float:
        return float(prec.fp8_saved_input_bytes_per_token(model, precision, none, True, None))

    fp8 = saved_bytes("fp8")
    # in FP8 each saved value drops 2 -> 1 byte, less the attention output's 1-byte copy:
    # fp8 = values - q, so the values a layer saves for its GEMMs are fp8 + q
    values = fp8 + Q
    for precision, copy in [("mxfp8", 1 + 1 / 32), ("nvfp4", 0.5 + 1 / 16)]:
        saved = saved_bytes(precision)
        assert saved == pytest.approx((2 - copy) * values - copy * Q)


# --- the formats' GEMMs -----------------------------------------------------------------------


def test_mxfp8_gemm_time_by_hand() -> None:
    # B200: the plate's 0.6 of bf16 at H100's ceiling 80.3%, carried by B200's FP8 ceiling
    # (76.3%) to the MXFP8 peak, 4,500 TFLOP/s: 0.6 x 0.763 / 0.803 = 0.57011
    efficiency = 0.6 * 0.763 / 0.803
    assert gemm_rates(job("mxfp8", "b200"), CostAssumptions()).efficiency == pytest.approx(
        efficiency
    )
    # 6 x 855,638,016 x 8192 / (4 x 4500e12 x 0.57011) = 4.0983 ms a layer on a tp 4 rank
    hand = 6 * LAYER_PARAMS * 8192 / (4 * 4500e12 * efficiency)
    assert hand == pytest.approx(4.0983e-3, rel=1e-4)
    assert priced_gemm_s(job("mxfp8", "b200"), NO_ELEMENTWISE, degrees(), 8192) == pytest.approx(
        hand
    )


def test_nvfp4_gemm_time_by_hand() -> None:
    # GB300: the plate's 0.6 carried by GB200's bf16 ceiling (72.9%, the same silicon family);
    # no NVFP4 ceiling measured, so the bf16 share: 0.6 x 0.729 / 0.803 = 0.54471 of 15,000
    efficiency = 0.6 * 0.729 / 0.803
    nvfp4 = job("nvfp4", "gb300")
    assert gemm_rates(nvfp4, CostAssumptions()).efficiency == pytest.approx(efficiency)
    # 6 x 855,638,016 x 8192 / (4 x 15,000e12 x 0.54471) = 1.2868 ms a layer
    hand = 6 * LAYER_PARAMS * 8192 / (4 * 15000e12 * efficiency)
    assert hand == pytest.approx(1.2868e-3, rel=1e-4)
    assert priced_gemm_s(nvfp4, NO_ELEMENTWISE, degrees(), 8192) == pytest.approx(hand)
    # six times faster than the same GEMMs in bf16 at 2,500 TFLOP/s
    bf16 = priced_gemm_s(job("bf16", "gb300"), NO_ELEMENTWISE, degrees(), 8192)
    assert bf16 / hand == pytest.approx(15000 / 2500)


def test_mfu_stays_over_the_bf16_peak_with_the_formats_peak_beside_it() -> None:
    est = evaluate(job("nvfp4", "gb300"), LAYOUT, "standard")
    assert est.mfu_fp8_peak == pytest.approx(est.mfu * 2500 / 15000)
    mx = evaluate(job("mxfp8", "mi355x"), LAYOUT, "standard")
    assert mx.mfu_fp8_peak == pytest.approx(mx.mfu * 2516.6 / 5033.2)
    # each names the format whose peak it is over, which the CLI prints
    assert (est.mfu_fp8_peak_format, mx.mfu_fp8_peak_format) == ("nvfp4", "mxfp8")
    assert "of the NVFP4 dense peak" in estimate_text(estimate_out(est))
    bf16 = evaluate(job("bf16", "gb300"), LAYOUT, "standard")
    assert est.step_time_s < bf16.step_time_s and est.mfu > bf16.mfu
    # a calibration's measured MFU may reach the format's peak over bf16's: 15,000 / 2,500
    assert peak_mfu(job("nvfp4", "gb300")) == pytest.approx(6.0)
    assert peak_mfu(job("bf16", "gb300")) == 1.0


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("precision", "gpu", "field"),
    [
        ("nvfp4", "h100-sxm", "nvfp4_peak_tflops"),
        ("mxfp8", "h100-sxm", "mxfp8_peak_tflops"),
        ("nvfp4", "mi355x", "nvfp4_peak_tflops"),  # MXFP4 tensor cores, not NVFP4
        ("mxfp8", "mi325x", "mxfp8_peak_tflops"),
    ],
)
def test_a_gpu_without_the_format_refuses_it_by_name(precision: str, gpu: str, field: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        evaluate(job(precision, gpu), LAYOUT, "standard")
    assert refused.value.field == "training.precision"
    message = refused.value.message
    assert gpu in message and precision.upper() in message and field in message


def test_nvfp4_on_h100_over_http_is_a_422_naming_the_field(api: TestClient) -> None:
    body = {
        "model": "llama3-70b",
        "cluster": {"gpus": 64, "gpu": "h100-sxm"},
        "training": {"global_batch": 256, "seq_len": 8192, "precision": "nvfp4"},
        "layout": {"tp": 4, "pp": 8, "vpp": 5, "zero": 1, "recompute": "selective"},
        "profile": "standard",
        "engine": "generic",
    }
    response = api.post("/v1/evaluate", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "training.precision"
    assert "h100-sxm" in error["message"] and "Traceback" not in response.text
    body["cluster"] = {"gpus": 64, "gpu": "gb300", "gpus_per_node": 4}
    answer = api.post("/v1/evaluate", json=body)
    assert answer.status_code == 200
    assert answer.json()["mfu_fp8_peak"] == pytest.approx(answer.json()["mfu"] / 6, abs=2e-4)
