"""One layer's compute time under profile `standard`: its GEMMs at the kernel efficiency (the
plate's H100 figure carried to each GPU by its measured matmul ceiling), less what wave
quantisation takes, plus the elementwise work beside them; and attention, fused or not
(docs/cost-model.md, "Kernels")."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.presets import model_preset
from models.transformer import TransformerSpec
from optimizer.costmodel.assumptions import (
    PLATE_GPU_MATMUL_EFFICIENCY,
    PLATE_KERNEL_EFFICIENCY,
    CostAssumptions,
)
from optimizer.costmodel.standard import attention_kernels as attn_kernels
from optimizer.costmodel.standard import attention_table as attn_table
from optimizer.costmodel.standard import kernels as kern
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import precision as prec
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.degrees import Degrees, per_synced_stage

Number = Any

# The plate's layout, at whose GEMM shapes the kernel efficiency is set (docs/cost-model.md,
# "Reference figures"): Llama 3 405B, tp 8, one 8,192-token sequence a micro-batch.
PLATE_MODEL, PLATE_TP, PLATE_TOKENS = "llama3-405b", 8, 8192
# Fused attention efficiency for GPUs whose preset names none: FlashAttention-2 on H100.
DEFAULT_ATTENTION_EFFICIENCY = 0.35


def kernel_efficiency(job: TrainingJob, a: CostAssumptions) -> float:
    """The request's, else the plate's H100 figure scaled by this GPU's measured matmul
    ceiling against H100's (a GPU without one keeps the plate's); times the request's
    kernel_efficiency_scale (a calibration's ratio), at most 1."""
    ceiling = job.cluster.gpu.matmul_efficiency or PLATE_GPU_MATMUL_EFFICIENCY
    return a.matmul_efficiency_or(PLATE_KERNEL_EFFICIENCY * ceiling / PLATE_GPU_MATMUL_EFFICIENCY)


def layer_gemm_efficiency(job: TrainingJob, a: CostAssumptions) -> float:
    """The kernel efficiency of the transformer layers' GEMMs against the peak they run at.
    Under fp8 and mxfp8 the kernel efficiency (a share of the bf16 peak) is carried to the
    format's peak by the GPU's measured FP8 matmul ceiling against its bf16 one (precision.py):
    the plate's kernels reach the same share of what a GEMM can reach in either precision."""
    efficiency = kernel_efficiency(job, a)
    if not prec.is_fp8(job):
        return efficiency
    return min(efficiency * prec.fp8_ceiling_ratio(job), 1.0)


def gemm_s(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: Number) -> Number:
    """One layer's GEMMs, forward and backward, at their kernel efficiency (in FP8 under
    precision fp8), carried to their shapes (shape_factor) and, where asked, less what wave
    quantisation or short reductions take."""
    model, gpu = job.model, job.cluster.gpu
    avg_params = model.active_layer_params / model.num_layers

    def layer_factor(tokens: Number, tp: Number, ep: Number) -> Number:
        return shape_factor(job, a, kern.gemm_passes(model, tokens, tp, ep))

    efficiency: Number = layer_gemm_efficiency(job, a)
    if by_measured_shape(job, a):
        efficiency = efficiency * over_distinct(layer_factor, tokens, k.tp, k.ep)
    if gpu.sm_count is not None and a.gemm_wave_quantization:
        passes = kern.gemm_passes(model, tokens, k.tp, k.ep)
        tiles = (a.gemm_tile_rows, a.gemm_tile_cols)
        efficiency = efficiency * kern.layer_gemm_efficiency(passes, gpu.sm_count, *tiles)
    if a.gemm_reduction_overhead_elements > 0:
        efficiency = efficiency * reduction_factor(
            job, a, kern.gemm_passes(model, tokens, k.tp, k.ep)
        )
    peak = prec.layer_gemm_peak_flop_s(job)
    return tim.matmul_s(6 * avg_params, tokens, k.tp, peak, efficiency)


def head_shape_factor(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: Number) -> Number:
    """shape_factor of the output head's GEMMs (kernels.head_gemm_passes)."""

    def factor(tokens: Number, tp: Number) -> Number:
        return shape_factor(job, a, kern.head_gemm_passes(job.model, tokens, tp))

    return over_distinct(factor, tokens, k.tp) if by_measured_shape(job, a) else 1.0


def by_measured_shape(job: TrainingJob, a: CostAssumptions) -> bool:
    """Whether GEMMs are priced by their shapes: the GPU names a table and the what-if is on."""
    return job.cluster.gpu.gemm_table is not None and a.gemm_shape_throughput


def shape_factor(job: TrainingJob, a: CostAssumptions, passes: list[kern.GemmPass]) -> Number:
    """What the GEMMs' shapes make of the kernel efficiency, which is set at the plate's
    (Llama 3 405B, tp 8, 8,192 tokens): their measured throughput in the GPU's table
    (gemm_table.py) against the plate's layer in the same table; 1 where the GPU names no
    table or gemm_shape_throughput is off. FP8 GEMMs take the bf16 table's factor (the
    source's FP8 figures exceed H100's FP8 peak: models/presets/gemm_throughput.json)."""
    table = job.cluster.gpu.gemm_table
    if table is None or not by_measured_shape(job, a):
        return 1.0
    return kern.layer_measured_flop_s(passes, table) / plate_measured_flop_s(table)


def over_distinct(term: Callable[..., Number], *choices: Number) -> Number:
    """`term(*choices)` computed once for each distinct combination of the choices' values and
    spread back over their broadcast shape: a term of a few choices (a micro-batch's tokens,
    tp, ep) then costs, in time and memory, what those few combinations cost, however many
    rows of a table it prices."""
    arrays = [np.asarray(choice) for choice in choices]
    shape = np.broadcast_shapes(*(x.shape for x in arrays))
    if int(np.prod(shape)) <= DISTINCT_BELOW:
        return term(*arrays)
    distinct, codes, stride = [], np.zeros((), dtype=np.int64), 1
    for x in arrays:
        values, index = np.unique(x, return_inverse=True)
        distinct.append(values)
        codes = codes + index.reshape(x.shape) * stride
        stride *= len(values)
    used, inverse = np.unique(np.broadcast_to(codes, shape), return_inverse=True)
    args, rest = [], used
    for values in distinct:
        args.append(values[rest % len(values)])
        rest = rest // len(values)
    values = np.broadcast_to(np.asarray(term(*args)), used.shape)
    return values[inverse.reshape(shape)]


DISTINCT_BELOW = 64  # arrays this small are priced as they stand


@functools.cache
def plate_passes() -> list[kern.GemmPass]:
    return kern.gemm_passes(model_preset(PLATE_MODEL), PLATE_TOKENS, PLATE_TP, 1)


@functools.lru_cache(maxsize=8)
def plate_measured_flop_s(table: str) -> float:
    return float(kern.layer_measured_flop_s(plate_passes(), table))


def reduction_factor(job: TrainingJob, a: CostAssumptions, passes: list[kern.GemmPass]) -> Number:
    """What the layer's reduction depths (kernels.layer_reduction_efficiency) make of the
    kernel efficiency, against the plate's shapes, at which kernel_efficiency is set: 1 for
    Llama 3 405B at tp 8 on 8,192 tokens."""
    overhead = a.gemm_reduction_overhead_elements * prec.reduction_depth_factor(job)
    layer = kern.layer_reduction_efficiency(passes, overhead)
    return layer / plate_reduction_efficiency(overhead)


@functools.lru_cache(maxsize=64)
def plate_reduction_efficiency(overhead_elements: float) -> float:
    return float(kern.layer_reduction_efficiency(plate_passes(), overhead_elements))


def elementwise_s(
    job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: Number, forward_only: bool = False
) -> Number:
    """One layer's memory-bound elementwise kernels at HBM bandwidth (kernels.py): the fused
    ones, the eager ones the assumptions name, a clamped GLU's clamps unless fused and, under
    fp8, the casts of the GEMMs' operands; `forward_only`, the forward pass's alone (what
    op-level selective checkpointing replays; the FP8 casts are then left out, UNVERIFIED
    whether torchao's casts replay)."""
    model, bandwidth = job.model, job.cluster.gpu.memory_bandwidth_bytes_s
    if not a.elementwise_traffic or bandwidth is None:
        return 0.0
    sequence_parallel = a.sequence_parallel

    def seconds(bytes_per_token: tuple[float, float]) -> Number:
        return kern.hbm_s(bytes_per_token, tokens, k.tp, bandwidth, sequence_parallel)

    total = seconds(kern.elementwise_bytes_per_token(model, forward_only))
    if a.eager_norms or a.eager_pointwise or a.gqa_kv_copies:
        flags = (a.eager_norms, a.eager_pointwise, a.gqa_kv_copies)
        total = total + seconds(kern.eager_bytes_per_token(model, *flags, forward_only))
    if model.glu_clamp is not None and not a.fused_glu_clamp:
        total = total + seconds(kern.glu_clamp_bytes_per_token(model, forward_only))
    if prec.is_fp8(job) and not forward_only:
        total = total + seconds(
            kern.fp8_cast_bytes_per_token(model, prec.cast_bytes_per_value(job, a))
        )
    return total


def gradient_accumulation_s(job: TrainingJob, a: CostAssumptions, k: Degrees) -> Number:
    """One layer's gradient accumulation a micro-batch, where the engine runs it outside the
    weight-gradient GEMMs: its parameters on the rank (an MoE layer's local experts
    included) times gradient_accumulation_bytes_per_param, plus with pp the stage's
    pipelined_gradient_accumulation_bytes_per_param, at HBM bandwidth."""
    bandwidth = job.cluster.gpu.memory_bandwidth_bytes_s
    pipelined = a.pipelined_gradient_accumulation_bytes_per_param
    if bandwidth is None or not (a.gradient_accumulation_bytes_per_param or any(pipelined)):
        return 0.0
    with_pp = np.where(np.asarray(k.pp) > 1, per_synced_stage(pipelined, k), 0.0)
    params = mem.params_per_layer_per_device(job.model, k.tp, k.ep)
    return params * (a.gradient_accumulation_bytes_per_param + with_pp) / bandwidth


def attention_efficiency(job: TrainingJob, a: CostAssumptions) -> float:
    """The request's, else the GPU preset's (else FlashAttention-2's on H100) carried to the
    kernel the engine runs (attention_kernels.py); times the request's
    attention_kernel_efficiency_scale, at most 1."""
    preset = job.cluster.gpu.attention_efficiency or DEFAULT_ATTENTION_EFFICIENCY
    return a.attention_efficiency_or(preset * attn_kernels.attention_kernel_factor(job, a))


def attention_rate(job: TrainingJob, a: CostAssumptions) -> Callable[[float], float] | None:
    """Fused attention's relative throughput by attended keys on this GPU's architecture
    (attention_table.py), where its preset names one and the request prices it; None: one
    efficiency for every length."""
    table = job.cluster.gpu.gemm_table
    if table is None or not a.attention_length_throughput:
        return None
    return functools.partial(attn_table.relative_rate, table)


def attention_time_s(job: TrainingJob, a: CostAssumptions, k: Degrees, tokens: Number) -> Number:
    """Fused: the causal share of the square (of a windowed layer, its band; of a chunked one,
    its chunks') at the attention kernels' efficiency, less what short sequences and windows
    take from it (attention_rate). Unfused: the whole square as batched matmuls, plus the scores
    streamed through HBM; a window is a mask there, which saves nothing."""
    model, gpu, s = job.model, job.cluster.gpu, job.training.seq_len
    if a.fused_attention:
        share = tim.attention_work_share(
            s,
            model.sliding_window,
            model.windowed_layers,
            model.num_layers,
            a.causal_attention_work_fraction,
            model.attention_chunk_size,
            model.chunked_layers,
            attention_rate(job, a),
        )
        return tim.attention_s(
            model.q_width,
            s,
            tokens,
            k.tp,
            gpu.peak_flop_s,
            attention_efficiency(job, a),
            share,
            tim.FUSED_ATTENTION_KERNEL_FLOPS_RATIO,
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


def every_second_matmul_share(model: TransformerSpec) -> float:
    """Share of a token's forward GEMM FLOPs in the matmuls that op-level selective
    checkpointing recomputes: it saves every compute op's output except every second mm of
    a layer's forward, counted afresh per layer (pytorch/torchtitan 0.3.0
    torchtitan/distributed/activation_checkpoint.py l.185-287, "Save all compute/comm ops,
    except every second mm/linear"). In execution order: Q, K, V (MLA: its latent
    projections), the output, then the MLP's gate, up and down (fc1, fc2); an MoE layer's
    router, then its experts, which run as grouped matmuls, not aten.mm, and are taken as
    saved (UNVERIFIED: whether the save list holds aten._grouped_mm was not read; no model
    torchtitan's registry names here is an MoE one)."""
    h = model.hidden_size
    attention = _attention_matmuls(model)
    mlp = [h * model.ffn_hidden_size] * model.mlp_matrices
    dense = sum((attention + mlp)[1::2])
    moe = sum((attention + [model.router_params])[1::2])
    dense_layers = model.num_layers - model.num_moe_layers
    recomputed = dense_layers * dense + model.num_moe_layers * moe
    return recomputed / model.active_layer_params


def _attention_matmuls(model: TransformerSpec) -> list[int]:
    """A layer's attention matrices (parameters = forward FLOPs / 2 per token) in the order
    its forward multiplies them."""
    h, a, q = model.hidden_size, model.num_attention_heads, model.q_width
    if model.kv_lora_rank is None:
        return [h * q, h * model.kv_width // 2, h * model.kv_width // 2, q * h]
    qk, v = model.qk_head_dim_size, model.v_head_dim_size
    rope, rank = model.qk_rope_head_dim or 0, model.kv_lora_rank
    queries = (
        [h * a * qk]
        if model.q_lora_rank is None
        else [
            h * model.q_lora_rank,
            model.q_lora_rank * a * qk,
        ]
    )
    return [*queries, h * (rank + rope), rank * a * (qk - rope + v), a * v * h]
