"""Profile `standard`, kernels by shape: how a layer's matrix multiplications fill the GPU, and
the memory-bound elementwise work beside them (docs/cost-model.md, "standard: kernels").

One kernel efficiency for every shape over-predicted small models and under-predicted large
ones. What replaces part of it:

- **Measured throughput by shape** (on by default where the GPU names a table). Each GEMM
  pass (gemm_passes) at its shape's throughput in XLA's measured bf16 table for H100 and
  B200 (gemm_table.py), relative to the plate's layer, where kernel_efficiency is set.
- **Wave quantisation.** A GEMM whose output is tiled into C tiles of `tile_m x tile_n` runs
  in ceil(C / S) waves on S SMs, and a part-full wave costs a full one: efficiency
  C / (S * ceil(C / S)) (NVIDIA, "Matrix Multiplication Background User's Guide",
  DU-09799-001, sections 3.1-3.2; Anthony et al. 2024, arXiv 2401.14489). Forward, input
  gradient and weight gradient GEMMs have different output shapes (M x N, M x K, N x K).
- **Short reductions.** A tile's main loop runs over the GEMM's reduction depth; its fixed
  cost (filling the pipeline, the epilogue) weighs more when that depth is short, as the
  output projection's and MLP-down's q / tp and f / tp are at high tp. DeepGEMM's published
  FP8 GEMMs on H800 at M = 4,096 (deepseek-ai/DeepGEMM@327ec92 README.md l.38-59) fall from
  1,520 TFLOPS at K = 16,384 to 1,410 at 7,168, 1,212 at 1,536 and 775 at 512: depth /
  (depth + K0) with K0 = 550 FP8 elements fits those four within 7%. A what-if, off by
  default (`gemm_reduction_overhead_elements`): it does not follow validation's trend, and the
  measured table already holds short reductions.
- **Elementwise traffic.** Norms, residual adds, rotary embeddings and the MLP's activation
  read and write activations at HBM speed; their time per token grows with h while the
  GEMMs' grows with h^2, so small models and fast GPUs lose most.

`kernel_efficiency` stays the efficiency of a large GEMM in a real step; this module only
charges what shape and memory traffic take from it. Pure functions broadcasting over numpy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from models.transformer import TransformerSpec
from optimizer.costmodel.standard import gemm_table
from optimizer.costmodel.standard.gemm_table import GemmPass

Number = Any
BF16_BYTES = 2


def wave_efficiency(rows: Number, cols: Number, sm_count: int, tile_m: int, tile_n: int) -> Number:
    """Share of the SMs' time a GEMM with a `rows x cols` output keeps busy."""
    tiles = np.ceil(rows / tile_m) * np.ceil(cols / tile_n)
    waves = np.ceil(tiles / sm_count)
    return tiles / (waves * sm_count)


def gemm_passes(model: TransformerSpec, tokens: Number, tp: Number, ep: Number) -> list[GemmPass]:
    """Every GEMM pass of one layer (averaged over dense and MoE layers) on one tp rank for a
    micro-batch of `tokens`: QKV, the output projection, the MLP's up (gate and up together
    when gated) and down, column- and row-parallel over tp (Megatron-LM's split); in an MoE
    layer the routed experts instead of the MLP, each of the rank's num_experts / ep local
    experts on its ep x tokens x top-k / num_experts routed copies (balanced routing), and
    the shared experts on every token (three_passes: forward, input and weight gradient)."""
    h, q, kv = model.hidden_size, model.q_width, model.kv_width
    up, share = model.mlp_matrices - 1, model.moe_layer_share
    # (batch, rows, N, K, FLOP weight: parameters a token multiplies)
    gemms: list[tuple[Number, Number, Number, Number, Number]] = [
        (1, tokens, (q + kv) / tp, h, (q + kv) * h),
        (1, tokens, h, q / tp, q * h),
    ]
    if share < 1:
        f = model.ffn_hidden_size
        gemms += [(1, tokens, up * f / tp, h, (1 - share) * up * f * h)]
        gemms += [(1, tokens, h, f / tp, (1 - share) * f * h)]
    if share > 0:
        fe, experts, top_k = (
            model.expert_ffn_hidden_size or 0,
            model.num_experts,
            model.experts_per_token,
        )
        local, routed = experts / ep, ep * tokens * top_k / experts
        gemms += [(local, routed, up * fe / tp, h, share * top_k * up * fe * h)]
        gemms += [(local, routed, h, fe / tp, share * top_k * fe * h)]
        shared = model.num_shared_experts * fe
        if shared:
            gemms += [(1, tokens, up * shared / tp, h, share * up * shared * h)]
            gemms += [(1, tokens, h, shared / tp, share * shared * h)]
    return three_passes(gemms)


def head_gemm_passes(model: TransformerSpec, tokens: Number, tp: Number) -> list[GemmPass]:
    """The output head's GEMM passes on one tp rank: tokens x V / tp over h, vocabulary-
    parallel (Megatron-LM's split)."""
    h = model.hidden_size
    return three_passes([(1, tokens, model.vocab_size / tp, h, model.vocab_size * h)])


def three_passes(gemms: list[tuple[Number, Number, Number, Number, Number]]) -> list[GemmPass]:
    """Forward, input-gradient and weight-gradient passes of each (batch, rows, N, K, FLOP
    weight) GEMM, with their shares of the FLOPs."""
    total = sum(weight for *_, weight in gemms)
    return [
        GemmPass(batch, rows_, cols_, depth_, weight / total / 3)
        for batch, rows, n, k, weight in gemms
        for rows_, cols_, depth_ in ((rows, n, k), (rows, k, n), (n, k, rows))
    ]


def flop_weighted(passes: list[GemmPass], efficiencies: Iterable[Number]) -> Number:
    """A layer's GEMM efficiency from each pass's: the layer's time is the sum of each pass's
    FLOPs over its efficiency (a FLOP-weighted harmonic mean)."""
    seconds_per_flop: Number = 0.0
    for gemm, efficiency in zip(passes, efficiencies, strict=True):
        seconds_per_flop = seconds_per_flop + gemm.share / efficiency
    return 1.0 / seconds_per_flop


def layer_gemm_efficiency(
    passes: list[GemmPass], sm_count: int, tile_m: int, tile_n: int
) -> Number:
    """Wave efficiency of one layer's GEMM passes (gemm_passes), FLOP-weighted; a grouped
    call's GEMMs share the waves."""
    return flop_weighted(
        passes,
        [wave_efficiency(g.batch * g.rows, g.cols, sm_count, tile_m, tile_n) for g in passes],
    )


def reduction_efficiency(depth: Number, overhead_elements: float) -> Number:
    """Share of a GEMM tile's time spent in its main loop over a reduction of `depth`
    elements, against a fixed cost per tile (pipeline fill, epilogue) worth
    `overhead_elements` of that loop: depth / (depth + overhead)."""
    return depth / (depth + overhead_elements)


def layer_reduction_efficiency(passes: list[GemmPass], overhead_elements: float) -> Number:
    """Main-loop share of one layer's GEMM passes (gemm_passes), FLOP-weighted."""
    return flop_weighted(passes, [reduction_efficiency(g.depth, overhead_elements) for g in passes])


def layer_measured_flop_s(passes: list[GemmPass], table: str) -> Number:
    """One layer's GEMM FLOP/s with each pass at its shape's measured throughput in `table`
    (gemm_table.measured_flop_s), FLOP-weighted."""
    return flop_weighted(passes, gemm_table.measured_flop_s(table, passes))


def elementwise_bytes_per_token(
    model: TransformerSpec, forward_only: bool = False
) -> tuple[float, float]:
    """HBM bytes one layer's memory-bound elementwise kernels move per token, forward and
    backward (or forward alone), in bf16: (on the full hidden state, on the tp-split
    projections).

    Hidden state: two norms forward (read and write h: 8h) and backward (read input and
    gradient, write a gradient: 12h); two residual adds forward (read 2h, write h: 12h) and
    their gradients backward (12h). Projections: rotary on Q and K forward and backward
    (read and write: 4(q + k) each way); the MLP activation, SwiGLU forward (read gate and
    up, write their product: 6f) and backward (read both and the gradient, write two: 10f),
    GeLU 4f and 6f; MoE layers count each routed and shared expert copy, and the dispatch
    and combine permutations (read and write h per copy: 4h each way). Attention's own
    traffic is inside the fused attention kernel."""
    h, q = model.hidden_size, model.q_width

    def bytes_of(by_pass: tuple[int, int]) -> int:
        return passes_bytes(by_pass, forward_only)

    norms_and_adds = NORMS_PER_LAYER * (bytes_of(FUSED_NORM_BYTES) + bytes_of(RESIDUAL_ADD_BYTES))
    rotary = bytes_of(FUSED_ROTARY_BYTES) * (q + model.kv_width / 2)
    per_f = bytes_of(FUSED_SWIGLU_BYTES if model.gated_mlp else FUSED_GELU_BYTES)
    permutations = model.moe_layer_share * model.experts_per_token * bytes_of(PERMUTE_BYTES) * h
    projections = rotary + per_f * model.mlp_width_per_token + permutations
    return float(norms_and_adds * h), float(projections)


def passes_bytes(by_pass: tuple[int, int], forward_only: bool) -> int:
    """A kernel's (forward, backward) bytes a value: both passes, or the forward alone."""
    return by_pass[0] if forward_only else by_pass[0] + by_pass[1]


# A residual add reads two values and writes one (6 bytes in bf16); its gradient backward
# as much; two a layer, one after each norm's sublayer. An MoE permutation reads and writes
# each copy's h once a pass.
RESIDUAL_ADD_BYTES = (6, 6)
PERMUTE_BYTES = (4, 4)
# HBM bytes an element of the hidden state moves through one RMSNorm, forward and backward,
# as eager fp32 ops (pytorch/torchtitan@9dec370 torchtitan/models/norms.py l.96-101) and as a
# fused kernel (4 + 6: elementwise_bytes_per_token's 8h + 12h for two norms), forward and
# backward. Forward: x.float()
# 2+4, pow 4+4, mean 4, x * rsqrt 4+4, type_as 4+2, * weight 2+2 = 36. Backward through
# autograd's formulas: * weight 2+2 and its weight gradient (mul 2+2+2, sum 2) = 12, type_as
# 2+4, x * rsqrt 4+4 and its rsqrt gradient (mul 4+4+4, sum 4) = 24, mean's expand 4, pow's
# grad * 2 * x.pow(1) (copy 4+4, scale 4+4, mul 4+4+4) = 28, the two x gradients summed
# 4+4+4, float's 4+2: 92.
EAGER_NORM_BYTES = (36, 92)  # (forward, backward), as each constant below
FUSED_NORM_BYTES = (4, 6)
NORMS_PER_LAYER = 2
# Rotary through fp32 complex numbers (model.py l.108-113): forward float 2+4, complex mul
# 4+4, type_as 4+2 = 20; backward the same three in reverse, 20; fused, read and write
# each way: 4 + 4.
EAGER_ROTARY_BYTES = (20, 20)
FUSED_ROTARY_BYTES = (4, 4)
# SwiGLU as F.silu(w1(x)) * w3(x) (model.py l.253): forward silu 2+2, mul 2+2+2 = 10;
# backward the mul's two gradients 4+2 each, silu's 2+2+2: 18; fused 6 + 10; GeLU 4 + 6.
EAGER_SWIGLU_BYTES = (10, 18)
FUSED_SWIGLU_BYTES = (6, 10)
FUSED_GELU_BYTES = (4, 6)
# The attention output's transpose(1, 2).contiguous() (model.py l.210-212): a read and a
# write each way.
LAYOUT_COPY_BYTES = (4, 4)
# repeat_kv: forward reads kv and writes 2q, backward reads 2q and writes kv, in bf16; per
# value of (kv + 2q) a pass.
KV_COPY_BYTES = (BF16_BYTES, BF16_BYTES)


# A clamped GLU's clamps as eager ops (Megatron-Core's bf16 path: input.chunk(2), x_glu.clamp,
# x_linear.clamp, torch.cat): forward, each clamp reads and writes its half (4 values of f per
# copy) and the cat reads and writes both (4): 8 values of 2 bytes; backward, each clamp's
# gradient reads the gradient and the input and writes one (6), and chunk's gradient
# concatenates the halves' (4): 10. Bytes per value of the MLP's width f (f_e an expert copy).
EAGER_GLU_CLAMP_BYTES = (16, 20)


def glu_clamp_bytes_per_token(
    model: TransformerSpec, forward_only: bool = False
) -> tuple[float, float]:
    """HBM bytes per token and layer a clamped GLU's eager clamps move, forward and backward
    (or forward alone): (0 on the hidden state, on the tp-split projections), for each dense
    MLP and each routed and shared expert copy (mlp_width_per_token)."""
    by_value = passes_bytes(EAGER_GLU_CLAMP_BYTES, forward_only)
    return 0.0, float(by_value * model.mlp_width_per_token)


def eager_bytes_per_token(
    model: TransformerSpec,
    norms: bool,
    pointwise: bool,
    kv_copies: bool,
    forward_only: bool = False,
) -> tuple[float, float]:
    """HBM bytes per token and layer that eager PyTorch kernels move beyond the fused ones
    elementwise_bytes_per_token counts, forward and backward (or forward alone): (on the
    full hidden state, on the tp-split projections). `norms`: RMSNorm as fp32 ops;
    `pointwise`: rotary through complex numbers, SwiGLU as two kernels (each routed and
    shared expert copy too) and the attention output's layout copy; `kv_copies`: repeat_kv's
    K and V at the query width, forward (read kv, write 2q) and their gradients summed back
    (read 2q, write kv)."""
    h, q, kv = model.hidden_size, model.q_width, model.kv_width

    def extra(eager: tuple[int, int], fused: tuple[int, int] = (0, 0)) -> int:
        return passes_bytes(eager, forward_only) - passes_bytes(fused, forward_only)

    hidden = NORMS_PER_LAYER * extra(EAGER_NORM_BYTES, FUSED_NORM_BYTES) * h
    projections = 0.0
    if pointwise:
        rotary = extra(EAGER_ROTARY_BYTES, FUSED_ROTARY_BYTES) * (q + kv / 2)
        per_f = extra(EAGER_SWIGLU_BYTES, FUSED_SWIGLU_BYTES)
        mlp = per_f * model.mlp_width_per_token if model.gated_mlp else 0.0
        projections = rotary + mlp + extra(LAYOUT_COPY_BYTES) * q
    if kv_copies and model.num_kv_heads < model.num_attention_heads:
        projections += extra(KV_COPY_BYTES) * (kv + 2 * q)
    return (float(hidden) if norms else 0.0), float(projections)


def fp8_cast_bytes_per_token(model: TransformerSpec, bytes_per_value: float) -> tuple[float, float]:
    """HBM bytes one layer's FP8 casts move per token, forward and backward: (on the full
    hidden state, on the tp-split projections), as elementwise_bytes_per_token splits them.

    Each GEMM casts the operand it takes from bf16: its input forward, its output gradient
    backward (the weights are cast once a step, under 0.1% of these bytes at any micro-batch
    count priced here, and are left out). Hidden-state operands: the QKV and MLP-up inputs
    (the norms' outputs) and the output gradients of the attention and MLP-down projections
    (h each); projections: the QKV output gradient (q + kv), the attention output (q), the
    MLP-up output gradient (f, 2f gated) and the MLP-down input (f); an MoE layer's experts
    cast the same per routed and shared copy (2h + (1 or 2) f_e + f_e). Attention's own
    batched matmuls stay in bf16."""
    h, q, kv = model.hidden_size, model.q_width, model.kv_width
    moe_share = model.moe_layer_share
    expert_inputs = moe_share * model.expert_copies_per_token * 2 * h
    hidden = 2 * h + (1 - moe_share) * 2 * h
    projections = 2 * q + kv + model.mlp_matrices * model.mlp_width_per_token + expert_inputs
    return float(bytes_per_value * hidden), float(bytes_per_value * projections)


def hbm_s(
    bytes_per_token: tuple[float, float],
    tokens: Number,
    tp: Number,
    memory_bytes_s: float,
    sequence_parallel: bool,
) -> Number:
    """Seconds one rank spends moving (hidden-state, projection) bytes per token at HBM
    bandwidth: the projections' share of the tokens' work is split over tp; the hidden
    state's is too with sequence parallelism, else every tp rank does all of it."""
    hidden, projections = bytes_per_token
    hidden_share = tokens / tp if sequence_parallel else tokens
    return (hidden * hidden_share + projections * tokens / tp) / memory_bytes_s
