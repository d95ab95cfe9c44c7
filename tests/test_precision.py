"""training.precision fp8 under profile standard: each term against figures worked by hand
from its source (docs/cost-model.md, "Precision"), the bf16 path untouched, and the refusals
(a GPU without an FP8 peak, the workshop profile) as clear errors through the API and CLI."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from models.errors import InvalidSpec
from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.costmodel.standard import kernels as kern
from optimizer.costmodel.standard.compute import (
    elementwise_kernels,
    elementwise_s,
    gemm_rates,
    gemm_s,
)
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.engines import engine_assumptions, get_engine
from tests.helpers import run_cli

# Llama 3 70B, by hand: h 8192, 64 heads of 128, 8 KV heads, FFN 28672 (SwiGLU).
H, Q, KV, F = 8192, 8192, 2 * 8 * 128, 28672
# one layer's weights: Q, K, V and output (h (q + kv) + q h) and three h x f MLP matrices
LAYER_PARAMS = H * (Q + KV) + Q * H + 3 * H * F  # 855,638,016


def job(precision: str = "fp8", gpu: str = "h100-sxm", gpus: int = 64) -> TrainingJob:
    return TrainingJob(
        model=model_preset("llama3-70b"),
        cluster=ClusterSpec(gpus=gpus, gpu=gpu_preset(gpu)),
        training=TrainingSpec(global_batch=256, seq_len=8192, precision=precision),
    )


def degrees(tp: int = 4, zero: int = 1) -> Degrees:
    return Degrees(
        tp=tp, pp=8, cp=1, dp=64 // (tp * 8), vpp=5, micro_batch=1, zero=zero, recompute=0,
        schedule=0, ep=1, tp_span=tp, cp_span=tp, pp_span=64, dp_span=tp * 8,
    )  # fmt: skip


def priced_gemm_s(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: int) -> float:
    """compute.gemm_s at the request's GEMM rates."""
    return float(gemm_s(job.model, gemm_rates(job, a), k, tokens))


def priced_elementwise_s(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: int) -> float:
    """compute.elementwise_s with the request's elementwise kernels."""
    return float(elementwise_s(job.model, elementwise_kernels(job, a), k, tokens))


LAYOUT = Layout(tp=4, pp=8, vpp=5, zero=1, recompute="selective")


def test_layer_params_by_hand_match_the_model() -> None:
    assert LAYER_PARAMS == 855_638_016
    model = model_preset("llama3-70b")
    assert model.active_layer_params / model.num_layers == LAYER_PARAMS


def test_fp8_kernel_efficiency_is_the_plates_share_of_the_fp8_ceiling() -> None:
    # H100: the plate's 0.6 of bf16 peak at a bf16 ceiling of 80.3%; FP8 ceiling 70.9%
    # (ml-engineering MAMF tables): 0.6 x 0.709 / 0.803 = 0.52976 of the FP8 peak
    assert gemm_rates(job(), CostAssumptions()).efficiency == pytest.approx(0.6 * 0.709 / 0.803)
    # B200: 0.6 x 0.776 / 0.803 of bf16, then x 0.763 / 0.776: 0.6 x 0.763 / 0.803
    b200 = gemm_rates(job(gpu="b200"), CostAssumptions()).efficiency
    assert b200 == pytest.approx(0.6 * 0.763 / 0.803)
    # a request's kernel_efficiency is carried the same way: 0.5 x 0.709 / 0.803
    set_half = gemm_rates(job(), CostAssumptions(kernel_efficiency=0.5)).efficiency
    assert set_half == pytest.approx(0.5 * 0.709 / 0.803)
    assert gemm_rates(job("bf16"), CostAssumptions()).efficiency == pytest.approx(0.6)


def test_fp8_gemm_time_by_hand() -> None:
    # 8,192 tokens through one layer on a tp 4 rank, no elementwise term, one efficiency for
    # every shape: 6 x 855,638,016 x 8192 / (4 x 1979e12 x 0.52976) = 10.0287 ms
    a = CostAssumptions(elementwise_traffic=False, gemm_shape_throughput=False)
    hand = 6 * LAYER_PARAMS * 8192 / (4 * 1979e12 * (0.6 * 0.709 / 0.803))
    assert hand == pytest.approx(10.0287e-3, rel=1e-4)
    assert priced_gemm_s(job(), a, degrees(), 8192) == pytest.approx(hand)
    assert priced_elementwise_s(job(), a, degrees(), 8192) == 0.0
    # in bf16 the same GEMMs take 6 x 855,638,016 x 8192 / (4 x 989e12 x 0.6) = 17.7 ms
    bf16 = 6 * LAYER_PARAMS * 8192 / (4 * 989e12 * 0.6)
    assert priced_gemm_s(job("bf16"), a, degrees(), 8192) == pytest.approx(bf16)


def test_fp8_cast_bytes_per_token_by_hand() -> None:
    # hidden state: QKV and MLP-up inputs, attention-out and MLP-down output gradients: 4h;
    # projections: QKV grad (q + kv), attention output q, MLP-up grad 2f, MLP-down input f
    hidden, projections = kern.fp8_cast_bytes_per_token(model_preset("llama3-70b"), 4.0)
    assert hidden == 4.0 * 4 * H  # 131,072
    assert projections == 4.0 * ((Q + KV) + Q + 2 * F + F)  # 4 x 104,448
    # read bf16 (2) and write the FP8 copy and its transpose (1 + 1): the default
    assert CostAssumptions().fp8_cast_bytes_per_value == 4.0


def test_fp8_casts_add_their_hbm_time_by_hand() -> None:
    # with sequence parallelism every share splits over tp 4: 8,192 tokens x (131,072 +
    # 417,792) bytes / 4 at 3.35 TB/s = 0.33554 ms a layer
    casts = 8192 * (4.0 * 4 * H + 4.0 * (2 * Q + KV + 3 * F)) / 4 / 3.35e12
    assert casts == pytest.approx(0.33554e-3, rel=1e-4)
    on, off = CostAssumptions(), CostAssumptions(elementwise_traffic=False)
    fp8_extra = float(
        priced_elementwise_s(job(), on, degrees(), 8192)
        - priced_elementwise_s(job(), off, degrees(), 8192)
    )
    bf16_extra = float(
        priced_elementwise_s(job("bf16"), on, degrees(), 8192)
        - priced_elementwise_s(job("bf16"), off, degrees(), 8192)
    )
    assert fp8_extra - bf16_extra == pytest.approx(casts)


def test_fp8_weight_copies_by_hand() -> None:
    # the first of 8 stages holds 10 layers of 855,638,016 / 4 parameters on a tp 4 rank;
    # each keeps an FP8 copy and its transpose, 2 bytes: 4.2782 GB more weights
    extra = 10 * LAYER_PARAMS / 4 * 2
    assert extra / 1e9 == pytest.approx(4.2782, rel=1e-4)
    fp8, bf16 = evaluate(job(), LAYOUT, "standard"), evaluate(job("bf16"), LAYOUT, "standard")
    assert fp8.memory.weights - bf16.memory.weights == pytest.approx(extra)
    bf16_inputs = CostAssumptions(fp8_saved_inputs=False)
    kept = evaluate(job(), LAYOUT, "standard", bf16_inputs).memory.activations
    assert kept == bf16.memory.activations
    # an engine that keeps its weights in FP8 instead (fp8_param_gather): on Hopper the cast
    # and its transpose (2 bytes) replace the bf16 weight's 2 bytes
    fp8_only = CostAssumptions(fp8_params=True)
    assert evaluate(job(), LAYOUT, "standard", fp8_only).memory.weights == bf16.memory.weights
    # ZeRO-3 gathers and casts each layer where it is used: no copy either
    zero3 = Layout(tp=4, pp=1, zero=3, recompute="full")
    fsdp = evaluate(job(), zero3, "standard").memory.weights
    assert fsdp == evaluate(job("bf16"), zero3, "standard").memory.weights


def test_fp8_weights_on_blackwell_keep_no_transpose_by_hand() -> None:
    # GB200's FP8 GEMMs read either layout: each weight's cast is 1 byte, so the same 10
    # layers add 2.1391 GB beside bf16 weights, and take as much off them in their place
    one_byte = 10 * LAYER_PARAMS / 4 * 1
    assert one_byte / 1e9 == pytest.approx(2.1391, rel=1e-4)
    gb200 = job(gpu="gb200")
    bf16 = evaluate(job("bf16", gpu="gb200"), LAYOUT, "standard").memory.weights
    beside = evaluate(gb200, LAYOUT, "standard").memory.weights
    assert beside - bf16 == pytest.approx(one_byte)
    fp8_only = CostAssumptions(fp8_params=True)
    instead = evaluate(gb200, LAYOUT, "standard", fp8_only).memory.weights
    assert bf16 - instead == pytest.approx(one_byte)
    # a stated cast size overrides the GPU's
    stated = CostAssumptions(fp8_weight_copy_bytes_per_param=2.0)
    assert evaluate(gb200, LAYOUT, "standard", stated).memory.weights - bf16 == pytest.approx(
        2 * one_byte
    )
    # both Megatron-Core engines keep FP8 weights alone, as their FP8 recipes do (Bridge's
    # bf16_with_fp8_* presets; Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh,
    # whose --fp8-param-gather the megatron export writes)
    assert engine_assumptions(get_engine("nemo"), CostAssumptions(), "fp8").fp8_params
    assert engine_assumptions(get_engine("megatron"), CostAssumptions(), "fp8").fp8_params


def test_mfu_stays_over_the_bf16_peak_with_the_fp8_peak_beside_it() -> None:
    est = evaluate(job(), LAYOUT, "standard")
    # MFU: model FLOPs over 64 x 989 TFLOP/s for the step; the FP8 figure over 64 x 1979
    model_flops = est.mfu * 64 * 989e12 * est.step_time_s
    assert est.mfu_fp8_peak == pytest.approx(model_flops / (64 * 1979e12 * est.step_time_s))
    assert est.mfu_fp8_peak == pytest.approx(est.mfu * 989 / 1979)
    bf16 = evaluate(job("bf16"), LAYOUT, "standard")
    assert bf16.mfu_fp8_peak is None
    # the same model FLOPs in less time: fp8 is faster, and MFU counts it over bf16's peak
    assert est.step_time_s < bf16.step_time_s and est.mfu > bf16.mfu


def test_fp8_leaves_attention_and_the_head_in_bf16() -> None:
    fp8, bf16 = evaluate(job(), LAYOUT, "standard"), evaluate(job("bf16"), LAYOUT, "standard")
    assert fp8.times_s["attention"] == bf16.times_s["attention"]
    assert fp8.times_s["head"] == bf16.times_s["head"]
    assert fp8.times_s["matmul"] < bf16.times_s["matmul"]


def test_bf16_is_the_default_and_prices_as_before() -> None:
    assert TrainingSpec().precision == "bf16"
    explicit = evaluate(job("bf16"), LAYOUT, "standard")
    default = evaluate(job("bf16").model_copy(update={"training": TrainingSpec(
        global_batch=256, seq_len=8192)}), LAYOUT, "standard")  # fmt: skip
    assert explicit == default


def test_fp8_on_a_gpu_without_an_fp8_peak_is_refused_by_name() -> None:
    with pytest.raises(InvalidSpec) as refused:
        evaluate(job(gpu="a100-80gb"), LAYOUT, "standard")
    assert refused.value.field == "training.precision"
    assert "a100-80gb" in refused.value.message and "FP8 peak" in refused.value.message


def test_workshop_refuses_fp8_rather_than_price_it_as_bf16() -> None:
    with pytest.raises(InvalidSpec) as refused:
        evaluate(job(), Layout(tp=4, pp=8, vpp=5, zero=1), "workshop")
    assert refused.value.field == "training.precision"
    assert "profile standard" in refused.value.message


# --- through the API and the CLI ------------------------------------------------------------


def fp8_body(gpu: str = "h100-sxm") -> dict[str, Any]:
    return {
        "model": "llama3-70b",
        "cluster": {"gpus": 64, "gpu": gpu},
        "training": {"global_batch": 256, "seq_len": 8192, "precision": "fp8"},
        "layout": {"tp": 4, "pp": 8, "vpp": 5, "zero": 1, "recompute": "selective"},
        "profile": "standard",
        "engine": "generic",  # the engine-agnostic formula the tests compute beside it
    }


def test_fp8_request_over_http_reports_both_figures(api: TestClient) -> None:
    body = api.post("/v1/evaluate", json=fp8_body()).json()
    est = evaluate(job(), LAYOUT, "standard")
    assert body["mfu"] == pytest.approx(est.mfu, abs=1e-4)
    assert body["mfu_fp8_peak"] == pytest.approx(body["mfu"] * 989 / 1979, abs=2e-4)
    bf16 = fp8_body()
    bf16["training"]["precision"] = "bf16"
    assert api.post("/v1/evaluate", json=bf16).json()["mfu_fp8_peak"] is None


def test_fp8_search_over_http_prices_its_layouts_in_fp8(api: TestClient) -> None:
    body = {key: value for key, value in fp8_body().items() if key != "layout"}
    body |= {"search": {"pp": 8, "zero_stages": [1]}, "explain": False, "time_limit_s": 60}
    answer = api.post("/v1/optimize", json=body).json()
    assert answer["status"] == "optimal"
    assert answer["best"]["mfu_fp8_peak"] == pytest.approx(
        answer["best"]["mfu"] * 989 / 1979, abs=2e-4
    )


def test_fp8_on_a100_over_http_is_a_422_naming_the_field(api: TestClient) -> None:
    response = api.post("/v1/evaluate", json=fp8_body("a100-80gb"))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "training.precision"
    assert "a100-80gb" in error["message"] and "Traceback" not in response.text


def test_unknown_precision_is_a_422(api: TestClient) -> None:
    body = fp8_body()
    body["training"]["precision"] = "fp4"
    response = api.post("/v1/evaluate", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "training.precision"


FP8_FLAGS = ["--model", "llama3-70b", "--gpus", "64", "--global-batch", "256"]
FP8_FLAGS += ["--tp", "4", "--pp", "8", "--vpp", "5", "--zero", "1", "--recompute", "selective"]


def test_cli_precision_flag_prints_both_figures(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(["evaluate", *FP8_FLAGS, "--profile", "standard", "--engine",
                              "generic", "--precision", "fp8"], capsys)  # fmt: skip
    assert status == 0
    est = evaluate(job(), LAYOUT, "standard")
    assert "of the bf16 dense peak" in out
    assert f"{100 * (est.mfu_fp8_peak or 0):.2f}% of the FP8 dense peak" in out


def test_cli_fp8_on_a100_exits_2_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["evaluate", *FP8_FLAGS, "--gpu", "a100-80gb", "--profile", "standard"]
    status, out, err = run_cli([*argv, "--precision", "fp8"], capsys)
    assert status == 2 and out == ""
    assert "a100-80gb" in err and "FP8 peak" in err and "Traceback" not in err


def test_fp8_gemm_inputs_are_saved_as_their_fp8_casts() -> None:
    # Transformer Engine keeps a GEMM's input for its weight gradient in FP8: per token and
    # layer the two norm outputs (2 x 2h -> 2 x h) and the MLP-down input (2f -> f) halve and
    # the attention output gains a 1-byte copy (q): 2 x 8192 + 28672 - 8192 = 36,864 bytes.
    # Without recompute on tp 4, each in-flight micro-batch of 8,192 tokens keeps that less a
    # layer on each rank's 2,048 tokens
    layout = Layout(tp=4, pp=8, vpp=5, zero=1, recompute="none")
    fp8, bf16 = evaluate(job(), layout, "standard"), evaluate(job("bf16"), layout, "standard")
    kept = evaluate(job(), layout, "standard", CostAssumptions(fp8_saved_inputs=False))
    saved_per_token = 2 * H + F - Q
    assert saved_per_token == 36_864
    assert kept.memory.activations == bf16.memory.activations
    ratio = 1 - fp8.memory.activations / kept.memory.activations
    per_token = 8 * H + 2 * (Q + KV) + 2 * Q + 6 * F  # the layer's bf16 activations, no recompute
    assert ratio == pytest.approx(saved_per_token / per_token, rel=0.02)  # the head's logits aside
    # selective recompute drops the norm and activation outputs: only the copy (q) remains
    selective = Layout(tp=4, pp=8, vpp=5, zero=1, recompute="selective")
    more = evaluate(job(), selective, "standard").memory.activations
    assert more > evaluate(job("bf16"), selective, "standard").memory.activations
    # torchtitan's Float8 (torchao) keeps the bf16 inputs
    titan = engine_assumptions(get_engine("torchtitan"), CostAssumptions(), "fp8")
    assert not titan.fp8_saved_inputs
