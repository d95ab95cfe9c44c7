"""A layout's stage-plan terms as the integers the CP-SAT model reads: nanoseconds, bytes
rounded up, fractions in thousandths. Every value comes from the cost model's stage-plan
functions (optimizer.costmodel.standard.stage_plans); nothing here is a formula of its own
beyond the unit conversion."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from models.job import TrainingJob
from optimizer.costmodel import CostAssumptions, contended_overlap
from optimizer.costmodel import stage_plans as sp

# Seconds per solver time unit: 1 ns is far below any layer's time, so rounding each term
# moves a step by at most pp * modes ns (reported as the solve's tolerance).
TIME_UNIT_S = 1e-9
# Overlap fractions and the slot count in thousandths: exact for the defaults (0.5, 1.0,
# slots like 16 + 15/4); anything finer is rounded and the rounding reported.
FRACTION_SCALE = 1000
# CP-SAT's integers are 64-bit; the objective's worst case stays below this.
MAX_OBJECTIVE = 2**60


@dataclass(frozen=True)
class RankTables:
    """One rank's data: bytes per layer by mode, fixed bytes, and the data-parallel and
    optimiser-step seconds of its parameters by layer count (index = layers)."""

    layer_bytes: tuple[int, ...]  # by mode: state plus held activations, one layer
    fixed_bytes: int  # embedding or head state, logits
    dp_step_units: tuple[int, ...]
    dp_micro_batch_units: tuple[int, ...]
    zero3_units: tuple[int, ...]
    optimizer_units: tuple[int, ...]


@dataclass(frozen=True)
class PlanTables:
    """Everything the stage model reads for one layout."""

    num_layers: int
    pp: int
    vpp: int
    modes: tuple[int, ...]  # allowed recompute codes
    layer_units: tuple[int, ...]  # by mode
    working_bytes: tuple[int, ...]  # by mode
    head_units: int
    p2p_units: int
    slots_scaled: int  # slots x FRACTION_SCALE
    zero3_overlap_scaled: int  # (1 - overlap_compute_slowdown) x the overlap, scaled
    dp_overlap_scaled: int  # the contended slots the per-step sync hides under, scaled
    dp_floor_scaled: int  # the least share of the per-step sync charged (times.exposed_floor)
    slowdown_scaled: int  # overlap_compute_slowdown, scaled: a hidden transfer's least cost
    ranks: tuple[RankTables, ...]
    memory_limit_bytes: int
    # per step, per micro-batch, ZeRO-3, the optimiser step: their least
    least_dp_units: tuple[int, int, int, int]
    rounding: float  # the largest relative rounding of a scaled fraction


def units(seconds: float) -> int:
    return int(round(seconds / TIME_UNIT_S))


def scaled(value: float) -> tuple[int, float]:
    """(round(value x FRACTION_SCALE), its relative rounding)."""
    exact = Fraction(value).limit_denominator(10**9)
    whole = round(exact * FRACTION_SCALE)
    error = 0.0 if value == 0 else abs(whole / FRACTION_SCALE - value) / abs(value)
    return int(whole), error


def rank_bytes(
    a: CostAssumptions, terms: sp.PlanTerms, pp: int
) -> tuple[list[tuple[int, ...]], list[int]]:
    """(bytes per layer by mode, fixed bytes) of every rank, rounded up."""
    ranks = np.arange(pp)
    per_layer = []
    for mode in range(sp.MODES):
        one = sp.rank_memory(terms, a, ranks, 1, mode).total
        none = sp.rank_memory(terms, a, ranks, 0, mode).total
        per_layer.append(np.ceil(np.asarray(one - none, dtype=float)))
    working = float(np.asarray(terms.memory.working_bytes)[0])
    fixed = np.ceil(np.asarray(sp.rank_memory(terms, a, ranks, 0, 0).total, dtype=float) - working)
    by_rank = [tuple(int(per_layer[m][r]) for m in range(sp.MODES)) for r in range(pp)]
    return by_rank, [int(f) for f in np.broadcast_to(fixed, (pp,))]


def dp_tables(
    job: TrainingJob,
    a: CostAssumptions,
    terms: sp.PlanTerms,
    rank: int,
    counts: np.ndarray | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(per step, per micro-batch, ZeRO-3, optimiser step) units of a rank by its layer count
    (index), or at each of `counts`."""
    if counts is None:
        counts = np.arange(job.model.num_layers + 1, dtype=float)
    # a rank holds at least one layer; index 0 is never chosen but must be a number
    held = np.maximum(counts, 1)
    values = (
        *sp.rank_data_parallel_s(job, sp.data_parallel_sync(job, a), terms, rank, held),
        sp.rank_optimizer_step_s(job, a, terms, rank, held),
    )
    return tuple(  # type: ignore[return-value]
        tuple(units(float(x)) for x in np.broadcast_to(v, counts.shape)) for v in values
    )


def rank_kinds(pp: int) -> set[int]:
    """A rank of each kind: the first (embedding), a middle one, the last (head)."""
    return {0, min(1, pp - 1), pp - 1}


def rank_tables(a: CostAssumptions, terms: sp.PlanTerms, pp: int) -> tuple[RankTables, ...]:
    """Every rank's bytes; its data-parallel tables are left empty (`with_dp_tables` fills
    them: the bounds need none, and most layouts never reach the solver)."""
    layer_bytes, fixed = rank_bytes(a, terms, pp)
    return tuple(RankTables(layer_bytes[r], fixed[r], (), (), (), ()) for r in range(pp))


def with_dp_tables(
    job: TrainingJob, a: CostAssumptions, terms: sp.PlanTerms, tables: PlanTables
) -> PlanTables:
    """`tables` with each rank's data-parallel tables, which depend only on whether the rank
    holds the embedding or head, so three kinds of rank share them."""
    pp = tables.pp
    kinds = {r: dp_tables(job, a, terms, r) for r in rank_kinds(pp)}
    ranks = []
    for r, rank in enumerate(tables.ranks):
        per_rank = kinds[r if r in (0, pp - 1) else 1]
        ranks.append(RankTables(rank.layer_bytes, rank.fixed_bytes, *per_rank))
    return replace(tables, ranks=tuple(ranks))


def with_least_dp(
    job: TrainingJob, a: CostAssumptions, terms: sp.PlanTerms, tables: PlanTables
) -> PlanTables:
    """`tables` with the data-parallel terms' least values (0 before: a weaker bound)."""
    return replace(tables, least_dp_units=least_dp_units(job, a, terms, tables.pp))


def least_dp_units(
    job: TrainingJob, a: CostAssumptions, terms: sp.PlanTerms, pp: int
) -> tuple[int, int, int, int]:
    """Each data-parallel term's (and the optimiser step's) least over plans: the fullest rank holds ceil(L / pp)
    layers at least, and no kind of rank syncs less at that count than the least of them."""
    most = np.asarray([float(-(-job.model.num_layers // pp))])
    kinds = [dp_tables(job, a, terms, r, most) for r in rank_kinds(pp)]
    return tuple(min(kind[i][0] for kind in kinds) for i in range(4))  # type: ignore[return-value]


def plan_tables(
    job: TrainingJob,
    a: CostAssumptions,
    terms: sp.PlanTerms,
    modes: tuple[int, ...],
    memory_limit_bytes: float,
    with_dp: bool = True,
    least_dp: bool = True,
) -> PlanTables:
    """The layout's tables; without `with_dp` the data-parallel tables are left empty,
    without `least_dp` their least values are taken as 0 (a weaker bound, still a bound):
    `with_least_dp` and `with_dp_tables` add them later without rebuilding the rest."""
    pp = int(np.asarray(terms.degrees.pp)[0])
    slots, slots_error = scaled(terms.slots)
    # a hidden transfer still costs overlap_compute_slowdown of itself: the exposure is
    # max(c - (1 - s) o h, s c) (times.exposed_s), so the tables hold (1 - s) o and s
    slowdown = a.overlap_compute_slowdown
    zero3_overlap, z_error = scaled(contended_overlap(a.zero3_overlap_fraction, slowdown))
    dp_hiding, dp_least = sp.step_sync_hiding(job, a, terms)
    dp_overlap, d_error = scaled(dp_hiding)
    dp_floor, f_error = scaled(dp_least)
    slowdown_scaled, s_error = scaled(slowdown)
    tables = PlanTables(
        num_layers=job.model.num_layers,
        pp=pp,
        vpp=int(np.asarray(terms.degrees.vpp)[0]),
        modes=modes,
        layer_units=tuple(units(float(t)) for t in terms.layer_s),
        working_bytes=tuple(math.ceil(float(w)) for w in np.asarray(terms.memory.working_bytes)),
        head_units=units(terms.head_s),
        p2p_units=units(terms.p2p_s),
        slots_scaled=slots,
        zero3_overlap_scaled=zero3_overlap,
        dp_overlap_scaled=dp_overlap,
        dp_floor_scaled=dp_floor,
        slowdown_scaled=slowdown_scaled,
        ranks=rank_tables(a, terms, pp),
        least_dp_units=(0, 0, 0, 0),
        memory_limit_bytes=int(math.floor(memory_limit_bytes)),
        rounding=max(slots_error, z_error, d_error, f_error, s_error),
    )
    if least_dp:
        tables = with_least_dp(job, a, terms, tables)
    return with_dp_tables(job, a, terms, tables) if with_dp else tables
