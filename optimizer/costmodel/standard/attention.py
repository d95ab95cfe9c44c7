"""One layer's attention time under profile `standard`, fused or not: the kernel that runs, its
efficiency and its rate by attended keys (attention_kernels.py, attention_table.py), read once
a pricing as an `AttentionKernel` (docs/cost-model.md, "Kernels", "Attention kernels",
"Attention by attended length")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.transformer import TransformerSpec
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import attention_kernels as attn_kernels
from optimizer.costmodel.standard import attention_table as attn_table
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.compute import kernel_efficiency
from optimizer.costmodel.standard.degrees import Degrees

Number = Any

# Fused attention efficiency for GPUs whose preset names none: FlashAttention-2 on H100.
DEFAULT_ATTENTION_EFFICIENCY = 0.35


def attention_efficiency(job: TrainingJob, a: CostAssumptions) -> float:
    """The request's, else the GPU preset's (else FlashAttention-2's on H100) carried to the
    kernel the engine runs at the reference length (attention_kernels.py); times the
    request's attention_kernel_efficiency_scale, at most 1."""
    preset = job.cluster.gpu.attention_efficiency or DEFAULT_ATTENTION_EFFICIENCY
    factor = attn_kernels.attention_kernel_factor(job, a, attn_table.REFERENCE_LENGTH)
    return a.attention_efficiency_or(preset * float(factor))


def attention_rate(job: TrainingJob, a: CostAssumptions) -> Callable[[float], float] | None:
    """Fused attention's relative throughput by attended keys on the GPU's architecture
    (attention_table.py), where its preset names one (`gemm_table`) and the request prices it
    (attention_length_throughput), times the kernel's own change from the reference length
    (attention_kernels.attention_kernel_factor); None: one efficiency for every length."""
    table = job.cluster.gpu.gemm_table
    if table is None or not a.attention_length_throughput:
        return None
    at_reference = attn_kernels.attention_kernel_factor(job, a, attn_table.REFERENCE_LENGTH)

    def rate(length: float) -> float:
        kernel = attn_kernels.attention_kernel_factor(job, a, length) / at_reference
        return attn_table.relative_rate(table, length) * kernel

    return rate


@dataclass(frozen=True)
class AttentionKernel:
    """What a layer's attention time reads besides the model and the layout (attention_kernel):
    fused, the kernels' efficiency at the reference length, their rate by attended keys and the
    causal share of the square; unfused, the matmuls' efficiency and the scores' HBM traffic."""

    fused: bool
    peak_flop_s: float
    efficiency: float  # fused: attention_efficiency; unfused: kernel_efficiency
    causal_fraction: float  # causal_attention_work_fraction (fused)
    rate: Callable[[float], float] | None = None  # attention_rate (fused); None: one rate
    bytes_per_score: float = 0.0  # unfused_attention_bytes_per_score (unfused)
    hbm_bytes_s: float = 0.0  # the GPU's memory bandwidth (unfused)


def attention_kernel(job: TrainingJob, a: CostAssumptions) -> AttentionKernel:
    """The attention kernels the request prices (fused_attention): read once a pricing."""
    gpu = job.cluster.gpu
    causal = a.causal_attention_work_fraction
    if a.fused_attention:
        efficiency, rate = attention_efficiency(job, a), attention_rate(job, a)
        return AttentionKernel(True, gpu.peak_flop_s, efficiency, causal, rate)
    bandwidth = gpu.memory_bandwidth_bytes_s
    if bandwidth is None:
        raise InvalidSpec(
            "fused_attention false streams the attention scores through HBM: the GPU needs "
            "memory_bandwidth_gb_s",
            "cluster.gpu.memory_bandwidth_gb_s",
        )
    per_score = a.unfused_attention_bytes_per_score
    return AttentionKernel(
        False, gpu.peak_flop_s, kernel_efficiency(job, a), causal, None, per_score, bandwidth
    )


def attention_time_s(
    model: TransformerSpec, seq_len: int, kernel: AttentionKernel, k: Degrees, tokens: Number
) -> Number:
    """One layer's attention on `tokens` tokens of a rank, fused or not (fused_attention_s,
    unfused_attention_s)."""
    if kernel.fused:
        return fused_attention_s(
            model,
            seq_len,
            tokens,
            k.tp,
            kernel.peak_flop_s,
            kernel.efficiency,
            kernel.causal_fraction,
            kernel.rate,
        )
    return unfused_attention_s(
        model,
        seq_len,
        tokens,
        k,
        kernel.peak_flop_s,
        kernel.efficiency,
        kernel.bytes_per_score,
        kernel.hbm_bytes_s,
    )


def fused_attention_s(
    model: TransformerSpec,
    seq_len: int,
    tokens: Number,
    tp: Number,
    peak_flop_s: float,
    efficiency: float,
    causal_fraction: float,
    rate: Callable[[float], float] | None,
) -> Number:
    """Fused: the causal share (`causal_fraction`) of the square (of a windowed layer, its
    band; of a chunked one, its chunks') at the attention kernels' `efficiency`, less what
    short sequences and windows take from it (`rate`, attention_rate)."""
    share = tim.attention_work_share(
        seq_len,
        model.sliding_window,
        model.windowed_layers,
        model.num_layers,
        causal_fraction,
        model.attention_chunk_size,
        model.chunked_layers,
        rate,
    )
    return tim.attention_s(
        model.q_width,
        seq_len,
        tokens,
        tp,
        peak_flop_s,
        efficiency,
        share,
        tim.FUSED_ATTENTION_KERNEL_FLOPS_RATIO,
    )


def unfused_attention_s(
    model: TransformerSpec,
    seq_len: int,
    tokens: Number,
    k: Degrees,
    peak_flop_s: float,
    matmul_efficiency: float,
    bytes_per_score: float,
    hbm_bytes_s: float,
) -> Number:
    """Unfused: the whole square as batched matmuls at `matmul_efficiency`, plus the scores
    streamed through HBM (`bytes_per_score` each, as the recompute codes keep them); a
    window is a mask there, which saves nothing."""
    gemms = tim.attention_s(
        model.q_width, seq_len, tokens, k.tp, peak_flop_s, matmul_efficiency, 1.0
    )
    return gemms + tim.unfused_scores_s(
        model.num_attention_heads,
        seq_len,
        tokens,
        k.tp,
        bytes_per_score,
        hbm_bytes_s,
        k.recompute,
    )
