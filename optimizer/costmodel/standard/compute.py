"""One layer's compute time under profile `standard`: its GEMMs at the kernel efficiency (the
plate's H100 figure carried to each GPU by its measured matmul ceiling), less what wave
quantisation takes, plus the elementwise work beside them; and attention, fused or not
(docs/cost-model.md, "Kernels")."""

from __future__ import annotations

from typing import Any

from models.errors import InvalidSpec
from models.job import TrainingJob
from optimizer.costmodel.assumptions import (
    PLATE_GPU_MATMUL_EFFICIENCY,
    PLATE_KERNEL_EFFICIENCY,
    CostAssumptions,
)
from optimizer.costmodel.standard import kernels as kern
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.degrees import Degrees

Number = Any

# Fused attention efficiency for GPUs whose preset names none: FlashAttention-2 on H100.
DEFAULT_ATTENTION_EFFICIENCY = 0.35


def kernel_efficiency(job: TrainingJob, a: CostAssumptions) -> float:
    """The request's, else the plate's H100 figure scaled by this GPU's measured matmul
    ceiling against H100's (a GPU without one keeps the plate's)."""
    if a.kernel_efficiency is not None:
        return a.kernel_efficiency
    ceiling = job.cluster.gpu.matmul_efficiency or PLATE_GPU_MATMUL_EFFICIENCY
    return min(PLATE_KERNEL_EFFICIENCY * ceiling / PLATE_GPU_MATMUL_EFFICIENCY, 1.0)


def matmul_s(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: Number) -> Number:
    """One layer's GEMMs at the kernel efficiency, less what their shapes lose to wave
    quantisation on the GPU's SMs, plus the memory-bound elementwise work beside them
    (kernels.py)."""
    model, gpu = job.model, job.cluster.gpu
    avg_params = model.active_layer_params / model.num_layers
    efficiency: Number = kernel_efficiency(job, a)
    if gpu.sm_count is not None and a.gemm_wave_quantization:
        waves = kern.layer_gemm_efficiency(
            model, tokens, k.tp, gpu.sm_count, a.gemm_tile_rows, a.gemm_tile_cols
        )
        efficiency = efficiency * waves
    gemms = tim.matmul_s(6 * avg_params, tokens, k.tp, gpu.peak_flop_s, efficiency)
    bandwidth = gpu.memory_bandwidth_bytes_s
    if not a.elementwise_traffic or bandwidth is None:
        return gemms
    return gemms + kern.elementwise_s(model, tokens, k.tp, bandwidth, a.sequence_parallel)


def attention_efficiency(job: TrainingJob, a: CostAssumptions) -> float:
    if a.attention_kernel_efficiency is not None:
        return a.attention_kernel_efficiency
    return job.cluster.gpu.attention_efficiency or DEFAULT_ATTENTION_EFFICIENCY


def attention_time_s(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: Number) -> Number:
    """Fused: the causal share of the square at the attention kernels' efficiency. Unfused:
    the whole square as batched matmuls, plus the scores streamed through HBM."""
    model, gpu, s = job.model, job.cluster.gpu, job.training.seq_len
    if a.fused_attention:
        return tim.attention_s(
            model.q_width,
            s,
            tokens,
            k.tp,
            gpu.peak_flop_s,
            attention_efficiency(job, a),
            a.causal_attention_work_fraction,
        )
    bandwidth = gpu.memory_bandwidth_bytes_s
    if bandwidth is None:
        raise InvalidSpec(
            "fused_attention false streams the attention scores through HBM: the GPU needs "
            "memory_bandwidth_gb_s",
            "cluster.gpu.memory_bandwidth_gb_s",
        )
    gemms = tim.attention_s(
        model.q_width, s, tokens, k.tp, gpu.peak_flop_s, kernel_efficiency(job, a), 1.0
    )
    return gemms + tim.unfused_scores_s(
        model.num_attention_heads,
        s,
        tokens,
        k.tp,
        a.unfused_attention_bytes_per_score,
        bandwidth,
        k.recompute,
    )
