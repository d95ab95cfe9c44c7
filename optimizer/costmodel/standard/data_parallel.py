"""Profile `standard`, data-parallel sync: what each rank's gradients (and, under ZeRO-3,
its parameters) send over the data group, per step and per micro-batch, and how fast the
group's links carry it (docs/cost-model.md, "ZeRO-3 / FSDP", "Mixture of experts",
"Engines"). Split from breakdown.py, which charges the exposure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.job import TrainingJob
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import precision as prec
from optimizer.costmodel.standard import ranks as rnk
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.degrees import Degrees, per_synced_stage
from optimizer.costmodel.standard.links import Links, collective_s, job_links, link_bytes_s

Number = Any


@dataclass(frozen=True)
class DataParallelSync:
    """What a rank's data-parallel traffic reads besides the model and the layout
    (data_parallel_sync): by ZeRO stage 0-2, the bf16 parameter volumes its sync sends a step
    and a micro-batch and whether the step's is an all-reduce; the gradient buckets; how the
    step's sync hides; the links; ZeRO-3's collectives."""

    volumes_per_step: tuple[float, ...]  # gradient_volumes_per_step
    volumes_per_micro_batch: tuple[float, ...]  # gradient_volumes_per_micro_batch
    per_micro_batch_with_pp: bool  # per_micro_batch_sync_with_pp
    all_reduce: tuple[bool, ...]  # gradient_sync_all_reduce
    bucket_params: float  # dp_bucket_params
    bucket_grows_with_dp: bool  # dp_bucket_grows_with_dp
    sync_per_chunk: bool  # dp_sync_per_chunk
    overlap_micro_batches: float  # dp_overlap_microbatches
    links: Links
    zero3: Zero3Costs
    gather_volumes_per_step: tuple[float, ...] = (0.0, 1.0, 1.0)  # param_gather_volumes_per_step
    gather_hidden: bool = True  # dp_param_gather_hidden
    # the layers' weights' bytes on the gather's wire over bf16's: 1 unless they are kept in
    # FP8 (fp8_params in fp8 or mxfp8)
    gather_bytes_ratio: float = 1.0

    def overlap(self, pp: Number, vpp: Number, zero: Number) -> tuple[Number, Number]:
        """step_sync_overlap as the request's engine hides the step's sync: the parameters'
        all-gather, where the engine does not overlap it, among what nothing hides."""
        gather = 0.0 if self.gather_hidden else self.gather_share(zero)
        return step_sync_overlap(pp, vpp, self.sync_per_chunk, self.overlap_micro_batches, gather)

    def gather_saving(self, zero: Number) -> Number:
        """Volumes a step's all-gather of the layers' weights saves at each ZeRO stage where
        they travel in fewer bytes than bf16 (none at ZeRO-3, priced apart)."""
        stage = np.clip(np.asarray(zero, dtype=np.int64), 0, 2)
        saved = np.asarray(self.gather_volumes_per_step)[stage] * (1.0 - self.gather_bytes_ratio)
        return np.where(np.asarray(zero) >= 3, 0.0, saved)

    def step_volumes(self, zero: Number) -> tuple[Number, Number]:
        """(the step's volumes, of them the parameters' all-gather's) at each ZeRO stage, the
        layers' weights gathered in their bytes."""
        stage = np.clip(np.asarray(zero, dtype=np.int64), 0, 2)
        saved = self.gather_saving(zero)
        per_step = np.asarray(self.volumes_per_step)[stage]
        return per_step - saved, np.asarray(self.gather_volumes_per_step)[stage] - saved

    def gather_share(self, zero: Number) -> Number:
        """The all-gather's share of the step's sync (none at ZeRO-3, priced apart)."""
        total, gather = self.step_volumes(zero)
        share = np.where(total > 0, gather / np.maximum(total, 1e-12), 0.0)
        return np.where(np.asarray(zero) >= 3, 0.0, share)


def data_parallel_sync(job: TrainingJob, a: CostAssumptions) -> DataParallelSync:
    """The request's data-parallel sync, read once a pricing."""
    return DataParallelSync(
        volumes_per_step=tuple(a.gradient_volumes_per_step),
        volumes_per_micro_batch=tuple(a.gradient_volumes_per_micro_batch),
        per_micro_batch_with_pp=a.per_micro_batch_sync_with_pp,
        all_reduce=tuple(a.gradient_sync_all_reduce),
        bucket_params=a.dp_bucket_params,
        bucket_grows_with_dp=a.dp_bucket_grows_with_dp,
        sync_per_chunk=a.dp_sync_per_chunk,
        overlap_micro_batches=a.dp_overlap_microbatches,
        links=job_links(job, a),
        zero3=zero3_costs(a),
        gather_volumes_per_step=tuple(a.param_gather_volumes_per_step),
        gather_hidden=a.dp_param_gather_hidden,
        gather_bytes_ratio=gather_bytes_ratio(job.training.precision, a.fp8_params),
    )


def gather_bytes_ratio(precision: str, fp8_params: bool) -> float:
    """Bytes a layer weight takes on the distributed optimizer's all-gather over bf16's: its
    FP8 bytes where the engine keeps it in FP8 (fp8_params in fp8 or mxfp8, with its block
    scales: precision.stored_bytes_per_value), else bf16's."""
    fmt = prec.gemm_format(precision)
    if not fp8_params or fmt is None or precision == "nvfp4":
        return 1.0
    return prec.stored_bytes_per_value(fmt) / mem.BF16_BYTES


def data_parallel_s(
    job: TrainingJob, sync: DataParallelSync, k: Degrees, layers: mem.StageLayers
) -> tuple[Number, Number, Number]:
    """(per step, per micro-batch gradient sync, per micro-batch ZeRO-3) exposure-free seconds
    of data-parallel traffic: each rank syncs its own parameters, the step waits for the
    slowest (the first and last hold the embedding and head, a middle rank may hold more
    layers)."""
    ends, middle = rnk.over_pipeline_ranks(
        job,
        k,
        layers,
        lambda n_layers, embedding: rank_data_parallel_s(job, sync, k, n_layers, embedding),
    )
    return tuple(np.maximum(e, m) for e, m in zip(ends, middle, strict=True))  # type: ignore[return-value]


def rank_data_parallel_s(
    job: TrainingJob, sync: DataParallelSync, k: Degrees, n_layers: Number, embedding: Number
) -> tuple[Number, Number, Number]:
    """The same seconds for a pipeline rank of `n_layers` layers and `embedding` parameters
    (its share of the embedding and output head)."""
    model = job.model
    layer_params = mem.dense_params_per_layer_per_device(model, k.tp)
    dense = n_layers * layer_params + embedding
    experts = n_layers * mem.expert_params_per_layer_per_device(model, k.tp, k.ep)
    group = k.dp * k.cp
    # experts reduce over their own data-parallel group, every ep-th rank of the dense one
    # over the same span, so with as many fewer NICs a node (Megatron-Core gives expert
    # parameters buffers of their own on intra_expt_dp_group: megatron/core/distributed/
    # distributed_data_parallel.py l.280-292, parallel_state.py l.872-895 @d98e8a6)
    shares: Shares = ((dense, group), (experts, group / k.ep))
    if not model.is_moe:  # a dense model's expert share is zero everywhere
        shares = shares[:1]
    per_step, per_micro_batch = gradient_volumes(
        k, sync.volumes_per_step, sync.volumes_per_micro_batch, sync.per_micro_batch_with_pp
    )
    # the layers' weights gather in their own bytes (FP8 parameters), the embedding in bf16
    saved = sync.gather_saving(k.zero)
    layer_share = np.where(dense > 0, n_layers * layer_params / np.maximum(dense, 1.0), 0.0)
    bucket = bucket_params(group, dense + experts, sync.bucket_params, sync.bucket_grows_with_dp)
    # a once-a-step all-reduce (DDP's, DeepSpeed's ZeRO-1) NCCL may run on its tree; the
    # distributed optimizer's reduce-scatter and all-gather it may not
    all_reduce = per_synced_stage(sync.all_reduce, k)
    links, span = sync.links, k.data_group_span
    zero3_s = zero3_collectives_s(job, sync.zero3, links, k, n_layers, shares, dense + experts)
    step_s = sum(
        synced_s(links, span, (share,), bucket, volumes, tim.GRAD_SYNC_PASSES, all_reduce)
        for share, volumes in zip(
            shares, (per_step - saved * layer_share, per_step - saved), strict=False
        )
    )
    return (
        step_s,
        synced_s(links, span, shares, bucket, per_micro_batch, 1),
        np.where(k.zero >= 3, zero3_s, 0.0),
    )


# (parameters, ranks of the group they sync over): the dense share, then the experts'
Shares = tuple[tuple[Number, Number], ...]


def bucket_params(
    group: Number, stage_params: Number, least_params: float, grows_with_dp: bool
) -> Number:
    """Parameters a gradient bucket holds: Megatron-Core's max(40M, 1M x dp), `least_params`
    the 40M (megatron/core/distributed/distributed_data_parallel.py l.134 @d98e8a6), or a
    fixed `least_params` where the engine's optimiser cuts them so (not `grows_with_dp`); at
    most the stage's."""
    bucket = least_params
    if grows_with_dp:
        bucket = np.maximum(bucket, 1e6 * group)
    return np.minimum(bucket, stage_params)


def moved_s(
    links: Links,
    span: Number,
    passes: Number,
    message_bytes: Number,
    params: Number,
    ranks: Number,
) -> Number:
    """Seconds `passes` ring passes of a group's `params` take over its own links (the group
    of `ranks` spread over `span` ranks)."""
    bandwidth = link_bytes_s(links, span, message_bytes, ranks)
    return np.where(params > 0, tim.ring_pass_bytes(passes, params, ranks) / bandwidth, 0.0)


def synced_s(
    links: Links,
    span: Number,
    shares: Shares,
    bucket: Number,
    volumes: Number,
    collectives: int,
    all_reduce: Number = False,
) -> Number:
    """Each group's buckets, `collectives` a bucket (pairs of them all-reduces where
    `all_reduce`), with their latency, over the data-parallel groups' `span`."""
    seconds = sum(
        collective_s(
            links,
            ranks,
            span,
            np.ceil(params / np.maximum(bucket, 1.0)) * collectives,
            moved_s(links, span, volumes, bucket * mem.BF16_BYTES, params, ranks),
            all_reduce,
        )
        for params, ranks in shares
    )
    return np.where(volumes > 0, seconds, 0.0)


@dataclass(frozen=True)
class Zero3Costs:
    """How ZeRO-3's collectives run beside the bytes they move: how many a layer, which passes
    gather again, and what each costs on the host and in HBM (zero3_costs)."""

    gather_unit: str  # zero3_gather_unit
    gathers_per_layer: int | None  # zero3_gathers_per_layer
    scatters_per_layer: int | None  # zero3_reduce_scatters_per_layer
    reuse_distance_params: float | None  # zero3_reuse_distance_params
    recompute_regathers: bool  # zero3_recompute_regathers
    copy_per_rank_s: float  # zero3_copy_per_rank_s
    gather_views_per_rank_s: float  # zero3_gather_views_per_rank_s
    scatter_views_per_rank_s: float  # zero3_scatter_views_per_rank_s
    gather_buffer_bytes_per_param: float  # zero3_gather_buffer_bytes_per_param
    scatter_buffer_bytes_per_param: float  # zero3_scatter_buffer_bytes_per_param


def zero3_costs(a: CostAssumptions) -> Zero3Costs:
    """The request's ZeRO-3 collective costs."""
    return Zero3Costs(
        gather_unit=a.zero3_gather_unit,
        gathers_per_layer=a.zero3_gathers_per_layer,
        scatters_per_layer=a.zero3_reduce_scatters_per_layer,
        reuse_distance_params=a.zero3_reuse_distance_params,
        recompute_regathers=a.zero3_recompute_regathers,
        copy_per_rank_s=a.zero3_copy_per_rank_s,
        gather_views_per_rank_s=a.zero3_gather_views_per_rank_s,
        scatter_views_per_rank_s=a.zero3_scatter_views_per_rank_s,
        gather_buffer_bytes_per_param=a.zero3_gather_buffer_bytes_per_param,
        scatter_buffer_bytes_per_param=a.zero3_scatter_buffer_bytes_per_param,
    )


def zero3_collectives_s(
    job: TrainingJob,
    zero3: Zero3Costs,
    links: Links,
    k: Degrees,
    n_layers: Number,
    shares: Shares,
    stage_params: Number,
) -> Number:
    """ZeRO-3's seconds a micro-batch: it gathers each layer's parameters before forward and
    backward (and a replayed forward), and scatters its gradients after, a layer's parameters
    split over its gathers' messages; list collectives build and copy a rank at a time."""
    model, group, span = job.model, k.dp * k.cp, k.data_group_span
    gather_message = mem.dense_params_per_layer_per_device(model, k.tp) * mem.BF16_BYTES
    gathers, scatters = zero3_collectives_per_layer(
        model, zero3.gather_unit, zero3.gathers_per_layer, zero3.scatters_per_layer
    )
    passes, gather_rounds = zero3_gather_passes(
        model, k, stage_params, zero3.reuse_distance_params, zero3.recompute_regathers
    )
    all_gathers, reduce_scatters = n_layers * gather_rounds * gathers, n_layers * scatters
    gathers_moved_s = sum(
        moved_s(links, span, passes + 1, gather_message / gathers, params, ranks)
        for params, ranks in shares
    )
    copy_s = zero3.copy_per_rank_s
    per_rank_s = all_gathers * (copy_s + zero3.gather_views_per_rank_s) + (
        reduce_scatters * (copy_s + zero3.scatter_views_per_rank_s)
    )
    return (
        collective_s(links, group, span, all_gathers + reduce_scatters, gathers_moved_s)
        + group * per_rank_s
        + n_layers
        * zero3_buffer_s(
            mem.params_per_layer_per_device(model, k.tp, k.ep),
            passes,
            zero3.gather_buffer_bytes_per_param,
            zero3.scatter_buffer_bytes_per_param,
            job.cluster.gpu.memory_bandwidth_bytes_s,
        )
    )


def zero3_buffer_s(
    params: Number,
    passes: Number,
    gather_bytes_per_param: float,
    scatter_bytes_per_param: float,
    hbm_bytes_s: float | None,
) -> Number:
    """One layer's seconds a micro-batch of the HBM traffic ZeRO-3's collectives add around
    NCCL's (`gather_bytes_per_param` on each of the `passes` gathered passes of its `params`
    on the rank, `scatter_bytes_per_param` on its gradients), at HBM bandwidth (none priced
    on a GPU without one)."""
    if hbm_bytes_s is None:
        return 0.0
    gathered = passes * gather_bytes_per_param
    return params * (gathered + scatter_bytes_per_param) / hbm_bytes_s


def zero3_gather_passes(
    model: Any,
    k: Degrees,
    stage_params: Number,
    reuse_distance_params: float | None,
    recompute_regathers: bool,
) -> tuple[Number, Number]:
    """(passes of the rank's parameters ZeRO-3 all-gathers a micro-batch, rounds of a layer's
    gathers): the forward's, then what the backward finds released; under full recompute,
    where the engine's replayed forward gathers again (`recompute_regathers`), the
    replay's, and the backward then gathers what the replay released. With a reuse distance
    R (`reuse_distance_params`) a parameter is released only when more than R others
    are used before its next use: after the forward, that spares the stage's last R / 2 of
    `stage_params` (tp-local, as DeepSpeed counts numel); after a replayed layer, its later
    modules (docs/cost-model.md, "ZeRO-3 / FSDP")."""
    reuse = reuse_distance_params
    if reuse is None:
        after_forward: Number = 1.0
    else:
        after_forward = np.clip(1 - reuse / (2 * np.maximum(stage_params, 1.0)), 0.0, 1.0)
    after_replay, replay_rounds = replayed_layer_released(model, k.tp, reuse)
    replayed = recompute_regathers & (np.asarray(k.recompute) == mem.RECOMPUTE_FULL)
    passes = 1 + after_forward + np.where(replayed, after_replay, 0.0)
    rounds = 1 + after_forward + np.where(replayed, replay_rounds, 0.0)
    return passes, rounds


def replayed_layer_released(model: Any, tp: Number, reuse: float | None) -> tuple[Number, Number]:
    """(share of a layer's parameters, share of its modules) that a replayed forward releases
    before their backward: a module whose next use (its backward) waits on the forward and
    backward of the modules after it, twice their parameters, at least R of them. Modules in
    forward order: Q, K and V, the output projection, the MLP's input matrices, its output
    matrix (MoE layers taken at the dense shape)."""
    if reuse is None:
        return 1.0, 1.0
    h, f = model.hidden_size, model.ffn_hidden_size
    output = model.q_width * h
    sizes = [
        model.attention_params_per_layer - output,
        output,
        (model.mlp_matrices - 1) * h * f,
        h * f,
    ]
    after = np.cumsum([0, *sizes[:0:-1]])[::-1]  # parameters of the modules after each
    released = [np.where(2 * later / tp >= reuse, 1.0, 0.0) for later in after]
    share = sum(r * size for r, size in zip(released, sizes, strict=True)) / sum(sizes)
    return share, sum(released) / len(sizes)


# Parameterised submodules of a layer besides its MLP matrices: two norms, Q, K, V, output.
NORMS_AND_ATTENTION_MODULES = 6


def zero3_collectives_per_layer(
    model: Any, gather_unit: str, gathers_per_layer: int | None, scatters_per_layer: int | None
) -> tuple[int, int]:
    """(all-gathers a layer and pass, gradient reduce-scatters a layer): one each (a `gather_unit`
    of a layer), or one per parameterised submodule, unless the engine's code gives the counts
    (`gathers_per_layer`, `scatters_per_layer`)."""
    unit = 1 if gather_unit == "layer" else NORMS_AND_ATTENTION_MODULES + model.mlp_matrices
    gathers = unit if gathers_per_layer is None else gathers_per_layer
    scatters = unit if scatters_per_layer is None else scatters_per_layer
    return gathers, scatters


def step_sync_overlap(
    pp: Number,
    vpp: Number,
    per_chunk: bool,
    overlap_microbatches: float,
    unhidden_gather: Number = 0.0,
) -> tuple[Number, Number]:
    """(micro-batch slots of the busiest stage the per-step sync hides under, its share sent
    with no compute beside it), for times.exposed_s.

    Chunk by chunk (`per_chunk`, the engine's dp_sync_per_chunk, vpp v > 1), as Megatron-Core runs it
    (NVIDIA/Megatron-LM@d98e8a6): gradients are marked ready only in the last micro-batch
    (megatron/core/distributed/param_and_grad_buffer.py l.863-880), and the schedule starts a
    chunk's reduce-scatter after its last micro-batch's backward (schedules.py l.1438-1456,
    grad_sync_func with align_grad_reduce: megatron/training/training.py l.4356-4359); the
    last group of micro-batches runs every chunk in turn on at least pp of them (get_schedule_
    table, l.989-1016; the group size lies in [pp, m], l.1160-1168), so after chunk c's
    reduce-scatter starts come the backwards of the c chunks below it, pp micro-batches each.
    The next step's all-gathers start at the previous chunk's first forward (l.1334-1353,
    param_sync_func with align_param_gather: training.py l.4360-4363), under that chunk's pp
    forwards. Queued on one stream, v transfers of d = S/v each, the later ones under
    (v - 1) windows of pp chunk passes: the reduce-scatters under (v - 1) pp backwards of a
    chunk, the gathers under as many forwards, together (v - 1)/v x pp micro-batch slots;
    the last chunk's reduce-scatter and the first's gather, 1/v of the sync, hide under
    nothing (its other chunks get one bucket each, training.py l.2504-2514).
    Otherwise: `overlap_microbatches` slots (dp_overlap_microbatches: the last micro-batch's
    backward and the first forward), nothing unhidden. An all-gather the engine runs after
    the optimizer step (`unhidden_gather`, its share of the sync) hides under nothing either:
    the unhidden share is then g + (1 - g) u."""
    chunked = per_chunk & (np.asarray(vpp) > 1)
    vpp = np.maximum(vpp, 1)
    overlap = np.where(chunked, (vpp - 1) / vpp * pp, overlap_microbatches)
    chunk_unhidden = np.where(chunked, 1 / vpp, 0.0)
    return overlap, unhidden_gather + (1 - unhidden_gather) * chunk_unhidden


def gradient_volumes(
    k: Degrees,
    per_step_by_stage: Sequence[float],
    per_micro_batch_by_stage: Sequence[float],
    per_micro_batch_with_pp: bool,
) -> tuple[Number, Number]:
    """(per step, per micro-batch) volumes of the stage's bf16 parameters the ZeRO 0-2 sync
    sends (none at ZeRO-3, priced apart), each given by ZeRO stage 0-2; with pp and an engine
    that defers it (not `per_micro_batch_with_pp`), the per-micro-batch share moves to the
    step."""
    per_step = per_synced_stage(per_step_by_stage, k)
    per_micro_batch = per_synced_stage(per_micro_batch_by_stage, k)
    if not per_micro_batch_with_pp:
        deferred = np.where(np.asarray(k.pp) > 1, per_micro_batch, 0.0)
        per_step, per_micro_batch = per_step + deferred, per_micro_batch - deferred
    zero3 = np.asarray(k.zero) >= 3
    return np.where(zero3, 0.0, per_step), np.where(zero3, 0.0, per_micro_batch)
