"""Hand-worked toy cases for the workshop formulas; the arithmetic is in the comments."""

from __future__ import annotations

import pytest

from models.hardware import ClusterSpec, GpuSpec
from models.job import TrainingJob
from models.layout import Layout, Recompute
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from optimizer.costmodel.profiles import evaluate

# L=4, h=64, f=128, a=4, k=2, V=100, so hd = 16 and
# P_layer = 64*(64 + 2*2*16) + 64*64 + 3*64*128 = 8192 + 4096 + 24576 = 36864
# P = 4*36864 + 2*100*64 = 147456 + 12800 = 160256
TOY = TransformerSpec(
    num_layers=4,
    hidden_size=64,
    ffn_hidden_size=128,
    num_attention_heads=4,
    num_kv_heads=2,
    vocab_size=100,
)
# 1 TFLOP/s, 100 GB/s inside a node of 4, 10 GB/s across nodes
TOY_GPU = GpuSpec(memory_gb=1, peak_tflops=1, intra_node_gb_s=100, inter_node_gb_s=10)


def toy_job(inter_node_gb_s: float = 10) -> TrainingJob:
    gpu = TOY_GPU.model_copy(update={"inter_node_gb_s": inter_node_gb_s})
    return TrainingJob(
        model=TOY,
        cluster=ClusterSpec(gpus=8, gpu=gpu, gpus_per_node=4),
        training=TrainingSpec(global_batch=8, seq_len=32),
    )


def test_toy_parameter_count() -> None:
    assert TOY.params_per_layer == 36864
    assert TOY.total_params == 160256


def test_toy_memory_by_part() -> None:
    # tp=2, pp=2 -> dp = 8/4 = 2; m = 8/(2*1) = 4; n = 160256/4 = 40064 params per device
    est = evaluate(toy_job(), Layout(tp=2, pp=2, zero=1))
    assert est.layout.dp == 2 and est.micro_batches == 4
    assert est.memory.weights == 80128  # 2n
    assert est.memory.gradients == 80128  # 2n, ZeRO-1 leaves gradients whole
    assert est.memory.optimizer == 240384  # 12n / dp(2)
    # per layer 34*32*1*64/2 = 34816 bytes; 4/2 = 2 layers; min(m=4, p=2) = 2 in flight
    assert est.memory.activations == 34816 * 2 * 2
    assert est.memory.total == 539904
    assert est.fits  # 0.54 MB of 1 GB


def test_toy_zero_stages_and_recompute() -> None:
    zero3 = evaluate(toy_job(), Layout(tp=2, pp=2, zero=3, recompute=Recompute.FULL))
    assert zero3.memory.weights == 40064  # 2n / 2
    assert zero3.memory.gradients == 40064
    # full recompute keeps 2*32*1*64/2 = 2048 bytes per layer, x 2 layers x 2 in flight
    assert zero3.memory.activations == 8192


def test_toy_bubble_communication_and_mfu() -> None:
    est = evaluate(toy_job(), Layout(tp=2, pp=2, zero=1))
    # bubble = ((2-1)/1) / (4 + 1) = 0.2
    assert est.bubble == pytest.approx(0.2)
    # t_comp = 6*36864*32 / (2 * 1e12 * 0.6) = 5.89824e-6 s
    assert est.times_s["layer_compute"] == pytest.approx(5.89824e-6)
    # t_tp = 4 * 2*(1/2) * 32*64*2 bytes / 100e9 = 16384 / 1e11 = 1.6384e-7 s (tp inside the node)
    assert est.times_s["tp_comm_per_layer"] == pytest.approx(1.6384e-7)
    # t_dp = 2*(1/2) * 2*40064 / 10e9 = 8.0128e-6 s, hidden under the step:
    # T = 4 * (4/2) * (5.89824e-6 + 1.6384e-7) / 0.8 = 6.06208e-5 s
    assert est.times_s["dp_comm"] == pytest.approx(8.0128e-6)
    assert est.times_s["step_compute"] == pytest.approx(6.06208e-5)
    # f_tp = 5.89824 / 6.06208 = 36/37; mfu = 0.6 * 0.8 * 36/37
    assert est.mfu == pytest.approx(0.6 * 0.8 * 36 / 37)


def test_toy_slow_network_exposes_the_gradient_all_reduce() -> None:
    # At 0.001 GB/s, t_dp = 80128 / 1e6 = 0.080128 s, far longer than T = 6.06208e-5 s:
    # f_dp = 6.06208e-5 / 0.080128
    est = evaluate(toy_job(inter_node_gb_s=0.001), Layout(tp=2, pp=2, zero=1))
    assert est.mfu_steps[3].mfu / est.mfu_steps[2].mfu == pytest.approx(6.06208e-5 / 0.080128)
    assert est.step_time_s == pytest.approx(0.080128)


def test_toy_placement_decides_which_link_tensor_parallelism_uses() -> None:
    # Inside a node of 4: tp 2 placed innermost spans 2 GPUs (NVLink); with pp (2) placed
    # inside it, a tp group spans 4 GPUs, still one node; with pp and dp inside, 8: the network.
    inner = evaluate(toy_job(), Layout(tp=2, pp=2, placement=("tp", "cp", "pp", "dp")))
    outer = evaluate(toy_job(), Layout(tp=2, pp=2, placement=("pp", "dp", "tp", "cp")))
    assert inner.times_s["tp_comm_per_layer"] == pytest.approx(1.6384e-7)
    assert outer.times_s["tp_comm_per_layer"] == pytest.approx(16384 / 10e9)
    assert outer.mfu < inner.mfu
    assert any("network" in w for w in outer.warnings)
