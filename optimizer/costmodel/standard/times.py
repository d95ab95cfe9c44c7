"""Profile `standard`, time: compute, recompute, every collective and the pipeline schedule
(docs/cost-model.md, "standard: time"). Pure functions that broadcast over numpy arrays.

Units: FLOPs, bytes, bytes/s, seconds. "Per layer" means one layer on one micro-batch on
one device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from models.hardware import fits_one_domain
from optimizer.costmodel.standard.memory import (
    BF16_BYTES,
    RECOMPUTE_FULL,
    RECOMPUTE_SELECTIVE,
    SCHEDULE_DUALPIPE,
    SCHEDULE_ZERO_BUBBLE,
)
from optimizer.costmodel.workshop.formulas import ring_allreduce_bytes

Number = Any

# Ring / all-gather context parallelism moves each rank's K/V (c-1)/c of the sequence once
# forward, and again backward together with their gradients dK, dV: three passes (Llama 3's
# all-gather: gather K, V forward, gather again and reduce-scatter dK, dV backward).
CP_KV_PASSES = 3
# Expert parallelism: dispatch and combine all-to-alls forward, and both again backward.
MOE_ALL_TO_ALLS_PER_LAYER = 4
# Data-parallel traffic in ring passes of (g-1)/g of the parameters: once a step, an all-reduce
# (or ZeRO 1-2's reduce-scatter plus all-gather) of the gradients; with ZeRO-3 / FSDP, every
# micro-batch, an all-gather of the weights before forward and again before backward and a
# reduce-scatter of the gradients after.
GRAD_SYNC_PASSES = 2
# Megatron-LM TP with sequence parallelism: two all-gathers and two reduce-scatters per layer
# forward and backward, the same bytes as the workshop's four all-reduces.
TP_COLLECTIVES_PER_LAYER = 4


# --- FLOPs ------------------------------------------------------------------------------


def attention_flops_per_token_per_layer(q_width: Number, keys: Number) -> Number:
    """Forward plus backward of QK^T and AV for a query against `keys` keys, the whole
    sequence s unless windowed: 12 * a * hd * s over the full s x s square (PaLM appendix B;
    Narayanan et al. SC21 eq. 3's s/6h term). Causal kernels do less."""
    return 12 * q_width * keys


def attended_keys(
    seq_len: int,
    window: int | None,
    windowed: int,
    num_layers: int,
    chunk: int | None = None,
    chunked: int = 0,
) -> float:
    """Keys a query scores, in the full-square convention of model FLOPs (the s x s square
    counted whole, causal or not), averaged over the layers: the whole sequence where a layer
    attends it, `min(window, s)` in each of the `windowed` layers (the s x w band) and, in
    each of the `chunked` layers, its chunks' squares over s (c in a sequence of whole
    chunks of c tokens)."""
    s = seq_len
    local = min(window, s) if window is not None else s
    in_chunks = chunked_squares(s, chunk) / s if chunk is not None else s
    full = num_layers - windowed - chunked
    return (full * s + windowed * local + chunked * in_chunks) / num_layers


def chunked_squares(seq_len: int, chunk: int) -> float:
    """Cells of the block-diagonal a chunked layer attends within: each chunk's square."""
    return over_chunks(seq_len, chunk, lambda c: c * c)


def causal_band_scores(seq_len: int, window: int) -> float:
    """Query-key pairs a causal layer windowed to `window` keys scores in a sequence:
    sum_i min(i, w) = w s - w (w - 1) / 2 (w = s: the causal triangle, s (s + 1) / 2)."""
    w = min(window, seq_len)
    return w * seq_len - w * (w - 1) / 2


def over_chunks(seq_len: int, chunk: int, cells: Callable[[int], float]) -> float:
    """`cells(c)` summed over a sequence's chunks: each whole chunk's and the last, shorter
    one's (a chunked layer's block-diagonal: its squares, or its causal triangles)."""
    whole, rest = divmod(seq_len, chunk)
    return whole * cells(chunk) + cells(rest)


def attention_work_share(
    seq_len: int,
    window: int | None,
    windowed: int,
    num_layers: int,
    causal_fraction: float,
    chunk: int | None = None,
    chunked: int = 0,
    rate: Callable[[float], float] | None = None,
) -> float:
    """Share of the s x s square the fused attention kernels compute, averaged over the
    layers: `causal_fraction` where a layer attends the whole sequence; in a windowed one its
    causal band, sum_i min(i, w) = w s - w (w - 1) / 2 scores, over the causal triangle's
    s (s + 1) / 2, times `causal_fraction` (a window as long as the sequence is a causal
    layer); in a chunked one each chunk's causal triangle, c (c + 1) / 2 a whole chunk, over
    the same. Kernels skip the masked blocks (FlashAttention's window_size; chunks are its
    local windows' block-diagonal, UNVERIFIED which kernels Llama 4's trainers ran). With
    `rate` (the kernels' relative throughput at a number of attended keys,
    attention_table.relative_rate), each kind's share is divided by its rate at the keys its
    queries attend (the sequence, the window, the chunk): a share of time, not of work."""
    s = seq_len

    def at(length: float) -> float:
        return 1.0 if rate is None else rate(min(length, s))

    triangle = causal_band_scores(s, s)
    share = (num_layers - windowed - chunked) * causal_fraction / at(s)
    if window is not None and windowed:
        band = causal_band_scores(s, window)
        share += windowed * causal_fraction * band / triangle / at(min(window, s))
    if chunk is not None and chunked:
        scores = over_chunks(s, chunk, lambda c: c * (c + 1) / 2)
        share += chunked * causal_fraction * scores / triangle / at(chunk)
    return share / num_layers


def model_flops_per_token(
    active_layer_params: Number,
    head_params: Number,
    num_layers: Number,
    q_width: Number,
    keys: Number,
) -> Number:
    """Model FLOPs as PaLM and Llama 3 count them: 6 per active weight (the output head
    included, the input lookup not) plus the attention term over `keys` keys a query
    (attended_keys); recompute is not model work."""
    attention = num_layers * attention_flops_per_token_per_layer(q_width, keys)
    return 6 * (active_layer_params + head_params) + attention


def recompute_flops_per_token(
    active_layer_params: Number,
    num_layers: Number,
    q_width: Number,
    keys: Number,
    recompute: Number,
) -> Number:
    """Hardware FLOPs beyond model FLOPs: full recompute replays every layer's forward
    (2 per weight plus a third of the attention term); selective recompute replays only
    elementwise work, which we do not count as FLOPs (its time is an assumption)."""
    forward = 2 * active_layer_params + num_layers * 4 * q_width * keys
    return np.where(recompute == RECOMPUTE_FULL, forward, 0.0)


# --- per-layer compute ------------------------------------------------------------------


def matmul_s(
    flops_per_token: Number, tokens: Number, tp: Number, peak: Number, efficiency: float
) -> Number:
    return flops_per_token * tokens / (tp * peak * efficiency)


# FlashAttention's backward recomputes the scores QK^T before its four gradient matmuls, 5
# matmuls where the forward runs 2: its kernels execute 2.5 forwards' FLOPs backward, 3.5 in
# all, where model FLOPs count 3 (Dao-AILab/flash-attention benchmarks/
# benchmark_flash_attention.py l.27-30, `flops`: "2.5 * f" for bwd, "3.5 * f" for fwd_bwd).
# The kernels' published efficiencies (attention_efficiency) are measured against those
# executed FLOPs, so a fused layer's time divides them, not model FLOPs, by the efficiency.
FUSED_ATTENTION_KERNEL_FLOPS_RATIO = 3.5 / 3


def attention_s(
    q_width: Number,
    seq_len: Number,
    tokens: Number,
    tp: Number,
    peak: Number,
    efficiency: float,
    causal_fraction: float,
    kernel_flops_ratio: float = 1.0,
) -> Number:
    """Each rank's queries (s*b/c tokens) attend to the whole sequence of s keys; the kernels
    execute `kernel_flops_ratio` times the model FLOPs (FlashAttention's backward recompute)."""
    flops = attention_flops_per_token_per_layer(q_width, seq_len) * causal_fraction
    return kernel_flops_ratio * flops * tokens / (tp * peak * efficiency)


def unfused_scores_s(
    heads: int,
    seq_len: Number,
    tokens: Number,
    tp: Number,
    bytes_per_score: float,
    memory_bytes_s: float,
    recompute: Number,
) -> Number:
    """The unfused path streams every s x s score of the rank's heads through HBM; selective
    recompute replays its forward part (13 of the 30 bytes we count)."""
    scores = heads / tp * tokens * seq_len
    replay = np.where(recompute == RECOMPUTE_SELECTIVE, 13 / 30, 0.0)
    return scores * bytes_per_score * (1 + replay) / memory_bytes_s


def recompute_s(
    compute_s: Number,
    recompute: Number,
    selective_overhead: float,
    forward_s: Number | None = None,
) -> Number:
    """Full recompute replays the forward (`forward_s`; by default a third of forward plus
    backward); selective costs a stated fraction of the layer (Korthikanti et al. 2022,
    Fig. 8)."""
    forward = compute_s / 3 if forward_s is None else forward_s
    return np.where(
        recompute == RECOMPUTE_FULL,
        forward,
        np.where(recompute == RECOMPUTE_SELECTIVE, selective_overhead * compute_s, 0.0),
    )


def forward_replays(recompute: Number) -> Number:
    """1 where full recompute replays the forward pass (and its forward collectives)."""
    return np.where(recompute == RECOMPUTE_FULL, 1.0, 0.0)


# --- per-layer communication --------------------------------------------------------------


def link_bytes_s(span: Number, domain: int, intra: float, inter: float) -> Number:
    """A group whose GPUs all sit in one NVLink domain talks over NVLink, else the network
    (a group straddling two domains goes at its slowest link's pace)."""
    return np.where(fits_one_domain(span, domain), intra, inter)


def tp_collectives(recompute: Number) -> Number:
    """With sequence parallelism each of the four all-reduce volumes is an all-gather plus a
    reduce-scatter: eight ring collectives of t-1 steps a layer, four more under full
    recompute's replayed forward."""
    return 2 * (TP_COLLECTIVES_PER_LAYER + 2 * forward_replays(recompute))


def tp_transfer_s(
    tp: Number, tokens: Number, hidden: Number, bandwidth: Number, recompute: Number
) -> Number:
    """Seconds of a layer's tensor-parallel bytes at `bandwidth`: four activation collectives
    of 2(t-1)/t of the tokens' bf16 activations; the two forward ones again under full
    recompute (the latency is the links' collective_s)."""
    payload = tokens * hidden * BF16_BYTES
    passes = TP_COLLECTIVES_PER_LAYER + 2 * forward_replays(recompute)
    return passes * ring_allreduce_bytes(tp, payload) / bandwidth


def cp_exchange_bytes(
    cp: Number,
    seq_tokens: Number,
    kv_width: Number,
    kv_heads: int,
    tp: Number,
    recompute: Number,
) -> Number:
    """K and V of the other (c-1)/c of the sequence, `2*k*hd` values per token in bf16,
    sharded by tp down to one KV head per rank (ranks beyond k replicate heads), in three
    passes (four when full recompute replays the forward gather)."""
    per_rank_width = kv_width / np.minimum(tp, kv_heads)
    return cp_passes(recompute) * (cp - 1) / cp * seq_tokens * per_rank_width * BF16_BYTES


def cp_passes(recompute: Number) -> Number:
    """Collectives of the K/V exchange a layer: all-gather forward, all-gather again and
    reduce-scatter of dK, dV backward (Llama 3 section 3.3.2); full recompute replays the
    forward one."""
    return CP_KV_PASSES + forward_replays(recompute)


def exposed_s(
    comm_s: Number,
    hiding_s: Number,
    overlap: Number,
    slowdown: float = 0.0,
    unhidden_share: Number = 0.0,
) -> Number:
    """Communication left after hiding under `overlap` of some compute, plus what the hidden
    part costs that compute: `slowdown` of its time (overlap_compute_slowdown). An
    `unhidden_share` of it is sent where no compute runs beside it and is paid whole."""
    # = u c + max((1 - u) c - o' h, s (1 - u) c) with o' = (1 - s) o
    #   = max(c - o' h, (s + (1 - s) u) c): the staging solver encodes this form
    hides = contended_overlap(overlap, slowdown)
    return np.maximum(comm_s - hides * hiding_s, exposed_floor(slowdown, unhidden_share) * comm_s)


def exposed_floor(slowdown: float, unhidden_share: Number = 0.0) -> Number:
    """The least share of a transfer exposed_s charges, however much compute it hides under:
    its unhidden share whole, `slowdown` of the rest."""
    return slowdown + (1 - slowdown) * unhidden_share


def contended_overlap(overlap: Number, slowdown: float) -> Number:
    """The overlap as exposed_s applies it, where a hidden transfer slows the compute by
    `slowdown`: what the staging tables hold and its bounds test."""
    return (1 - slowdown) * overlap


def exposed_share(overlap: Number, slowdown: float) -> Number:
    """The share of a transfer's time a step still pays when `overlap` of it hides under
    compute that has room for all of it: the rest, plus `slowdown` of what hid."""
    return 1 - contended_overlap(overlap, slowdown)


def moe_all_to_all_s(
    ep: Number,
    tokens: Number,
    tp: Number,
    top_k: int,
    hidden: int,
    bandwidth: Number,
    moe_layer_share: float,
    overlap: Number,
    slowdown: float = 0.0,
) -> Number:
    """Dispatch and combine of each token's top-k copies (bf16, sequence-parallel shards of
    tokens/t per rank), (ep-1)/ep of it leaving the rank, four times a layer; averaged over
    layers by the share of MoE layers. The hidden share still costs `slowdown` of itself."""
    payload = tokens / tp * top_k * hidden * BF16_BYTES * (ep - 1) / ep
    per_layer = MOE_ALL_TO_ALLS_PER_LAYER * payload / bandwidth
    return moe_layer_share * per_layer * exposed_share(overlap, slowdown)


def paired_pass_share(micro_batches: Number, pp: Number, vpp: Number) -> Number:
    """Share of the first pipeline rank's chunk forwards (and as many backwards) that
    Megatron-Core's combined 1F1B runs beside another micro-batch's pass, with the EP
    all-to-all overlap on: all of its m v but the warm-up's forwards, which run alone, as do
    the cool-down's backwards. Interleaved, the warm-up is 2(p - 1) + (v - 1) p chunk
    forwards and one more for the overlap (NVIDIA/Megatron-LM@d98e8a6
    megatron/core/pipeline_parallel/schedules.py l.964-970; the group size is p by default);
    without a pipeline, the first micro-batch's forward (combined_1f1b.py l.55-67). The
    first rank has the longest warm-up: a lower bound on the ranks' pairing."""
    passes = micro_batches * vpp
    interleaved = 2 * (pp - 1) + (vpp - 1) * pp + 1
    alone = np.minimum(np.where(pp > 1, interleaved, 1), passes)
    return (passes - alone) / np.maximum(passes, 1)


def paired_all_to_all_s(
    all_to_all_s: Number, compute_s: Number, paired_share: Number, slowdown: float
) -> Number:
    """A layer's all-to-all seconds a micro-batch when `paired_share` of its passes run beside
    another micro-batch's: there it hides under the layer's compute (`compute_s`, forward and
    backward; each direction's all-to-all under the other's attention and MLP), bounded by
    it and costing `slowdown` of what hides; the rest is paid whole."""
    hidden = exposed_s(all_to_all_s, compute_s, 1.0, slowdown)
    return paired_share * hidden + (1 - paired_share) * all_to_all_s


def moe_host_s(moe_layer_share: float, host_ms_per_layer: float, tokens: Number) -> Number:
    """Seconds a layer (averaged over dense and MoE layers) waits on the host a micro-batch:
    an eager MoE layer's launches after its dispatcher's sync (moe_host_ms_per_layer), the
    same at any token count (shaped as `tokens`, to broadcast as the other parts)."""
    seconds = moe_layer_share * host_ms_per_layer / 1e3
    return np.full_like(np.asarray(tokens, dtype=float), seconds)


def pp_p2p_s(
    pp: Number,
    vpp: Number,
    tokens: Number,
    hidden: int,
    tp: Number,
    bandwidth: Number,
    overlap: float,
    interleaved_overlap: float = 0.0,
    slowdown: float = 0.0,
) -> Number:
    """Per micro-batch per device: one activation send forward and one gradient send
    backward per chunk, sharded over tp (Megatron's scatter/gather, SC21 section 4.1).
    `overlap` of them hides under compute in any schedule, `interleaved_overlap` with vpp >
    1 (Megatron-Core's overlap_p2p_comm); what hides still costs `slowdown` of itself."""
    sends = 2 * vpp * tokens * hidden * BF16_BYTES / tp
    hidden_share = np.where(vpp > 1, np.maximum(overlap, interleaved_overlap), overlap)
    return np.where(pp > 1, sends / bandwidth * exposed_share(hidden_share, slowdown), 0.0)


# --- data-parallel communication --------------------------------------------------------


def ring_pass_bytes(passes: Number, params: Number, ranks: Number) -> Number:
    """Bytes each rank sends in `passes` ring passes of (g-1)/g of its bf16 `params` over a
    group of `ranks` (the dense parameters over the data group, dp * cp; the experts' over
    theirs, dp * cp / ep)."""
    return passes * (ranks - 1) / ranks * BF16_BYTES * params


# --- schedule ------------------------------------------------------------------------------


def warmup_micro_batches(
    pp: Number, vpp: Number, schedule: Number, weight_grad_fraction: float
) -> Number:
    """Idle time of a step in micro-batch slots (the bubble is slots / (m + slots)).

    With one slot = F + B + W = 1, W = w and F = B = (1 - w)/2 (B the input-gradient pass):
    1F1B interleaved over v chunks: (p-1)/v (Narayanan et al. SC21 eq. 2);
    ZB-H1: (p-1)(F + B - W) = (p-1)(1 - 2w) (Qi et al. 2024: a third of 1F1B's at w = 1/3);
    DualPipe: (p/2 - 1)(F&B + B_full - 3W) with F&B = F + B_full = 1 and B_full = B + W
    (DeepSeek-V3 report, Table 2) = (p/2 - 1)(3 - 5w)/2.
    """
    w = weight_grad_fraction
    one_f_one_b = (pp - 1) / vpp
    zero_bubble = (pp - 1) * max(1 - 2 * w, 0.0)
    dualpipe = np.maximum(pp / 2 - 1, 0) * max(3 - 5 * w, 0.0) / 2
    return np.where(
        schedule == SCHEDULE_ZERO_BUBBLE,
        zero_bubble,
        np.where(schedule == SCHEDULE_DUALPIPE, dualpipe, one_f_one_b),
    )
