"""Profile `standard`, kernels by shape: how a layer's matrix multiplications fill the GPU, and
the memory-bound elementwise work beside them (docs/cost-model.md, "standard: kernels").

One kernel efficiency for every shape over-predicted small models and under-predicted large
ones. Two effects with a closed form and a source replace part of it:

- **Wave quantisation.** A GEMM whose output is tiled into C tiles of `tile_m x tile_n` runs
  in ceil(C / S) waves on S SMs, and a part-full wave costs a full one: efficiency
  C / (S * ceil(C / S)) (NVIDIA, "Matrix Multiplication Background User's Guide",
  DU-09799-001, sections 3.1-3.2; Anthony et al. 2024, arXiv 2401.14489). Forward, input
  gradient and weight gradient GEMMs have different output shapes (M x N, M x K, N x K).
- **Elementwise traffic.** Norms, residual adds, rotary embeddings and the MLP's activation
  read and write activations at HBM speed; their time per token grows with h while the
  GEMMs' grows with h^2, so small models and fast GPUs lose most.

`kernel_efficiency` stays the efficiency of a large GEMM in a real step; this module only
charges what shape and memory traffic take from it. Pure functions broadcasting over numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.transformer import TransformerSpec

Number = Any
BF16_BYTES = 2


def wave_efficiency(rows: Number, cols: Number, sm_count: int, tile_m: int, tile_n: int) -> Number:
    """Share of the SMs' time a GEMM with a `rows x cols` output keeps busy."""
    tiles = np.ceil(rows / tile_m) * np.ceil(cols / tile_n)
    waves = np.ceil(tiles / sm_count)
    return tiles / (waves * sm_count)


def gemm_shapes(model: TransformerSpec, tp: Number) -> list[tuple[Number, Number, float]]:
    """(N, K, share of the layer's GEMM FLOPs) of each dense-layer GEMM on one tp rank: QKV,
    output projection, MLP up (gate and up together when gated) and down, column- and
    row-parallel over tp (Megatron-LM's split)."""
    h, q, kv = model.hidden_size, model.q_width, model.kv_width
    up = model.mlp_matrices - 1  # gate and up, or the single fc1
    f = model.ffn_hidden_size
    shapes = [((q + kv) / tp, h), (h, q / tp), (up * f / tp, h), (h, f / tp)]
    weights = [(q + kv) * h, q * h, up * f * h, f * h]
    total = float(sum(weights))
    return [(n, k, w / total) for (n, k), w in zip(shapes, weights, strict=True)]


def layer_gemm_efficiency(
    model: TransformerSpec,
    tokens: Number,
    tp: Number,
    sm_count: int,
    tile_m: int,
    tile_n: int,
) -> Number:
    """Wave efficiency of one layer's GEMMs over forward and backward, FLOP-weighted: each
    GEMM's three passes (output M x N, input gradient M x K, weight gradient N x K) do equal
    FLOPs, so the layer's time is the sum of each pass's FLOPs over its efficiency."""
    seconds_per_flop = 0.0
    for n, k, share in gemm_shapes(model, tp):
        for rows, cols in ((tokens, n), (tokens, k), (n, k)):
            efficiency = wave_efficiency(rows, cols, sm_count, tile_m, tile_n)
            seconds_per_flop = seconds_per_flop + share / 3 / efficiency
    return 1.0 / seconds_per_flop


def elementwise_bytes_per_token(model: TransformerSpec) -> tuple[float, float]:
    """HBM bytes one layer's memory-bound elementwise kernels move per token, forward and
    backward, in bf16: (on the full hidden state, on the tp-split projections).

    Hidden state: two norms forward (read and write h: 8h) and backward (read input and
    gradient, write a gradient: 12h); two residual adds forward (read 2h, write h: 12h) and
    their gradients backward (12h). Projections: rotary on Q and K forward and backward
    (read and write: 8(q + k)); the MLP activation, SwiGLU forward (read gate and up, write
    their product: 6f) and backward (read both and the gradient, write two: 10f), GeLU 4f
    and 6f; MoE layers count each routed and shared expert copy, and the dispatch and
    combine permutations (read and write h per copy, both ways: 8h). Attention's own traffic
    is inside the fused attention kernel."""
    h, q = model.hidden_size, model.q_width
    rotary = 8 * (q + model.kv_width / 2)
    per_f = 16 if model.gated_mlp else 10
    dense = per_f * model.ffn_hidden_size
    moe = 0.0
    if model.is_moe and model.expert_ffn_hidden_size is not None:
        copies = model.experts_per_token + model.num_shared_experts
        moe = copies * per_f * model.expert_ffn_hidden_size + model.experts_per_token * 8 * h
    moe_share = model.num_moe_layers / model.num_layers
    projections = rotary + (1 - moe_share) * dense + moe_share * moe
    return float(44 * h), float(projections)


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
    up = model.mlp_matrices - 1
    moe_share = model.num_moe_layers / model.num_layers
    dense_mlp = (up + 1) * model.ffn_hidden_size
    moe_mlp = 0.0
    if model.is_moe and model.expert_ffn_hidden_size is not None:
        copies = model.experts_per_token + model.num_shared_experts
        moe_mlp = copies * (2 * h + (up + 1) * model.expert_ffn_hidden_size)
    hidden = 2 * h + (1 - moe_share) * 2 * h
    projections = 2 * q + kv + (1 - moe_share) * dense_mlp + moe_share * moe_mlp
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


def elementwise_s(
    model: TransformerSpec,
    tokens: Number,
    tp: Number,
    memory_bytes_s: float,
    sequence_parallel: bool,
) -> Number:
    """Seconds of one layer's elementwise kernels on one rank, at HBM bandwidth."""
    return hbm_s(elementwise_bytes_per_token(model), tokens, tp, memory_bytes_s, sequence_parallel)
