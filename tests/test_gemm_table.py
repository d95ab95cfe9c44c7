"""Profile standard's GEMMs by shape: XLA's measured bf16 table (models/presets/
gemm_throughput.json) read at the layers' shapes, against figures copied from the source and
worked by hand (docs/cost-model.md, "Kernels")."""

from __future__ import annotations

import numpy as np
import pytest

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.costmodel.standard import gemm_table
from optimizer.costmodel.standard import kernels as kern
from optimizer.costmodel.standard.compute import (
    gemm_shape_table,
    kernel_efficiency,
    over_distinct,
    shape_factor,
)
from optimizer.costmodel.standard.kernels import GemmPass
from tests.helpers import plate_job

TFLOP = 1e12


def rate_tflop_s(table: str, batch: float, rows: float, cols: float, depth: float) -> float:
    (rate,) = gemm_table.measured_flop_s(table, [GemmPass(batch, rows, cols, depth, 1.0)])
    return float(rate) / TFLOP


def test_grid_points_read_the_source_figures() -> None:
    # openxla/xla@e97611c4 matmul_interpolator_data.h, bf16 flop/s: sm_90 b 1, m n k 4,096
    # 780193877565849; sm_100_B200 b 4, 4,096 x 4,096 x 4,096 1670467342710337 (the B200
    # maximum); sm_90 b 1, 2,048 x 2,048 x 2,048 641039894925373
    assert rate_tflop_s("sm_90", 1, 4096, 4096, 4096) == pytest.approx(780.2, abs=0.05)
    assert rate_tflop_s("sm_100", 4, 4096, 4096, 4096) == pytest.approx(1670.5, abs=0.05)
    assert rate_tflop_s("sm_90", 1, 2048, 2048, 2048) == pytest.approx(641.0, abs=0.05)


def test_between_points_the_table_is_linear_in_the_logarithms() -> None:
    low = rate_tflop_s("sm_90", 1, 2048, 2048, 2048)
    high = rate_tflop_s("sm_90", 1, 4096, 2048, 2048)
    assert rate_tflop_s("sm_90", 1, 2**11.5, 2048, 2048) == pytest.approx((low + high) / 2)


def test_rows_beyond_the_table_run_as_a_batch_and_small_dimensions_take_the_smallest_time() -> None:
    # 8,192 rows are two GEMMs of 4,096 in one call; past a batch of 4 the table's largest
    assert rate_tflop_s("sm_90", 1, 8192, 2048, 4096) == rate_tflop_s("sm_90", 2, 4096, 2048, 4096)
    assert rate_tflop_s("sm_90", 1, 65536, 2048, 4096) == rate_tflop_s("sm_90", 4, 4096, 2048, 4096)
    # columns and depth past 4,096 are read at 4,096
    assert rate_tflop_s("sm_90", 1, 4096, 16384, 53248) == rate_tflop_s(
        "sm_90", 1, 4096, 4096, 4096
    )
    # 64 routed tokens take as long as 256: a quarter of the throughput
    small = rate_tflop_s("sm_90", 4, 64, 2048, 4096)
    assert small == pytest.approx(rate_tflop_s("sm_90", 4, 256, 2048, 4096) / 4)


def test_arrays_broadcast_in_one_lookup() -> None:
    tokens = np.array([[2048.0], [8192.0]])
    tp = np.array([1, 2, 4, 8])
    passes = kern.gemm_passes(model_preset("llama3-8b"), tokens, tp, 1)
    rates = gemm_table.measured_flop_s("sm_90", passes)
    assert rates[0].shape == (2, 4)
    # each entry is what the scalar lookup gives
    one = kern.gemm_passes(model_preset("llama3-8b"), 8192.0, 4, 1)
    assert rates[0][1, 2] == pytest.approx(gemm_table.measured_flop_s("sm_90", one)[0])


def test_dense_passes_by_hand() -> None:
    # Llama 3 8B at tp 2 on 4,096 tokens: QKV 4,096 + 2 x 1,024 wide, output 4,096, gate and
    # up 2 x 14,336, down 14,336, all over h 4,096; 218M parameters a layer a token
    passes = kern.gemm_passes(model_preset("llama3-8b"), 4096, 2, 1)
    weights = [6144 * 4096, 4096 * 4096, 28672 * 4096, 14336 * 4096]
    total = sum(weights)
    assert len(passes) == 12
    assert sum(p.share for p in passes) == pytest.approx(1.0)
    qkv_forward, qkv_input_grad, qkv_weight_grad = passes[:3]
    assert (qkv_forward.rows, qkv_forward.cols, qkv_forward.depth) == (4096, 3072, 4096)
    assert (qkv_input_grad.rows, qkv_input_grad.cols, qkv_input_grad.depth) == (4096, 4096, 3072)
    assert (qkv_weight_grad.rows, qkv_weight_grad.cols, qkv_weight_grad.depth) == (3072, 4096, 4096)
    assert qkv_forward.share == pytest.approx(weights[0] / total / 3)
    down = passes[9]
    assert (down.cols, down.depth) == (4096, 7168)
    assert down.share == pytest.approx(weights[3] / total / 3)


def test_routed_experts_run_as_one_grouped_call_per_rank() -> None:
    model = model_preset("mixtral-8x7b")  # 8 experts, top 2, 14,336 wide, h 4,096
    passes = kern.gemm_passes(model, 4096, 1, 4)
    up = passes[6]  # after QKV and the output projection
    # 2 local experts of 8 at ep 4, each on 4 x 4,096 x 2 / 8 = 4,096 routed copies
    assert (up.batch, up.rows, up.cols, up.depth) == (2, 4096, 28672, 4096)
    attention = (4096 + 2 * 1024) * 4096 + 4096 * 4096
    experts = 2 * 3 * 14336 * 4096
    assert passes[0].share == pytest.approx((4096 + 2 * 1024) * 4096 / (attention + experts) / 3)


def job_shape_factor(job: TrainingJob, a: CostAssumptions, passes: list[GemmPass]) -> float:
    """compute.shape_factor by the table the request prices GEMM shapes from."""
    return float(shape_factor(passes, gemm_shape_table(job.cluster.gpu, a.gemm_shape_throughput)))


def test_the_plate_keeps_the_kernel_efficiency_and_smaller_shapes_lose() -> None:
    a = CostAssumptions()
    plate = plate_job()
    assert job_shape_factor(plate, a, kern.gemm_passes(plate.model, 8192, 8, 1)) == pytest.approx(
        1.0
    )
    small = plate_job(48, "llama3-8b")
    factor = job_shape_factor(small, a, kern.gemm_passes(small.model, 2048, 8, 1))
    assert 0.5 < factor < 0.95
    # off, or on a GPU without a table (A100), one efficiency for every shape
    off = CostAssumptions(gemm_shape_throughput=False)
    assert job_shape_factor(small, off, kern.gemm_passes(small.model, 2048, 8, 1)) == 1.0
    a100 = TrainingJob(
        model=small.model,
        cluster=ClusterSpec(gpus=48, gpu=gpu_preset("a100-80gb"), gpus_per_node=8),
        training=small.training,
    )
    assert job_shape_factor(a100, a, kern.gemm_passes(small.model, 2048, 8, 1)) == 1.0


def test_the_layer_and_head_matmuls_slow_by_the_factor() -> None:
    job, layout = plate_job(64, "llama3-8b", seq_len=2048), Layout(tp=8, pp=1, zero=1)
    on = evaluate(job, layout, "standard")
    off = evaluate(job, layout, "standard", CostAssumptions(gemm_shape_throughput=False))
    a = CostAssumptions()
    layer = job_shape_factor(job, a, kern.gemm_passes(job.model, 2048, 8, 1))
    head = job_shape_factor(job, a, kern.head_gemm_passes(job.model, 2048, 8))
    # the layer's GEMM FLOPs on one rank at the one efficiency, by hand
    flops = 6 * job.model.active_layer_params / job.model.num_layers * 2048 / 8
    gemm_off_s = flops / (job.cluster.gpu.peak_flop_s * kernel_efficiency(job, a))
    slower_s = on.times_s["matmul"] - off.times_s["matmul"]
    assert slower_s == pytest.approx(gemm_off_s * (1 / layer - 1))
    assert head < 1
    assert on.times_s["head"] > off.times_s["head"]
    assert on.mfu < off.mfu


def test_a_term_over_distinct_choices_equals_it_over_every_row() -> None:
    rng = np.random.default_rng(7)
    tokens = rng.choice([1024.0, 2048.0, 8192.0], size=(500, 1))
    tp = rng.choice([1, 2, 8], size=(1, 40))
    ep = rng.choice([1, 4], size=(500, 40))
    calls: list[int] = []

    def term(t: np.ndarray, p: np.ndarray, e: np.ndarray) -> np.ndarray:
        calls.append(np.size(t))
        return t * 1000 + p * 10 + e

    got = over_distinct(term, tokens, tp, ep)
    assert got.shape == (500, 40)
    assert np.array_equal(got, tokens * 1000 + tp * 10 + ep)
    assert calls == [18]  # 3 x 3 x 2 combinations, each once
