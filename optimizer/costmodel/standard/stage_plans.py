"""Profile `standard` for a stage plan: a pipeline whose ranks hold any number of layers,
each rank with its own recompute mode (models/stage_plan.py).

A rank's memory and time are its layers' (at its mode) plus what its place adds: the
embedding on the first, the head and the logits on the last, `in_flight_on_rank` micro-
batches held. The step is breakdown's: the busiest rank sets each micro-batch slot, the
data-parallel traffic of the rank with the most (`micro_batch_and_step_s`). Both the CP-SAT
stage search and `price_plan` read these terms, so the solver's integers and the reported
figures come from one set of formulas; an even plan at one mode prices as `breakdown`
(tests/test_stage_plans.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from models.job import TrainingJob
from models.layout import Layout
from models.stage_plan import StagePlan
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.grid import RECOMPUTE_CODES, LayoutGrid, recompute_code
from optimizer.costmodel.standard import breakdown as brk
from optimizer.costmodel.standard import data_parallel as dpl
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import ranks as rnk
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.data_parallel import data_parallel_sync
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.costmodel.standard.profile import grid_degrees
from optimizer.costmodel.standard.recompute import engine_replayed_share

Number = Any
MODES = len(RECOMPUTE_CODES)


@dataclass(frozen=True)
class PlanTerms:
    """What a stage plan of one layout is priced from; `by mode` arrays index RECOMPUTE_CODES."""

    degrees: Degrees  # the layout's, one per mode (recompute 0, 1, 2)
    micro_batches: int
    slots: float  # micro-batches plus the schedule's warm-up, per step
    layer_s: np.ndarray  # by mode: one layer, one micro-batch
    head_s: float
    p2p_s: float
    memory: rnk.RankMemoryTerms  # by mode
    extra_flops_per_layer: np.ndarray  # by mode: recompute FLOPs of one layer, whole step
    model_flops: float
    cluster_flop_s: float


def plan_terms(job: TrainingJob, a: CostAssumptions, layout: Layout) -> PlanTerms:
    """The terms of `layout` at each recompute mode (its own mode is ignored)."""
    modes = [layout.model_copy(update={"recompute": code}) for code in RECOMPUTE_CODES]
    k = grid_degrees(LayoutGrid.from_layouts(modes))
    times = brk.layer_times(job, a, k)
    m = job.training.global_batch // (layout.data_parallel_size * layout.micro_batch)
    warmup = tim.warmup_micro_batches(k.pp, k.vpp, k.schedule, a.zero_bubble_weight_grad_fraction)
    replayed = engine_replayed_share(job, a, k.recompute)
    model_flops, hardware_flops = brk.step_flops(job, k.recompute, replayed)
    return PlanTerms(
        degrees=k,
        micro_batches=m,
        slots=float(m + np.asarray(warmup).reshape(-1)[0]),
        layer_s=np.asarray(sum(times[part] for part in brk.LAYER_PARTS), dtype=float),
        head_s=float(np.asarray(rnk.head_s(job, a, k)).reshape(-1)[0]),
        p2p_s=float(np.asarray(rnk.p2p_s(job, a, k)).reshape(-1)[0]),
        memory=rnk.rank_memory_terms(job, a, k),
        extra_flops_per_layer=(np.asarray(hardware_flops) - model_flops) / job.model.num_layers,
        model_flops=float(model_flops),
        cluster_flop_s=job.cluster.gpus * job.cluster.gpu.peak_flop_s,
    )


def mode_degrees(terms: PlanTerms, mode: int) -> Degrees:
    """The layout's degrees at one recompute mode, as scalars."""
    k = terms.degrees
    return Degrees(**{f: np.asarray(getattr(k, f))[mode] for f in k.__dataclass_fields__})


def rank_embedding_params(terms: PlanTerms, pp: int, rank: Number) -> Number:
    """The embedding on the first rank, the head on the last (both on one when pp = 1)."""
    ends = (np.asarray(rank) == 0) | (np.asarray(rank) == pp - 1)
    return np.where(ends, float(terms.memory.embedding_params[0]), 0.0)


def rank_logits_bytes(terms: PlanTerms, pp: int, rank: Number) -> Number:
    return np.where(np.asarray(rank) == pp - 1, float(terms.memory.logits_bytes[0]), 0.0)


def rank_in_flight(terms: PlanTerms, rank: Number) -> Number:
    k = terms.degrees
    return mem.in_flight_on_rank(terms.micro_batches, k.pp[0], k.vpp[0], k.schedule[0], rank)


def rank_time_s(terms: PlanTerms, pp: int, rank: int, layers: Number, mode: int) -> Number:
    """One micro-batch's forward and backward on the rank; the last runs the head."""
    return layers * terms.layer_s[mode] + (terms.head_s if rank == pp - 1 else 0.0)


def rank_memory(
    terms: PlanTerms, a: CostAssumptions, rank: Number, layers: Number, mode: int
) -> mem.StageMemory:
    """The bytes by part of rank(s) `rank` holding `layers` layers at `mode`."""
    k = mode_degrees(terms, mode)
    pp = int(k.pp)
    by_mode = terms.memory
    mode_terms = rnk.RankMemoryTerms(
        **{f: np.asarray(getattr(by_mode, f))[mode] for f in by_mode.__dataclass_fields__}
    )
    held = rnk.rank_memory(
        rnk.param_state(a),
        k,
        mode_terms,
        layers,
        rank_embedding_params(terms, pp, rank),
        rank_in_flight(terms, rank),
        rank_logits_bytes(terms, pp, rank),
    )
    return rnk.rank_runtime(a, k)(held)


def rank_data_parallel_s(
    job: TrainingJob,
    sync: dpl.DataParallelSync,
    terms: PlanTerms,
    rank: int,
    layers: Number,
    mode: int = 0,
) -> tuple[Number, Number, Number]:
    """(per step, per micro-batch sync, per micro-batch ZeRO-3) seconds of the rank's own
    parameters at its recompute mode, which changes them only where a replayed forward
    gathers again (zero3_recompute_regathers)."""
    k = mode_degrees(terms, mode)
    embedding = rank_embedding_params(terms, int(k.pp), rank)
    return dpl.rank_data_parallel_s(job, sync, k, layers, embedding)


def rank_optimizer_step_s(
    job: TrainingJob, a: CostAssumptions, terms: PlanTerms, rank: int, layers: Number
) -> Number:
    """The rank's optimiser step over its own parameters; recompute does not change it."""
    k = mode_degrees(terms, 0)
    embedding = rank_embedding_params(terms, int(k.pp), rank)
    return rnk.rank_optimizer_step_s(
        job.model,
        rnk.param_state(a),
        k,
        layers,
        embedding,
        job.cluster.gpu.memory_bandwidth_bytes_s,
    )


@dataclass(frozen=True)
class PlanPrice:
    """A stage plan's figures: per rank, then the step."""

    rank_memory: tuple[mem.StageMemory, ...]
    rank_time_s: tuple[float, ...]
    per_micro_batch_s: float
    step_time_s: float
    mfu: float
    hfu: float

    @property
    def memory_bytes(self) -> float:
        return max(float(m.total) for m in self.rank_memory)

    @property
    def allocator_bytes(self) -> float:
        """The busiest rank's share in PyTorch's allocator (what its statistics report)."""
        return max(float(m.allocator) for m in self.rank_memory)


def price_plan(job: TrainingJob, a: CostAssumptions, layout: Layout, plan: StagePlan) -> PlanPrice:
    plan.check(layout, job.model.num_layers)
    return price_plan_terms(job, a, plan_terms(job, a, layout), plan)


def price_plan_terms(
    job: TrainingJob, a: CostAssumptions, terms: PlanTerms, plan: StagePlan
) -> PlanPrice:
    pp = len(plan.layers)
    modes = [recompute_code(r) for r in plan.recompute]
    ranks = list(zip(range(pp), plan.layers, modes, strict=True))
    times = [float(rank_time_s(terms, pp, r, n, mode)) for r, n, mode in ranks]
    memory = tuple(rank_memory(terms, a, r, n, mode) for r, n, mode in ranks)
    sync = data_parallel_sync(job, a)  # read once for every rank of the plan
    traffic = [rank_data_parallel_s(job, sync, terms, r, n, mode) for r, n, mode in ranks]
    dp_step, dp_mb, zero3 = (max(float(t[i]) for t in traffic) for i in range(3))
    busy = max(times)
    step_overlap = sync.overlap(pp, layout_vpp(terms), layout_zero(terms))
    hiding = (a.zero3_overlap_fraction, step_overlap, a.overlap_compute_slowdown)
    _, _, per_mb, dp_exposed = brk.micro_batch_and_step_s(
        busy, terms.p2p_s, zero3, dp_mb, dp_step, *hiding
    )
    optimizer_s = max(float(rank_optimizer_step_s(job, a, terms, r, n)) for r, n, _ in ranks)
    step_s = float(brk.step_s(terms.slots, per_mb, dp_exposed, optimizer_s))
    extra = sum(n * float(terms.extra_flops_per_layer[mode]) for _, n, mode in ranks)
    return PlanPrice(
        rank_memory=memory,
        rank_time_s=tuple(times),
        per_micro_batch_s=float(per_mb),
        step_time_s=step_s,
        mfu=terms.model_flops / (terms.cluster_flop_s * step_s),
        hfu=(terms.model_flops + extra) / (terms.cluster_flop_s * step_s),
    )


def layout_vpp(terms: PlanTerms) -> int:
    """The layout's interleaved chunks (its degrees hold one row per recompute mode)."""
    return int(np.asarray(terms.degrees.vpp).reshape(-1)[0])


def layout_zero(terms: PlanTerms) -> int:
    """The layout's ZeRO stage."""
    return int(np.asarray(terms.degrees.zero).reshape(-1)[0])


def step_sync_hiding(job: TrainingJob, a: CostAssumptions, terms: PlanTerms) -> tuple[float, float]:
    """(the contended slots the per-step sync hides under, the least share of it charged) as
    times.exposed_s applies them: max(c - o' h, f c)."""
    pp = int(np.asarray(terms.degrees.pp).reshape(-1)[0])
    sync = data_parallel_sync(job, a)
    overlap, unhidden = sync.overlap(pp, layout_vpp(terms), layout_zero(terms))
    slowdown = a.overlap_compute_slowdown
    contended = float(tim.contended_overlap(overlap, slowdown))
    return contended, float(tim.exposed_floor(slowdown, unhidden))


def even_plan(job: TrainingJob, layout: Layout) -> StagePlan:
    """The plan `breakdown` prices: its first, middle and last layer counts, one mode."""
    layers = mem.stage_layers(job.model.num_layers, layout.pp, layout.vpp)
    pp = layout.pp
    counts = [int(layers.middle)] * pp
    counts[0], counts[-1] = int(layers.first), int(layers.last)
    return StagePlan(layers=tuple(counts), recompute=(layout.recompute,) * pp)


# --- bounds over many layouts at once -------------------------------------------------


def step_lower_bounds_s(job: TrainingJob, a: CostAssumptions, grid: LayoutGrid) -> np.ndarray:
    """Per row: no plan of this row's layout at this row's recompute mode has a shorter step."""
    k = grid_degrees(grid)
    L = job.model.num_layers
    times = brk.layer_times(job, a, k)
    layer_s = sum(times[part] for part in brk.LAYER_PARTS)
    head = rnk.head_s(job, a, k)
    busy = np.maximum((L * layer_s + head) / k.pp, k.vpp * layer_s + head)
    m = job.training.global_batch // (k.dp * k.micro_batch)
    slots = m + tim.warmup_micro_batches(
        k.pp, k.vpp, k.schedule, a.zero_bubble_weight_grad_fraction
    )
    p2p = rnk.p2p_s(job, a, k)
    most_layers = np.ceil(L / k.pp)
    sync = data_parallel_sync(job, a)
    dp_step, dp_mb, zero3 = dpl.rank_data_parallel_s(job, sync, k, most_layers, 0.0)
    slowdown = a.overlap_compute_slowdown  # the overlaps as exposed_s applies them
    step_overlap = sync.overlap(k.pp, k.vpp, k.zero)
    hiding = (a.zero3_overlap_fraction, step_overlap, slowdown)
    _, _, per_mb, dp_exposed = brk.micro_batch_and_step_s(busy, p2p, zero3, dp_mb, dp_step, *hiding)
    # the busiest rank holds at least most_layers layers' parameters, so steps at least this
    hbm_bytes_s = job.cluster.gpu.memory_bandwidth_bytes_s
    optimizer_s = rnk.rank_optimizer_step_s(
        job.model, rnk.param_state(a), k, most_layers, 0.0, hbm_bytes_s
    )
    zero3_overlap = tim.contended_overlap(a.zero3_overlap_fraction, slowdown)
    monotone = (zero3_overlap <= 0.5) | (np.minimum(zero3, dp_mb) == 0)
    dp_overlap, _ = step_overlap
    monotone &= tim.contended_overlap(dp_overlap, slowdown) <= slots
    exposed = np.asarray(brk.step_s(slots, per_mb, dp_exposed, optimizer_s))
    return np.where(monotone, exposed, brk.step_s(slots, busy + p2p, 0.0, optimizer_s))


def exact_split(num_layers: int, pp: np.ndarray, vpp: np.ndarray) -> np.ndarray:
    """Rows whose even plan places exactly the model's layers (else `breakdown` prices the
    busiest chunk's count everywhere: an upper bound, no plan)."""
    layers = mem.stage_layers(num_layers, pp, vpp)
    middle = np.maximum(pp - 2, 0) * layers.middle
    placed = np.where(pp == 1, layers.first, layers.first + middle + layers.last)
    return placed == num_layers


__all__ = [
    "MODES",
    "PlanPrice",
    "PlanTerms",
    "even_plan",
    "exact_split",
    "plan_terms",
    "price_plan",
    "price_plan_terms",
    "data_parallel_sync",
    "rank_data_parallel_s",
    "rank_memory",
    "step_lower_bounds_s",
    "step_sync_hiding",
]
