"""Profile `standard`: every knob the optimiser turns carries its cost (docs/cost-model.md).

Adds to `workshop`: the worst pipeline stage's memory (embedding and head, uneven stages,
interleaving's in-flight penalty, schedules), context parallelism's K/V exchange, ZeRO-3's
gathers, pipeline sends, selective recompute, mixture-of-experts all-to-alls, NVLink domains
larger than a node, and MFU as model FLOPs (attention included) with hardware FLOPs beside.
One function, `breakdown`, prices a single layout and a whole grid alike, from the degrees
(degrees.py), a layer's compute (compute.py), the links its groups land on (links.py) and
the data-parallel sync (data_parallel.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from models.job import TrainingJob
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import all_to_all as a2a
from optimizer.costmodel.standard import links as lnk
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import ranks as rnk
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.attention import attention_kernel, attention_time_s
from optimizer.costmodel.standard.compute import (
    elementwise_kernels,
    elementwise_s,
    gemm_rates,
    gemm_s,
    gradient_accumulation_s,
)
from optimizer.costmodel.standard.data_parallel import data_parallel_s, data_parallel_sync
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.costmodel.standard.recompute import engine_replayed_share, layer_recompute_s

Number = Any


# The MFU waterfall: each step charges one more effect to the step time.
MFU_STEP_NAMES = (
    "kernel efficiency",
    "after uneven stages",
    "after recomputation",
    "after pipeline bubble",
    "after tensor-parallel communication",
    "after context-parallel communication",
    "after expert all-to-all",
    "after host overhead",
    "after pipeline sends",
    "after data-parallel communication",
    "after optimizer step",
)


@dataclass(frozen=True)
class Breakdown:
    micro_batches: Number
    memory: mem.StageMemory
    valid: Number  # no more chunks than layers
    bubble: Number
    layer_times_s: dict[str, Number]
    step_times_s: tuple[Number, ...]  # cumulative, one per MFU_STEP_NAMES
    model_flops: Number  # per step, whole job
    hardware_flops: Number
    cluster_flop_s: float

    @property
    def step_time_s(self) -> Number:
        return self.step_times_s[-1]

    def first(self) -> Breakdown:
        """The first layout's figures as plain numbers (pricing a grid of one)."""

        def scalar(value: Number) -> Number:
            return np.asarray(value, dtype=float).reshape(-1)[0]

        return Breakdown(
            micro_batches=int(scalar(self.micro_batches)),
            memory=mem.map_parts(lambda part: scalar(getattr(self.memory, part))),
            valid=bool(scalar(self.valid)),
            bubble=scalar(self.bubble),
            layer_times_s={name: scalar(v) for name, v in self.layer_times_s.items()},
            step_times_s=tuple(scalar(t) for t in self.step_times_s),
            model_flops=self.model_flops,
            hardware_flops=scalar(self.hardware_flops),
            cluster_flop_s=self.cluster_flop_s,
        )

    @property
    def mfu_steps(self) -> tuple[Number, ...]:
        return tuple(self.model_flops / (self.cluster_flop_s * t) for t in self.step_times_s)

    @property
    def mfu(self) -> Number:
        return self.mfu_steps[-1]

    @property
    def hfu(self) -> Number:
        return self.hardware_flops / (self.cluster_flop_s * self.step_time_s)


def stage_memory(job: TrainingJob, a: CostAssumptions, k: Degrees, m: Number) -> mem.StageMemory:
    """Memory of the worst device: the first (embedding, most micro-batches in flight), the
    second (a middle rank's layers, which outnumber the first's in Llama 3's split, with
    nearly as many in flight) or the last (head and logits)."""
    layers = mem.stage_layers(job.model.num_layers, k.pp, k.vpp)
    terms = rnk.rank_memory_terms(job, a, k)
    in_first, in_last = mem.in_flight_micro_batches(m, k.pp, k.vpp, k.schedule)
    in_second = mem.in_flight_on_rank(m, k.pp, k.vpp, k.schedule, 1)
    embedding, logits = terms.embedding_params, terms.logits_bytes
    first_logits = np.where(k.pp == 1, logits, 0.0)
    state, beside = rnk.param_state(a), rnk.rank_runtime(a, k)
    first = beside(
        rnk.rank_memory(state, k, terms, layers.first, embedding, in_first, first_logits)
    )
    last = beside(rnk.rank_memory(state, k, terms, layers.last, embedding, in_last, logits))
    # with pp <= 2 there is no middle rank: the first stands in for it
    second_layers = np.where(k.pp > 2, layers.middle, layers.first)
    second_in = np.where(k.pp > 2, in_second, in_first)
    second_embedding = np.where(k.pp > 2, 0.0, embedding)
    second = beside(
        rnk.rank_memory(state, k, terms, second_layers, second_embedding, second_in, first_logits)
    )
    return mem.worst_stage(mem.worst_stage(first, second), last)


def layer_times(job: TrainingJob, a: CostAssumptions, k: Degrees) -> dict[str, Number]:
    """Seconds of one layer on one micro-batch on one device, by component."""
    model, s = job.model, job.training.seq_len

    links = lnk.job_links(job, a)

    def link(span: Number, message_bytes: Number, ranks: Number) -> Number:
        return lnk.link_bytes_s(links, span, message_bytes, ranks)

    tokens = s * k.micro_batch / k.cp
    slowdown = a.overlap_compute_slowdown
    gemm = gemm_s(model, gemm_rates(job, a), k, tokens)
    accumulation_s = gradient_accumulation_s(
        model,
        k,
        a.gradient_accumulation_bytes_per_param,
        a.pipelined_gradient_accumulation_bytes_per_param,
        job.cluster.gpu.memory_bandwidth_bytes_s,
    )
    elementwise = elementwise_s(model, elementwise_kernels(job, a), k, tokens)
    matmul = gemm + elementwise + accumulation_s
    attention = attention_time_s(model, s, attention_kernel(job, a), k, tokens)
    cp_bytes = tim.cp_exchange_bytes(
        k.cp, s * k.micro_batch, model.kv_width, model.num_kv_heads, k.tp, k.recompute
    )
    cp_message = cp_bytes / tim.cp_passes(k.recompute)
    # an all-gather's ring spreads over the group's NICs; ring attention's sends do not
    cp_ranks = k.cp if a.cp_exchange == "all_gather" else 1
    cp_transfer_s = cp_bytes / link(k.cp_span, cp_message, cp_ranks)
    cp_s = lnk.collective_s(links, k.cp, k.cp_span, tim.cp_passes(k.recompute), cp_transfer_s)
    tp_bandwidth = link(k.tp_span, tokens * model.hidden_size * mem.BF16_BYTES, k.tp)
    tp_transfer_s = tim.tp_transfer_s(k.tp, tokens, model.hidden_size, tp_bandwidth, k.recompute)
    tp_s = lnk.collective_s(links, k.tp, k.tp_span, tim.tp_collectives(k.recompute), tp_transfer_s)
    return {
        "matmul": matmul,
        "attention": attention,
        "recompute": layer_recompute_s(job, a, k, tokens, gemm, matmul, attention),
        # what hides on SMs (userbuffers' bulk and pipeline overlaps) still slows the GEMM
        "tp_comm": tp_s
        * tim.exposed_share(a.tp_overlap_fraction, slowdown * a.tp_overlap_sm_share),
        "cp_comm": tim.exposed_s(cp_s, attention, a.cp_overlap_fraction, slowdown),
        "moe_all_to_all": a2a.moe_all_to_all_s(
            job, links, a2a.all_to_all_hiding(a), k, tokens, matmul + attention
        ),
        "moe_host": tim.moe_host_s(model.moe_layer_share, a.moe_host_ms_per_layer, tokens),
    }


def busiest_stage_s(layers: mem.StageLayers, pp: Number, layer_s: Number, head_s: Number) -> Number:
    """The pipeline runs at its slowest device's pace: the last one carries the output head."""
    first = layers.first * layer_s + np.where(pp == 1, head_s, 0.0)
    middle = np.where(pp > 2, layers.middle * layer_s, 0.0)
    last = layers.last * layer_s + head_s
    return np.maximum(np.maximum(first, middle), last)


# What a layer's time on one micro-batch is made of (layer_times' keys, the head apart).
LAYER_PARTS = (
    "matmul",
    "attention",
    "recompute",
    "tp_comm",
    "cp_comm",
    "moe_all_to_all",
    "moe_host",
)


def micro_batch_and_step_s(
    busy: Number,
    p2p: Number,
    zero3_mb_s: Number,
    dp_mb_s: Number,
    dp_step_s: Number,
    micro_batch_overlap: float,
    step_overlap: tuple[Number, Number],
    slowdown: float,
) -> tuple[Number, Number, Number, Number]:
    """(exposed ZeRO-3, exposed per-micro-batch sync, a micro-batch slot, exposed per-step
    sync) seconds: the data-parallel traffic hides under the busiest stage's compute, the
    per-micro-batch share by `micro_batch_overlap` (zero3_overlap_fraction), the per-step
    share under the slots data_parallel.step_sync_overlap gives it (`step_overlap`), the
    compute beside them slowed by `slowdown` (overlap_compute_slowdown)."""
    zero3_exposed = tim.exposed_s(zero3_mb_s, busy, micro_batch_overlap, slowdown)
    dp_mb_exposed = tim.exposed_s(dp_mb_s, busy, micro_batch_overlap, slowdown)
    per_mb = busy + p2p + zero3_exposed + dp_mb_exposed
    overlap, unhidden = step_overlap
    dp_exposed = tim.exposed_s(dp_step_s, per_mb, overlap, slowdown, unhidden)
    return zero3_exposed, dp_mb_exposed, per_mb, dp_exposed


def step_s(slots: Number, per_mb: Number, dp_exposed: Number, optimizer_s: Number) -> Number:
    """A step: its micro-batch slots, the exposed per-step sync, then the optimiser step."""
    return slots * per_mb + dp_exposed + optimizer_s


def step_waterfall(
    m: Number,
    slots: Number,
    stage: Any,
    busy: Number,
    p2p: Number,
    per_mb: Number,
    dp_exposed: Number,
    optimizer_s: Number,
    balanced: Number,
) -> tuple[Number, ...]:
    """Cumulative step times, one more effect charged at each MFU_STEP_NAMES step."""
    compute = ("matmul", "attention")
    return (
        balanced,
        m * stage(*compute),
        m * stage(*compute, "recompute"),
        slots * stage(*compute, "recompute"),
        slots * stage(*compute, "recompute", "tp_comm"),
        slots * stage(*compute, "recompute", "tp_comm", "cp_comm"),
        slots * stage(*compute, "recompute", "tp_comm", "cp_comm", "moe_all_to_all"),
        slots * busy,
        slots * (busy + p2p),
        step_s(slots, per_mb, dp_exposed, 0.0),
        step_s(slots, per_mb, dp_exposed, optimizer_s),
    )


def step_flops(
    job: TrainingJob, recompute: Number, replayed_share: Number = 0.0
) -> tuple[Number, Number]:
    """(model, hardware) FLOPs of a whole step of the job at the `recompute` codes, selective
    recompute running `replayed_share` of the forward matmuls again (replayed_matmul_share)."""
    model, L = job.model, job.model.num_layers
    tokens = job.training.tokens_per_step
    head = model.vocab_size * model.hidden_size
    layers, q = model.active_layer_params, model.q_width
    # windowed layers score min(w, s) keys a query: the model's work, as MFU counts it
    keys = tim.attended_keys(
        job.training.seq_len,
        model.sliding_window,
        model.windowed_layers,
        L,
        model.attention_chunk_size,
        model.chunked_layers,
    )
    model_flops = tokens * tim.model_flops_per_token(layers, head, L, q, keys)
    extra = tokens * tim.recompute_flops_per_token(layers, L, q, keys, recompute)
    replayed = tokens * 2 * layers * replayed_share
    return model_flops, model_flops + extra + replayed


@dataclass(frozen=True)
class Pipeline:
    """What a step's micro-batch slots cost before the data-parallel sync and the optimiser
    step: the micro-batches, the schedule's warm-up slots, each rank's layers, a layer's
    parts and the head (layer_times), and a micro-batch's pipeline sends."""

    micro_batches: Number
    warmup: Number
    layers: mem.StageLayers
    times: dict[str, Number]
    p2p: Number
    pp: Number

    def stage(self, *parts: str) -> Number:
        """The busiest stage's seconds a micro-batch, counting the named layer parts."""
        layer_s = sum(self.times[p] for p in parts)
        return busiest_stage_s(self.layers, self.pp, layer_s, self.times["head"])

    @property
    def slots(self) -> Number:
        return self.micro_batches + self.warmup


def pipeline(job: TrainingJob, a: CostAssumptions, k: Degrees) -> Pipeline:
    times = layer_times(job, a, k)
    times["head"] = rnk.head_s(job, a, k)
    return Pipeline(
        micro_batches=job.training.global_batch // (k.dp * k.micro_batch),
        warmup=tim.warmup_micro_batches(
            k.pp, k.vpp, k.schedule, a.zero_bubble_weight_grad_fraction
        ),
        layers=mem.stage_layers(job.model.num_layers, k.pp, k.vpp),
        times=times,
        p2p=rnk.p2p_s(job, a, k),
        pp=k.pp,
    )


def step_floor_s(job: TrainingJob, a: CostAssumptions, k: Degrees) -> Number:
    """The step before its data-parallel sync and optimiser step: every slot of the busiest
    stage with its pipeline sends (the waterfall's "after pipeline sends"). The step only
    adds to it (micro_batch_and_step_s, step_s: exposed traffic is never negative) and no
    ZeRO stage enters it (the sync and the optimiser step read k.zero), so it bounds
    from below the step of the same layout at every ZeRO stage: what the search rules degree
    tuples out by (optimizer/search/ceilings.py). The one per-stage figure in a layer's time,
    the pipelined accumulation pass, is read at its least."""
    per_stage = a.pipelined_gradient_accumulation_bytes_per_param
    if len(set(per_stage)) > 1:  # the floor is priced per box: copy only when it differs
        least = [min(per_stage)] * len(per_stage)
        a = a.model_copy(update={"pipelined_gradient_accumulation_bytes_per_param": least})
    pipe = pipeline(job, a, k)
    return pipe.slots * (pipe.stage(*LAYER_PARTS) + pipe.p2p)


def breakdown(job: TrainingJob, a: CostAssumptions, k: Degrees) -> Breakdown:
    """Price layouts given as numbers or as equally shaped arrays."""
    model, gpu = job.model, job.cluster.gpu
    pipe = pipeline(job, a, k)
    m, layers, times, warmup, p2p = (
        pipe.micro_batches,
        pipe.layers,
        pipe.times,
        pipe.warmup,
        pipe.p2p,
    )
    sync = data_parallel_sync(job, a)
    dp_step_s, dp_mb_s, zero3_mb_s = data_parallel_s(job, sync, k, layers)
    optimizer_s = rnk.optimizer_step_s(job, a, k, layers)
    stage = pipe.stage
    per_layer = times["matmul"] + times["attention"]
    balanced = m * (model.num_layers * per_layer + times["head"]) / k.pp
    busy = stage(*LAYER_PARTS)
    hiding = (
        a.zero3_overlap_fraction,
        sync.overlap(k.pp, k.vpp, k.zero),
        a.overlap_compute_slowdown,
    )
    zero3_exposed, dp_mb_exposed, per_mb, dp_exposed = micro_batch_and_step_s(
        busy, p2p, zero3_mb_s, dp_mb_s, dp_step_s, *hiding
    )
    slots = pipe.slots
    model_flops, hardware_flops = step_flops(
        job, k.recompute, engine_replayed_share(job, a, k.recompute)
    )
    times.update(
        pp_p2p_per_micro_batch=p2p,
        zero3_per_micro_batch=zero3_exposed,
        dp_comm_per_micro_batch=dp_mb_exposed,
        dp_comm_exposed=dp_exposed,
        optimizer_step=optimizer_s,
    )
    return Breakdown(
        micro_batches=m,
        memory=stage_memory(job, a, k, m),
        valid=layers.valid,
        bubble=warmup / slots,
        layer_times_s=times,
        step_times_s=step_waterfall(
            m, slots, stage, busy, p2p, per_mb, dp_exposed, optimizer_s, balanced
        ),
        model_flops=model_flops,
        hardware_flops=hardware_flops,
        cluster_flop_s=job.cluster.gpus * gpu.peak_flop_s,
    )
