"""Profile `standard`, one pipeline rank: what it holds (its layers' state and activations,
its share of the embedding and head, the logits) and the per-micro-batch terms beside its
layers (the output head's matmul, the pipeline sends). `breakdown` prices the first and last
rank of an even split with these; a stage plan prices every rank of any split with the same
functions (stage_plans.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.job import TrainingJob
from models.transformer import TransformerSpec
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import kernels as kern
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import precision as prec
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.compute import (
    gemm_shape_table,
    head_shape_factor,
    kernel_efficiency,
)
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.costmodel.standard.links import job_links, link_bytes_s
from optimizer.costmodel.standard.recompute_modules import module_drop

Number = Any


@dataclass(frozen=True)
class RankMemoryTerms:
    """Bytes and parameters of one rank, per layer or per end of the pipeline, at the
    layout's recompute mode (elementwise over a grid)."""

    dense_params_per_layer: Number
    expert_params_per_layer: Number
    embedding_params: Number  # on the first rank, and the head's on the last
    activation_bytes_per_layer: Number  # one in-flight micro-batch
    working_bytes: Number  # full recompute's one replayed layer
    logits_bytes: Number  # on the last rank (and the only one when pp = 1)
    fp8_copy_bytes_per_layer: Number  # under fp8 below ZeRO-3, FP8 weights over bf16 ones


def rank_memory_terms(job: TrainingJob, a: CostAssumptions, k: Degrees) -> RankMemoryTerms:
    model, s = job.model, job.training.seq_len
    tokens = s * k.micro_batch / (k.tp * k.cp)
    modules, combine = a.selective_recompute_modules, a.moe_combine_saves_expert_outputs
    drop = None if modules is None else module_drop(model, modules, combine)
    per_token = mem.layer_activation_bytes_per_token(
        model, k.recompute, None if drop is None else drop.dropped_bytes_per_token, combine
    )
    per_token = per_token + mem.attention_score_bytes_per_token(
        model.num_attention_heads, s, k.recompute, a.fused_attention
    )
    # under fp8 the GEMMs' saved inputs are their FP8 casts (precision.py)
    precision = job.training.precision

    def fp8_saved(recompute: Number) -> Number:
        return prec.fp8_saved_input_bytes_per_token(
            model, precision, recompute, a.fp8_saved_inputs, modules
        )

    per_token = per_token - fp8_saved(k.recompute)

    def replicated(recompute: Number) -> Number:
        if a.sequence_parallel:
            return 0.0
        return mem.tp_replicated_activation_bytes_per_token(
            model.hidden_size,
            recompute,
            None if drop is None else drop.norm_outputs_dropped_bytes_per_token,
        )

    dense = mem.dense_params_per_layer_per_device(model, k.tp)
    experts = mem.expert_params_per_layer_per_device(model, k.tp, k.ep)
    copies = np.where(k.schedule == mem.SCHEDULE_DUALPIPE, 2, 1)
    fp8_copy = prec.weight_copy_bytes_per_param(
        precision, job.cluster.gpu.fp8_gemm_tn_only, a.fp8_weight_copy_bytes_per_param
    )
    full_layer = mem.tp_rank_activation_bytes(
        mem.full_layer_activation_bytes_per_token(model, combine) - fp8_saved(mem.RECOMPUTE_NONE),
        replicated(mem.RECOMPUTE_NONE),
        tokens,
        k.tp,
    )
    return RankMemoryTerms(
        dense_params_per_layer=dense,
        expert_params_per_layer=experts,
        embedding_params=mem.embedding_params_per_device(model, k.tp, k.pp),
        activation_bytes_per_layer=mem.tp_rank_activation_bytes(
            per_token, replicated(k.recompute), tokens, k.tp
        ),
        working_bytes=np.where(k.recompute == mem.RECOMPUTE_FULL, full_layer, 0.0),
        logits_bytes=a.logits_bytes_per_value
        * model.vocab_size
        * s
        * k.micro_batch
        / (k.tp * k.cp),
        # under fp8, each layer weight's FP8 copy beside it, or in its place (precision.py)
        fp8_copy_bytes_per_layer=copies
        * (dense + experts)
        * prec.fp8_weight_copy_bytes_per_param(precision, fp8_copy, a.fp8_params, k.zero),
    )


def paired_overlap_on(k: Degrees, streams_run_apart: bool) -> Number:
    """Where Megatron-Core's EP all-to-all overlap runs, once asked
    (moe_all_to_all_paired_overlap): with expert parallelism, the 1F1B schedule, no full
    recompute and, with a pipeline, interleaving; elsewhere it refuses the flag
    (NVIDIA/Megatron-LM@d98e8a6 megatron/core/transformer/transformer_config.py
    l.3002-3041). Before Blackwell, tp or cp
    above 1 needs CUDA_DEVICE_MAX_CONNECTIONS=1, which queues the all-to-all's stream behind
    the compute: Megatron-LM warns that the two cannot both have their way (arguments.py
    l.1451-1475), and it is priced unpaired there (`streams_run_apart`: the GPU's, from
    Blackwell on). The one rule: the Megatron-Core exports write the flag where this holds,
    beside a dispatcher that takes it (optimizer.engines, whose settings price the overlap
    off with one that does not)."""
    streams_apart = streams_run_apart | ((k.tp == 1) & (k.cp == 1))
    return (
        (np.asarray(k.ep) > 1)
        & (k.schedule == mem.SCHEDULE_1F1B)
        & (k.recompute != mem.RECOMPUTE_FULL)
        & ((k.pp == 1) | (k.vpp > 1))
        & streams_apart
    )


@dataclass(frozen=True)
class ParamState:
    """What a parameter's training state takes on a rank and its optimiser step moves, in
    bytes a parameter (param_state)."""

    gradient_bytes: float  # gradient_bytes_per_param
    optimizer_bytes: float  # optimizer_bytes_per_param
    fp32_shards: bool  # zero3_fp32_shards: a ZeRO-3 shard in fp32, the optimiser's master
    step_bytes: float  # optimizer_step_bytes_per_param
    gradient_buffer_zeroed: bool  # whether the engine zeroes the gradient buffer each step


def param_state(a: CostAssumptions) -> ParamState:
    """The request's parameter state costs."""
    return ParamState(
        gradient_bytes=a.gradient_bytes_per_param,
        optimizer_bytes=a.optimizer_bytes_per_param,
        fp32_shards=a.zero3_fp32_shards,
        step_bytes=a.optimizer_step_bytes_per_param,
        gradient_buffer_zeroed=a.gradient_buffer_zeroed,
    )


def rank_state_bytes(
    state: ParamState, k: Degrees, dense_params: Number, expert_params: Number
) -> tuple[Number, Number, Number]:
    """Weights, gradients and optimiser state of a rank holding these parameters."""
    group = k.dp * k.cp
    copies = np.where(k.schedule == mem.SCHEDULE_DUALPIPE, 2, 1)
    return mem.state_bytes(
        dense_params,
        expert_params,
        k.zero,
        group,
        group / k.ep,
        copies,
        state.gradient_bytes,
        state.optimizer_bytes,
        state.fp32_shards,
    )


def rank_optimizer_step_s(
    model: TransformerSpec,
    state: ParamState,
    k: Degrees,
    n_layers: Number,
    embedding: Number,
    hbm_bytes_s: float | None,
) -> Number:
    """Seconds the optimiser step of a rank of `n_layers` layers and `embedding` parameters
    (its share of the embedding and head) takes at HBM bandwidth (none priced without one):
    `optimizer_step_bytes_per_param` over its optimiser shard (with a bf16 gradient's cast
    to fp32), and the zeroing of its gradient buffer where the engine zeroes it. Memory-bound
    and outside the pipeline: nothing hides it (docs/cost-model.md, "The optimiser step")."""
    bandwidth = hbm_bytes_s
    if bandwidth is None:
        return 0.0
    dense_params = n_layers * mem.dense_params_per_layer_per_device(model, k.tp) + embedding
    expert_params = n_layers * mem.expert_params_per_layer_per_device(model, k.tp, k.ep)
    group = k.dp * k.cp
    shard = mem.sharded_params(dense_params, expert_params, k.zero, 1, group, group / k.ep)
    gradient = state.gradient_bytes
    cast = gradient + mem.FP32_BYTES if gradient < mem.FP32_BYTES else 0.0
    _, gradients, _ = rank_state_bytes(state, k, dense_params, expert_params)
    zeroed = gradients if state.gradient_buffer_zeroed else 0.0
    return (shard * (state.step_bytes + cast) + zeroed) / bandwidth


def over_pipeline_ranks(
    job: TrainingJob,
    k: Degrees,
    layers: mem.StageLayers,
    rank_s: Callable[[Number, Number], Any],
) -> tuple[Any, Any]:
    """`rank_s(layers, embedding parameters)` of the ranks that may hold the most parameters:
    an end (the first's or last's layers, with its share of the embedding or head) and a
    middle rank; with pp <= 2 there is none, and the first's layers without the embedding
    stand in. The step waits for the slowest."""
    embedding = mem.embedding_params_per_device(job.model, k.tp, k.pp)
    ends = rank_s(np.maximum(layers.first, layers.last), embedding)
    middle = rank_s(np.where(k.pp > 2, layers.middle, layers.first), 0.0)
    return ends, middle


def optimizer_step_s(
    job: TrainingJob, a: CostAssumptions, k: Degrees, layers: mem.StageLayers
) -> Number:
    """The slowest rank's optimiser step (rank_optimizer_step_s)."""
    model, state, hbm = job.model, param_state(a), job.cluster.gpu.memory_bandwidth_bytes_s

    def rank_s(n_layers: Number, embedding: Number) -> Number:
        return rank_optimizer_step_s(model, state, k, n_layers, embedding, hbm)

    ends, middle = over_pipeline_ranks(job, k, layers, rank_s)
    return np.maximum(ends, middle)


def rank_memory(
    state: ParamState,
    k: Degrees,
    terms: RankMemoryTerms,
    n_layers: Number,
    embedding_params: Number,
    in_flight: Number,
    logits_bytes: Number,
) -> mem.StageMemory:
    """The tensors of a rank of `n_layers` layers with `in_flight` micro-batches' activations
    held (memory.with_runtime adds what lies beside them)."""
    weights, grads, opt = rank_state_bytes(
        state,
        k,
        n_layers * terms.dense_params_per_layer + embedding_params,
        n_layers * terms.expert_params_per_layer,
    )
    activations = (
        n_layers * terms.activation_bytes_per_layer * in_flight + terms.working_bytes + logits_bytes
    )
    weights = weights + n_layers * terms.fp8_copy_bytes_per_layer
    return mem.StageMemory(weights, grads, opt, activations)


def rank_runtime(a: CostAssumptions, k: Degrees) -> Callable[[mem.StageMemory], mem.StageMemory]:
    """A rank's tensors with the request's fragmentation and runtime memory beside them."""
    runtime = mem.runtime_bytes(
        k, a.cuda_context_gb, a.nccl_buffers_gb_per_group, a.nccl_all_to_all_gb
    )
    return lambda held: mem.with_runtime(held, a.allocator_fragmentation, runtime)


def head_s(job: TrainingJob, a: CostAssumptions, k: Degrees) -> Number:
    """The output head's matmuls, forward and backward, on the last rank per micro-batch."""
    model, gpu = job.model, job.cluster.gpu
    tokens = job.training.seq_len * k.micro_batch / k.cp
    head_flops = 6 * model.vocab_size * model.hidden_size
    table = gemm_shape_table(gpu, a.gemm_shape_throughput)
    efficiency = kernel_efficiency(job, a) * head_shape_factor(model, table, k, tokens)
    matmul_s = tim.matmul_s(head_flops, tokens, k.tp, gpu.peak_flop_s, efficiency)
    loss = 0.0
    if a.elementwise_traffic:
        bandwidth, per_logit = gpu.memory_bandwidth_bytes_s, a.loss_bytes_per_logit
        loss = loss_s(model.vocab_size, tokens, k.tp, per_logit, a.sequence_parallel, bandwidth)
    return matmul_s + loss


def loss_s(
    vocab_size: int,
    tokens: Number,
    tp: Number,
    bytes_per_logit: float,
    sequence_parallel: bool,
    hbm_bytes_s: float | None,
) -> Number:
    """The loss over the rank's vocabulary shard, forward and backward, at HBM bandwidth (none
    priced without one): every token's V/tp logits pass through the engine's cross-entropy
    kernels, which move `bytes_per_logit` bytes each (loss_bytes_per_logit; the sequence is
    whole at the loss: the output layer gathers it before its matmul)."""
    if hbm_bytes_s is None:
        return 0.0
    vocabulary_bytes = vocab_size * bytes_per_logit  # split over tp
    return kern.hbm_s((0.0, vocabulary_bytes), tokens, tp, hbm_bytes_s, sequence_parallel)


def p2p_s(job: TrainingJob, a: CostAssumptions, k: Degrees) -> Number:
    """A rank's exposed pipeline sends per micro-batch."""
    tokens = job.training.seq_len * k.micro_batch / k.cp
    return tim.pp_p2p_s(
        k.pp,
        k.vpp,
        tokens,
        job.model.hidden_size,
        k.tp,
        link_bytes_s(job_links(job, a), k.pp_span),
        a.pp_p2p_overlap_fraction,
        a.pp_p2p_interleaved_overlap_fraction,
        a.overlap_compute_slowdown,
    )
