"""One layer's compute time under profile `standard`: its GEMMs at the kernel efficiency (the
plate's H100 figure carried to each GPU by its measured matmul ceiling), less what wave
quantisation takes, plus the elementwise work beside them (docs/cost-model.md, "Kernels");
attention's is attention.py's."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.hardware import GpuSpec
from models.job import TrainingJob
from models.presets import model_preset
from models.transformer import TransformerSpec
from optimizer.costmodel.assumptions import (
    PLATE_GPU_MATMUL_EFFICIENCY,
    PLATE_KERNEL_EFFICIENCY,
    CostAssumptions,
)
from optimizer.costmodel.standard import kernels as kern
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import precision as prec
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.degrees import Degrees, per_synced_stage

Number = Any

# The plate's layout, at whose GEMM shapes the kernel efficiency is set (docs/cost-model.md,
# "Reference figures"): Llama 3 405B, tp 8, one 8,192-token sequence a micro-batch.
PLATE_MODEL, PLATE_TP, PLATE_TOKENS = "llama3-405b", 8, 8192


def kernel_efficiency(job: TrainingJob, a: CostAssumptions) -> float:
    """The request's, else the plate's H100 figure scaled by this GPU's measured matmul
    ceiling against H100's (a GPU without one keeps the plate's); times the request's
    kernel_efficiency_scale (a calibration's ratio), at most 1."""
    ceiling = job.cluster.gpu.matmul_efficiency or PLATE_GPU_MATMUL_EFFICIENCY
    return a.matmul_efficiency_or(PLATE_KERNEL_EFFICIENCY * ceiling / PLATE_GPU_MATMUL_EFFICIENCY)


def layer_gemm_efficiency(kernel_efficiency: float, gpu: GpuSpec, precision: str) -> float:
    """The kernel efficiency of the transformer layers' GEMMs against the peak they run at.
    Under fp8 and mxfp8 the `kernel_efficiency` (a share of the bf16 peak) is carried to the
    format's peak by the GPU's measured FP8 matmul ceiling against its bf16 one (precision.py):
    the plate's kernels reach the same share of what a GEMM can reach in either precision."""
    if not prec.is_fp8(precision):
        return kernel_efficiency
    return min(kernel_efficiency * prec.fp8_ceiling_ratio(gpu, precision), 1.0)


@dataclass(frozen=True)
class GemmRates:
    """What a layer's GEMM time reads besides the model and the layout (gemm_rates)."""

    peak_flop_s: float  # the layers' GEMMs' dense peak: the format's under fp8, else bf16's
    efficiency: float  # layer_gemm_efficiency: their kernel efficiency at the plate's shapes
    shape_table: str | None  # the measured table they are priced by shape from; None: not
    wave_sm_count: int | None  # the SMs wave quantisation is priced over; None: not priced
    tile: tuple[int, int]  # an output tile's rows and columns, for wave quantisation
    reduction_overhead_elements: float  # a reduction's fixed overhead, in elements; 0: none


def gemm_rates(job: TrainingJob, a: CostAssumptions) -> GemmRates:
    """The request's GEMM rates: its GPU's, in its precision, under its assumptions."""
    gpu, precision = job.cluster.gpu, job.training.precision
    waves = a.gemm_wave_quantization and gpu.sm_count is not None
    overhead = a.gemm_reduction_overhead_elements
    return GemmRates(
        peak_flop_s=prec.layer_gemm_peak_flop_s(gpu, precision),
        efficiency=layer_gemm_efficiency(kernel_efficiency(job, a), gpu, precision),
        shape_table=gemm_shape_table(gpu, a.gemm_shape_throughput),
        wave_sm_count=gpu.sm_count if waves else None,
        tile=(a.gemm_tile_rows, a.gemm_tile_cols),
        reduction_overhead_elements=(
            overhead * prec.reduction_depth_factor(precision) if overhead > 0 else 0.0
        ),
    )


def gemm_s(model: TransformerSpec, rates: GemmRates, k: Degrees, tokens: Number) -> Number:
    """One layer's GEMMs, forward and backward, at their kernel efficiency (in FP8 under
    precision fp8), carried to their shapes (shape_factor) and, where asked, less what wave
    quantisation or short reductions take."""
    avg_params = model.active_layer_params / model.num_layers
    table = rates.shape_table

    def layer_factor(tokens: Number, tp: Number, ep: Number) -> Number:
        return shape_factor(kern.gemm_passes(model, tokens, tp, ep), table)

    efficiency: Number = rates.efficiency
    if table is not None:
        efficiency = efficiency * over_distinct(layer_factor, tokens, k.tp, k.ep)
    if rates.wave_sm_count is not None:
        passes = kern.gemm_passes(model, tokens, k.tp, k.ep)
        waves = kern.layer_gemm_efficiency(passes, rates.wave_sm_count, *rates.tile)
        efficiency = efficiency * waves
    if rates.reduction_overhead_elements > 0:
        passes = kern.gemm_passes(model, tokens, k.tp, k.ep)
        efficiency = efficiency * reduction_factor(passes, rates.reduction_overhead_elements)
    return tim.matmul_s(6 * avg_params, tokens, k.tp, rates.peak_flop_s, efficiency)


def head_shape_factor(
    model: TransformerSpec, shape_table: str | None, k: Degrees, tokens: Number
) -> Number:
    """shape_factor of the output head's GEMMs (kernels.head_gemm_passes); 1 where GEMMs are
    not priced by shape (no `shape_table`)."""

    def factor(tokens: Number, tp: Number) -> Number:
        return shape_factor(kern.head_gemm_passes(model, tokens, tp), shape_table)

    return over_distinct(factor, tokens, k.tp) if shape_table is not None else 1.0


def gemm_shape_table(gpu: GpuSpec, by_shape: bool) -> str | None:
    """The measured table GEMMs are priced by shape from: the GPU's, where it names one and
    the what-if (gemm_shape_throughput, `by_shape`) is on; else None."""
    return gpu.gemm_table if by_shape else None


def shape_factor(passes: list[kern.GemmPass], table: str | None) -> Number:
    """What the GEMMs' shapes make of the kernel efficiency, which is set at the plate's
    (Llama 3 405B, tp 8, 8,192 tokens): their measured throughput in `table` (the GPU's,
    gemm_table.py) against the plate's layer in the same table; 1 without a table (the GPU
    names none or gemm_shape_throughput is off: gemm_shape_table). FP8 GEMMs take the bf16
    table's factor (the source's FP8 figures exceed H100's FP8 peak:
    models/presets/gemm_throughput.json)."""
    if table is None:
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


def reduction_factor(passes: list[kern.GemmPass], overhead_elements: float) -> Number:
    """What the layer's reduction depths (kernels.layer_reduction_efficiency, each with a
    fixed `overhead_elements`) make of the kernel efficiency, against the plate's shapes, at
    which kernel_efficiency is set: 1 for Llama 3 405B at tp 8 on 8,192 tokens."""
    layer = kern.layer_reduction_efficiency(passes, overhead_elements)
    return layer / plate_reduction_efficiency(overhead_elements)


@functools.lru_cache(maxsize=64)
def plate_reduction_efficiency(overhead_elements: float) -> float:
    return float(kern.layer_reduction_efficiency(plate_passes(), overhead_elements))


@dataclass(frozen=True)
class ElementwiseKernels:
    """What a layer's memory-bound kernels read besides the model and the layout
    (elementwise_kernels)."""

    hbm_bytes_s: float | None  # None: not priced (no HBM bandwidth, or elementwise_traffic off)
    sequence_parallel: bool  # the norms' and pointwise kernels' tokens split over tp
    eager: tuple[bool, bool, bool]  # eager_norms, eager_pointwise, gqa_kv_copies
    fused_glu_clamp: bool
    cast_bytes_per_value: float | None  # a GEMM operand's quantisation; None in bf16


def elementwise_kernels(job: TrainingJob, a: CostAssumptions) -> ElementwiseKernels:
    """The request's elementwise kernels: its GPU's bandwidth, its engine's kernels."""
    precision, bandwidth = job.training.precision, job.cluster.gpu.memory_bandwidth_bytes_s
    cast = prec.cast_bytes_per_value(precision, a.fp8_cast_bytes_per_value)
    return ElementwiseKernels(
        hbm_bytes_s=bandwidth if a.elementwise_traffic else None,
        sequence_parallel=a.sequence_parallel,
        eager=(a.eager_norms, a.eager_pointwise, a.gqa_kv_copies),
        fused_glu_clamp=a.fused_glu_clamp,
        cast_bytes_per_value=cast if prec.is_fp8(precision) else None,
    )


def elementwise_s(
    model: TransformerSpec,
    kernels: ElementwiseKernels,
    k: Degrees,
    tokens: Number,
    forward_only: bool = False,
) -> Number:
    """One layer's memory-bound elementwise kernels at HBM bandwidth (kernels.py): the fused
    ones, the eager ones the assumptions name, a clamped GLU's clamps unless fused and, under
    fp8, the casts of the GEMMs' operands; `forward_only`, the forward pass's alone (what
    op-level selective checkpointing replays; the FP8 casts are then left out, UNVERIFIED
    whether torchao's casts replay)."""
    bandwidth = kernels.hbm_bytes_s
    if bandwidth is None:
        return 0.0
    sequence_parallel = kernels.sequence_parallel

    def seconds(bytes_per_token: tuple[float, float]) -> Number:
        return kern.hbm_s(bytes_per_token, tokens, k.tp, bandwidth, sequence_parallel)

    total = seconds(kern.elementwise_bytes_per_token(model, forward_only))
    if any(kernels.eager):
        total = total + seconds(kern.eager_bytes_per_token(model, *kernels.eager, forward_only))
    if model.glu_clamp is not None and not kernels.fused_glu_clamp:
        total = total + seconds(kern.glu_clamp_bytes_per_token(model, forward_only))
    if kernels.cast_bytes_per_value is not None and not forward_only:
        cast = kernels.cast_bytes_per_value
        total = total + seconds(kern.fp8_cast_bytes_per_token(model, cast))
    return total


def gradient_accumulation_s(
    model: TransformerSpec,
    k: Degrees,
    bytes_per_param: float,
    pipelined_bytes_per_param: list[float],
    hbm_bytes_s: float | None,
) -> Number:
    """One layer's gradient accumulation a micro-batch, where the engine runs it outside the
    weight-gradient GEMMs: its parameters on the rank (an MoE layer's local experts
    included) times `bytes_per_param` (gradient_accumulation_bytes_per_param), plus with pp
    the stage's `pipelined_bytes_per_param` (by ZeRO stage 0-2), at HBM bandwidth."""
    bandwidth, pipelined = hbm_bytes_s, pipelined_bytes_per_param
    if bandwidth is None or not (bytes_per_param or any(pipelined)):
        return 0.0
    with_pp = np.where(np.asarray(k.pp) > 1, per_synced_stage(pipelined, k), 0.0)
    params = mem.params_per_layer_per_device(model, k.tp, k.ep)
    return params * (bytes_per_param + with_pp) / bandwidth


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
