"""Memory of published layouts that trained, part by part, against figures worked by hand
from the bytes per parameter the engines keep (profile standard, H100 80 GB)."""

from __future__ import annotations

import pytest

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.engines import engine_assumptions, get_engine

# Llama 3 405B by hand: h 16384, 128 heads of 128, 8 KV heads (K and V: 2 x 8 x 128 = 2048),
# FFN 53248 (SwiGLU). One layer's weights: h (q + kv) + q h + 3 h f.
H, Q, KV, F = 16384, 16384, 2048, 53248
LAYER_PARAMS = H * (Q + KV) + Q * H + 3 * H * F  # 3,187,671,040
# One layer's activations a token, bf16 (memory.layer_activation_bytes_per_token): two norm
# inputs and outputs 8h, Q K V 2(q + kv), attention output 2q, SwiGLU's gate, up and product 6f.
LAYER_ACTIVATION_BYTES = 8 * H + 2 * (Q + KV) + 2 * Q + 6 * F  # 520,192
# CUDA context and NCCL buffers per communicator of degree > 1 (assumptions/memory.py)
CONTEXT_GB, NCCL_GB = 1.65, 0.308


def job(gpus: int, global_batch: int, precision: str) -> TrainingJob:
    return TrainingJob(
        model=model_preset("llama3-405b"),
        cluster=ClusterSpec(gpus=gpus, gpu=gpu_preset("h100-sxm")),
        training=TrainingSpec(global_batch=global_batch, seq_len=8192, precision=precision),
    )


def memory_gb(engine: str, training: TrainingJob, layout: Layout) -> dict[str, float]:
    a = engine_assumptions(get_engine(engine), CostAssumptions(), training.training.precision)
    est = evaluate(training, layout, "standard", a)
    parts = ("weights", "gradients", "optimizer", "activations", "runtime", "total")
    return {part: getattr(est.memory, part) / 1e9 for part in parts}


def test_layer_figures_by_hand_match_the_model() -> None:
    assert LAYER_PARAMS == model_preset("llama3-405b").params_per_layer == 3_187_671_040


def test_llama3_8k_layout_at_16k_gpus_fits_by_parts() -> None:
    # Llama 3 (arXiv 2407.21783, Table 4): 16,384 H100, tp 8, pp 16, dp 128, 16 sequences of
    # 8,192 tokens a replica, no activation checkpointing; ZeRO-2-like sharding of the
    # optimiser and gradients; the interleaved schedule (vpp 4) on 126 + 2 slots (section
    # 3.3.2: the embedding and head each take a layer's place, 8 layers a middle stage).
    training = job(16384, 2048, "bf16")
    layout = Layout(tp=8, pp=16, vpp=4, zero=2, recompute="none")
    got = memory_gb("generic", training, layout)
    params = 8 * LAYER_PARAMS / 8  # rank 1: 8 layers split over tp 8
    assert got["weights"] == pytest.approx(2 * params / 1e9, rel=1e-3)  # bf16, 6.375 GB
    # fp32 gradients and 12 bytes of optimiser state, both sharded over dp 128
    assert got["gradients"] == pytest.approx(4 * params / 128 / 1e9, rel=1e-3)
    assert got["optimizer"] == pytest.approx(12 * params / 128 / 1e9, rel=1e-3)
    # m = p = 16: rank 1 warms up with 2*14 + 3*16 = 76 chunk forwards, more than the step's
    # 64, so it runs all 16 micro-batches forward first and holds them all on its 8 layers
    tokens = 8192 / 8
    activations = 16 * 8 * LAYER_ACTIVATION_BYTES * tokens / 1e9  # 68.18 GB
    assert got["activations"] == pytest.approx(activations, rel=1e-3)
    assert got["runtime"] == pytest.approx(CONTEXT_GB + 3 * NCCL_GB)  # tp, dp, pp
    assert got["total"] == pytest.approx(77.53, abs=0.01)
    assert got["total"] < gpu_preset("h100-sxm").memory_gb


@pytest.mark.parametrize("engine", ["megatron", "nemo"])
def test_llama31_405b_fp8_recipe_fits_by_parts(engine: str) -> None:
    # Megatron-Bridge's Llama 3.1 405B FP8 on 1,024 H100: tp 8, pp 8, cp 2, vpp 8, dp 8,
    # micro-batch 1, global batch 512, distributed optimiser (docs/validation.md's row)
    training = job(1024, 512, "fp8")
    layout = Layout(tp=8, pp=8, cp=2, vpp=8, zero=1, recompute="none")
    got = memory_gb(engine, training, layout)
    params = 16 * LAYER_PARAMS / 8  # rank 1: 16 layers (128 slots on 8 stages), 6.375e9
    # FP8-only weights (--fp8-param-gather / fp8_param): the cast and its transpose on Hopper
    assert got["weights"] == pytest.approx(2 * params / 1e9, rel=1e-3)  # 12.75 GB
    # the DDP buffer's fp32 main grads, whole on every rank (the distributed optimizer shards
    # only the state it steps)
    assert got["gradients"] == pytest.approx(4 * params / 1e9, rel=1e-3)  # 25.50 GB
    # fp32 master and Adam's two moments over the data-parallel-with-cp group, dp 8 x cp 2
    assert got["optimizer"] == pytest.approx(12 * params / 16 / 1e9, rel=1e-3)  # 4.78 GB
    # per token, FP8 saves the two norm outputs and the MLP-down input as 1-byte casts
    # (2h + f less) and adds an FP8 copy of the attention output (+q)
    per_token = LAYER_ACTIVATION_BYTES - (2 * H + F - Q)
    # rank 1 holds 2*6 + 7*8 + 1 = 69 chunk forwards of 2 layers: 138 layers' worth
    activations = 69 * 2 * per_token * 8192 / (8 * 2) / 1e9  # 31.84 GB
    assert got["activations"] == pytest.approx(activations, rel=1e-3)
    assert got["runtime"] == pytest.approx(CONTEXT_GB + 4 * NCCL_GB)  # tp, cp, dp x cp, pp
    assert got["total"] == pytest.approx(77.75, abs=0.01)
    assert got["total"] < gpu_preset("h100-sxm").memory_gb
