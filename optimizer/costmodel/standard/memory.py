"""Profile `standard`, memory per device: the worst pipeline stage's weights, gradients,
optimiser state and activations (docs/cost-model.md, "standard: memory").

Pure functions that broadcast over numpy arrays, like `workshop`. Units: bytes, layers,
parameters. Recompute codes follow `grid.RECOMPUTE_CODES` (0 none, 1 selective, 2 full);
schedule codes `grid.SCHEDULE_CODES` (0 1f1b, 1 zero-bubble, 2 dualpipe).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from models.layout import chunks_hold_layers
from models.transformer import TransformerSpec
from optimizer.costmodel.standard.degrees import Degrees

Number = Any  # float | int | np.ndarray: the formulas broadcast

BF16_BYTES = 2
FP32_BYTES = 4
RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL = 0, 1, 2
SCHEDULE_1F1B, SCHEDULE_ZERO_BUBBLE, SCHEDULE_DUALPIPE = 0, 1, 2


# --- how layers split into stages -----------------------------------------------------


@dataclass(frozen=True)
class StageLayers:
    """Layers held by the first, an interior and the last pipeline device."""

    first: Number
    middle: Number
    last: Number
    valid: Number  # False where there are more chunks than layers


def stage_layers(num_layers: Number, pp: Number, vpp: Number) -> StageLayers:
    """Whole layers per chunk. `L / (p*v)` when it divides; else Llama 3's uneven split when
    `(L + 2)` divides, the embedding and the output head taking one layer's slot on the first
    and last stage (Llama 3 paper, section 3.3.2: 126 layers on 16 stages as 7, 8, ..., 8, 7);
    else the busiest devices hold `ceil(L / (p*v))` layers a chunk and set the pace (the end
    stages are priced as full too: an upper bound). `valid` is False where some chunk would
    hold nothing (models.layout.chunks_hold_layers)."""
    chunks = pp * vpp
    even = num_layers % chunks == 0
    uneven = ((num_layers + 2) % chunks == 0) & (pp > 1) & ~even
    ceiling = np.ceil(num_layers / chunks) * vpp
    per_device = np.where(even, num_layers / pp, np.where(uneven, (num_layers + 2) / pp, ceiling))
    end = np.where(uneven, per_device - 1, per_device)
    return StageLayers(
        first=end, middle=per_device, last=end, valid=chunks_hold_layers(num_layers, pp, vpp)
    )


# --- activations ----------------------------------------------------------------------


def mlp_activation_bytes(ffn: Number, gated: bool) -> Number:
    """Per token: SwiGLU keeps gate and up outputs and their product (3 x 2f bytes); a GeLU
    MLP keeps its first output and the GeLU output (2 x 2f)."""
    return (6 if gated else 4) * ffn


def routed_copy_bytes_per_token(model: TransformerSpec, combine_saves_outputs: bool) -> float:
    """Per token, averaged over the layers: each routed expert copy's dispatched input (2h,
    saved by its first matmul) and, where the combine weights the expert outputs by their
    routing probabilities, the output it keeps for that product's gradient (2h more)."""
    per_copy = (4 if combine_saves_outputs else 2) * model.hidden_size
    return model.moe_layer_share * model.experts_per_token * per_copy


def layer_activation_bytes_per_token(
    model: TransformerSpec,
    recompute: Number,
    selective_saving: Number = None,
    combine_saves_outputs: bool = True,
) -> Number:
    """Bytes one layer keeps per token for its backward pass, averaged over dense and MoE
    layers, before sharding by tp and cp.

    Korthikanti et al. 2022's count (eq. 2) redone for a FlashAttention layer with GQA and no
    dropout: two norm inputs and outputs (8h), Q, K, V (2(q + kv)), the attention output
    (2q), and the MLP's intermediate tensors. FlashAttention never stores the s x s scores
    (the 5as/h term) in any mode. Selective recompute drops what is large and cheap to
    recompute (Korthikanti's criterion): the two norm outputs (4h) and the activation
    function's output (2f per expert copy), or `selective_saving`, what a Megatron-Core module
    list frees (recompute_modules.py). Full recompute keeps the layer input only (2h).
    """
    h = model.hidden_size
    attention = 8 * h + 2 * (model.q_width + model.kv_width) + 2 * model.q_width
    dispatched = routed_copy_bytes_per_token(model, combine_saves_outputs)
    mlp = mlp_activation_bytes(model.mlp_width_per_token, model.gated_mlp) + dispatched
    saving = 4 * h + 2 * model.mlp_width_per_token if selective_saving is None else selective_saving
    none = attention + mlp
    return np.where(
        recompute == RECOMPUTE_FULL,
        BF16_BYTES * h,
        np.where(recompute == RECOMPUTE_SELECTIVE, none - saving, none),
    )


def tp_replicated_activation_bytes_per_token(
    h: Number, recompute: Number, selective_norm_outputs_dropped: Number = None
) -> Number:
    """Of `layer_activation_bytes_per_token`, the part every tp rank keeps whole when there is
    no sequence parallelism (Korthikanti et al. 2022 eq. 1's 10sbh, here without dropout
    masks): the two norm inputs (4h) and outputs (4h); selective recompute drops the outputs
    (or the bytes of them a module list frees); full recompute keeps the layer input (2h)."""
    dropped = 4 * h if selective_norm_outputs_dropped is None else selective_norm_outputs_dropped
    return np.where(
        recompute == RECOMPUTE_FULL,
        BF16_BYTES * h,
        np.where(recompute == RECOMPUTE_SELECTIVE, 8 * h - dropped, 8 * h),
    )


def tp_rank_activation_bytes(
    per_token: Number, replicated_per_token: Number, tokens_per_rank: Number, tp: Number
) -> Number:
    """Bytes a tp rank keeps for `tokens_per_rank` (a micro-batch's tokens split by tp and cp):
    the replicated part is kept for all tp shares of the tokens."""
    return (per_token + replicated_per_token * (tp - 1)) * tokens_per_rank


def full_layer_activation_bytes_per_token(
    model: TransformerSpec, combine_saves_outputs: bool = True
) -> Number:
    return layer_activation_bytes_per_token(
        model, RECOMPUTE_NONE, combine_saves_outputs=combine_saves_outputs
    )


def attention_score_bytes_per_token(
    heads: int, seq_len: Number, recompute: Number, fused: bool
) -> Number:
    """Unfused attention keeps softmax output (2), dropout mask (1) and output (2) bytes per
    score: Korthikanti et al. 2022 eq. 2's 5as/h term times h, per token. Selective and
    full recompute drop it, fused attention never stores it."""
    if fused:
        return 0.0
    return np.where(recompute == RECOMPUTE_NONE, 5 * heads * seq_len, 0.0)


def in_flight_micro_batches(
    micro_batches: Number, pp: Number, vpp: Number, schedule: Number
) -> tuple[Number, Number]:
    """Micro-batches whose activations the first and the last device hold at the peak.

    1F1B and ZB-H1 keep min(m, p) on the first device (ZB-H1 keeps 1F1B's peak, Qi et al.
    2024) and one on the last; interleaved, `in_flight_on_rank`'s chunk count. DualPipe keeps
    p + 1 on every device (DeepSeek-V3 report, Table 2).
    """
    first = in_flight_on_rank(micro_batches, pp, vpp, schedule, 0)
    return first, in_flight_on_rank(micro_batches, pp, vpp, schedule, pp - 1)


def interleaved_chunk_forwards(
    micro_batches: Number, pp: Number, vpp: Number, rank: Number
) -> Number:
    """Chunk forwards pipeline rank `rank` (0 first) holds at its peak under Megatron-Core's
    interleaved schedule: its warm-up, 2(p - r - 1) + (v - 1) g chunk forwards with g the
    micro-batches a chunk runs in a row (microbatch_group_size_per_vp_stage, p by default),
    and one more before its first backward; but never more than the step's m v, which it
    then runs forward before any backward (NVIDIA/Megatron-LM@d98e8a6
    megatron/core/pipeline_parallel/schedules.py l.964-977; the group default
    megatron/core/model_parallel_config.py l.567-568)."""
    warmup_and_one = 2 * (pp - rank - 1) + (vpp - 1) * pp + 1
    return np.minimum(micro_batches * vpp, warmup_and_one)


def in_flight_on_rank(
    micro_batches: Number, pp: Number, vpp: Number, schedule: Number, rank: Number
) -> Number:
    """The same count on pipeline rank `rank` (0 first): 1F1B and ZB-H1 hold min(m, p - r)
    (rank r runs p - r forwards before its first backward, SC21 section 2.2.1). Interleaved,
    `interleaved_chunk_forwards` over v, each chunk a 1/v share of the rank's layers: on rank 0
    with m > p that is Korthikanti's p (1 + (p-1)/(p v)), and with m = p every rank in the
    first half of the pipeline holds all m. DualPipe p + 1 everywhere."""
    one_f_one_b = np.minimum(micro_batches, pp - rank)
    interleaved = interleaved_chunk_forwards(micro_batches, pp, vpp, rank) / vpp
    held = np.where(vpp > 1, interleaved, one_f_one_b)
    return np.where(schedule == SCHEDULE_DUALPIPE, pp + 1, held)


# --- parameters -----------------------------------------------------------------------


def dense_params_per_layer_per_device(model: TransformerSpec, tp: Number) -> Number:
    """Parameters of one layer a device holds that every data-parallel rank replicates,
    averaged over dense and MoE layers: attention, dense MLP, router, shared experts."""
    dense_share = 1 - model.moe_layer_share
    moe_dense_part = (
        model.attention_params_per_layer
        + model.router_params
        + model.num_shared_experts * model.expert_params
    )
    return (dense_share * model.params_per_layer + (1 - dense_share) * moe_dense_part) / tp


def expert_params_per_layer_per_device(model: TransformerSpec, tp: Number, ep: Number) -> Number:
    """Routed-expert parameters per layer per device: experts split over ep, each over tp
    (Megatron-LM's default expert tensor parallelism equals tp)."""
    moe_share = model.moe_layer_share
    return moe_share * model.num_experts * model.expert_params / (ep * tp)


def params_per_layer_per_device(model: TransformerSpec, tp: Number, ep: Number) -> Number:
    """All of one layer's parameters a device holds: the replicated part and its experts."""
    return dense_params_per_layer_per_device(model, tp) + expert_params_per_layer_per_device(
        model, tp, ep
    )


def embedding_params_per_device(model: TransformerSpec, tp: Number, pp: Number) -> Number:
    """The input embedding on the first stage, the output head on the last (vocab-parallel
    over tp); one device holds both when pp = 1, once if they are tied."""
    one = model.vocab_size * model.hidden_size / tp
    both = model.embedding_params / tp
    return np.where(pp == 1, both, one)


@dataclass(frozen=True)
class StageMemory:
    """Bytes per device by part, of the worst stage (elementwise over a grid): the tensors
    PyTorch's allocator holds, what it reserves beyond them, and the runtime's own memory
    outside it (CUDA context, NCCL buffers)."""

    weights: Number
    gradients: Number
    optimizer: Number
    activations: Number
    fragmentation: Number = 0.0
    runtime: Number = 0.0

    @property
    def tensors(self) -> Number:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def allocator(self) -> Number:
        """What PyTorch's caching allocator reserves: its tensors and its fragmentation."""
        return self.tensors + self.fragmentation

    @property
    def total(self) -> Number:
        return self.allocator + self.runtime


# --- memory outside the tensors -------------------------------------------------------

GB = 1e9


def nccl_groups(k: Degrees) -> Number:
    """Communicators a rank runs collectives in: each parallel dimension of degree above 1
    (tp, cp, the gradients' dp x cp, pp's sends, ep's all-to-all)."""
    dims = (k.tp, k.cp, k.dp * k.cp, k.pp, k.ep)
    return sum(np.where(np.asarray(d) > 1, 1, 0) for d in dims)


def runtime_bytes(
    k: Degrees, cuda_context_gb: float, nccl_buffers_gb_per_group: float, nccl_all_to_all_gb: float
) -> Number:
    """Device memory outside PyTorch's allocator (docs/cost-model.md, "Memory outside the
    tensors"): the CUDA context, NCCL's buffers per communicator and, with expert
    parallelism, its all-to-all's point-to-point buffers."""
    buffers = nccl_groups(k) * nccl_buffers_gb_per_group
    all_to_all = np.where(np.asarray(k.ep) > 1, nccl_all_to_all_gb, 0.0)
    return (cuda_context_gb + buffers + all_to_all) * GB


def with_runtime(held: StageMemory, fragmentation: float, runtime: Number) -> StageMemory:
    """The rank's tensors with the allocator's `fragmentation` (a share of them) and the
    `runtime` bytes (runtime_bytes) beside them."""
    return replace(held, fragmentation=fragmentation * held.tensors, runtime=runtime)


def sharded_params(
    dense_params: Number,
    expert_params: Number,
    zero: Number,
    from_stage: int,
    shard_group: Number,
    expert_shard_group: Number,
) -> Number:
    """Parameters whose state a rank keeps, where ZeRO shards that state from stage
    `from_stage` on: the dense ones over the data-parallel group, the experts over theirs."""
    on = zero >= from_stage
    dense = dense_params / np.where(on, shard_group, 1)
    return dense + expert_params / np.where(on, expert_shard_group, 1)


def state_bytes(
    dense_params: Number,
    expert_params: Number,
    zero: Number,
    shard_group: Number,
    expert_shard_group: Number,
    copies: Number,
    grad_bytes: float,
    optimizer_bytes: float,
    fp32_shards: bool = False,
) -> tuple[Number, Number, Number]:
    """Weights (bf16), gradients and optimiser state; ZeRO stage z shards over the
    data-parallel group (dp * cp for dense parameters, dp * cp / ep for experts). With
    `fp32_shards` a ZeRO-3 shard is kept in fp32 and is the optimiser's master (FSDP2): the
    weights hold 4 bytes a parameter and the optimiser state 4 fewer."""

    def sharded(bytes_per_param: Number, from_stage: int) -> Number:
        kept = sharded_params(
            dense_params, expert_params, zero, from_stage, shard_group, expert_shard_group
        )
        return bytes_per_param * kept

    master_in_shard = np.where(fp32_shards & (zero >= 3), FP32_BYTES - BF16_BYTES, 0.0)
    weights = copies * sharded(BF16_BYTES + master_in_shard, 3)
    gradients = copies * sharded(grad_bytes, 2)
    optimizer = sharded(optimizer_bytes - 2 * master_in_shard, 1)
    return weights, gradients, optimizer


def worst_stage(first: StageMemory, last: StageMemory) -> StageMemory:
    take_first = first.total >= last.total
    return map_parts(lambda part: np.where(take_first, getattr(first, part), getattr(last, part)))


def map_parts(value_of: Callable[[str], Number]) -> StageMemory:
    """A StageMemory whose every part is `value_of(part name)`."""
    return StageMemory(**{f.name: value_of(f.name) for f in fields(StageMemory)})
