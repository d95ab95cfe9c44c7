"""From counts per cell to node ids, and a job's layout laid on its nodes.

Node ids: in each cell a job that stays keeps its own nodes; then, job by job in order, a
job that moved takes back its old nodes there first, then the lowest free ids. The same
counts give the same ids, always.

Ranks: rank r sits on the job's (r // gpus_per_node)-th node, nodes in rack order. The
layout's placement orders the dimensions innermost first, so tensor-parallel groups stay
inside an NVLink domain and only the outermost dimensions' groups reach other racks. Of
pipeline and data parallelism, whichever sends fewer bytes per step is put outermost, on
the slowest links (the rack uplinks), when the cost model prices that order no slower: the
rack tier is not in the cost model, so the order is chosen by traffic and checked by price.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from models.hardware import fits_one_domain
from models.layout import Dimension
from optimizer.costmodel import Estimate
from optimizer.cpsat import CutShort, StopSignal, time_is_up
from optimizer.planning.cluster import Cell, Pool
from optimizer.planning.greedy import Assignment
from optimizer.planning.jobs import PlanJob
from optimizer.planning.options import OptionTable
from optimizer.planning.problem import PlanProblem
from optimizer.searches import evaluate_on

BF16_BYTES = 2


@dataclass(frozen=True)
class Placement:
    """How a job's layout sits on its nodes and racks."""

    rank_order: tuple[Dimension, ...]  # innermost first
    racks: tuple[tuple[int, tuple[int, ...]], ...]  # (rack, node ids) in rank order
    min_racks: int  # the fewest racks its node count could span
    crossing: tuple[Dimension, ...]  # dimensions with a group spanning racks
    inside_nvlink: tuple[Dimension, ...]  # dimensions whose groups sit inside an NVLink domain
    traffic_gb_per_step: dict[str, float]  # bytes each GPU sends per step, by dimension
    note: str


def name_nodes(
    problem: PlanProblem,
    table: OptionTable,
    cells: tuple[Cell, ...],
    plan: Assignment,
    stop: StopSignal | None = None,
) -> tuple[tuple[int, ...], ...]:
    """Each job's node ids (empty without node assignment, or for nothing). Linear in the
    nodes named plus the nodes jobs run on (a pool may have 100,000); CutShort once `stop`
    is set (checked cell by cell)."""
    named: list[list[int]] = [[] for _ in problem.jobs]
    holders_in: dict[int, list[int]] = {}
    for (j, c), count in sorted(plan.nodes_in.items()):
        if count:
            holders_in.setdefault(c, []).append(j)
    held = [_held_sorted(job) for job in problem.jobs]
    for cell in cells:
        if time_is_up(None, stop):
            raise CutShort()
        holders = holders_in.get(cell.index, [])
        if not holders:
            continue
        pool = problem.pools[cell.pool]
        free = _FreeNodes(cell.available)
        staying = [j for j in holders if table.options[j][plan.choice[j]].stays]
        for j in staying:
            named[j] += free.take(_held_in(problem.jobs[j], pool, held[j], cell))
        for j in holders:
            if j in staying:
                continue
            want = plan.nodes_in[j, cell.index]
            own = free.take(_held_in(problem.jobs[j], pool, held[j], cell), want)
            named[j] += own + free.lowest(want - len(own))
    return tuple(tuple(sorted(ids)) for ids in named)


class _FreeNodes:
    """A cell's free nodes: taken by id, or lowest first (a cursor over the ascending ids,
    every id behind it taken), so that naming a cell costs its size, not its size squared."""

    def __init__(self, available: tuple[int, ...]) -> None:
        self._ids, self._next, self._taken = available, 0, set[int]()

    def take(self, ids: Iterable[int], most: int | None = None) -> list[int]:
        """Of `ids` (ascending), the free ones, at most `most`, now taken."""
        got = [n for n in ids if n not in self._taken]
        got = got if most is None else got[:most]
        self._taken.update(got)
        return got

    def lowest(self, count: int) -> list[int]:
        """The `count` lowest free ids (fewer if the cell runs out), now taken."""
        got: list[int] = []
        while len(got) < count and self._next < len(self._ids):
            node = self._ids[self._next]
            self._next += 1
            if node not in self._taken:
                got.append(node)
        self._taken.update(got)
        return got


def _held_sorted(job: PlanJob) -> list[int]:
    return [] if job.running is None else sorted(job.running.nodes)


def _held_in(job: PlanJob, pool: Pool, held: list[int], cell: Cell) -> list[int]:
    """The job's running nodes in this cell that are available, ascending."""
    if job.running is None or job.running.pool != pool.name:
        return []
    return [n for n in cell.among(held) if n not in pool.unavailable]


def traffic_gb_per_step(job: PlanJob, estimate: Estimate) -> dict[str, float]:
    """Bytes each GPU sends per step over pipeline and data parallelism, in GB: the payloads
    the cost model prices (standard/times.py: `pp_p2p_s`, one activation send forward and
    one gradient send back per chunk and micro-batch, sharded over tp; `ring_pass_bytes`,
    a ring all-reduce of the bf16 gradients, 2(g-1)/g of them, over the data group)."""
    if job.request is None:
        raise ValueError(f"job {job.name!r} brings its own throughput: it has no layout")
    lay, model, training = estimate.layout, job.request.job.model, job.request.job.training
    tokens = lay.micro_batch * training.seq_len / lay.cp
    pp_bytes = 0.0
    if lay.pp > 1:
        sends = 2 * lay.vpp * estimate.micro_batches
        pp_bytes = sends * tokens * model.hidden_size * BF16_BYTES / lay.tp
    group = lay.data_parallel_size * lay.cp
    params = model.total_params / (lay.tp * lay.pp)
    dp_bytes = 2 * (group - 1) / group * BF16_BYTES * params
    return {"pp": round(pp_bytes / 1e9, 3), "dp": round(dp_bytes / 1e9, 3)}


def _crossing(
    estimate: Estimate, order: tuple[Dimension, ...], racks: np.ndarray
) -> tuple[Dimension, ...]:
    """Dimensions (innermost first) of which some group spans more than one rack."""
    lay = estimate.layout
    shape = tuple(lay.degree(d) for d in reversed(order))  # C order: innermost axis last
    by_rank = racks.reshape(shape)
    found = []
    for axis, dim in enumerate(reversed(order)):
        if by_rank.max(axis=axis).tolist() != by_rank.min(axis=axis).tolist():
            found.append(dim)
    return tuple(d for d in order if d in found)


def _outer_swapped(order: tuple[Dimension, ...]) -> tuple[Dimension, ...] | None:
    """The order with pp and dp exchanged, when they are the two outermost."""
    if set(order[2:]) != {"pp", "dp"}:
        return None
    return (*order[:2], order[3], order[2])


def _reordered(
    problem: PlanProblem, j: int, pool: Pool, nodes: int, estimate: Estimate, reorder: bool
) -> tuple[Estimate, str]:
    """The estimate with pp and dp swapped when that puts the lighter one outermost and the
    cost model prices it no slower (when `reorder`: re-pricing is skipped once the plan's
    time is up); and the reason for the order kept, in words."""
    job = problem.jobs[j]
    traffic = traffic_gb_per_step(job, estimate)
    order = tuple(estimate.layout.placement)
    swapped = _outer_swapped(order)
    if swapped is None:
        return estimate, f"{order[-1]} outermost (the search's order)"
    outer, inner = order[3], order[2]
    if 1 in (estimate.layout.degree(outer), estimate.layout.degree(inner)):
        return (
            estimate,
            f"{outer} outermost (pp {estimate.layout.pp}, dp {estimate.layout.data_parallel_size})",
        )
    said = f"{inner} sends {traffic[inner]:g} GB per GPU per step, {outer} {traffic[outer]:g} GB"
    if traffic[inner] >= traffic[outer]:
        return estimate, f"{outer} outermost, on the rack uplinks: {said}"
    if not reorder:
        return (
            estimate,
            f"{outer} outermost (the search's order: no time was left to price {inner} outermost): {said}",
        )
    layout = estimate.layout.model_copy(update={"placement": swapped})
    repriced = evaluate_on(replace(job.on_pool(pool, nodes), layout=layout))
    if repriced.tokens_per_s_per_gpu < estimate.tokens_per_s_per_gpu * (1 - 1e-9):
        return (
            estimate,
            f"{outer} outermost: {said}, but the cost model prices {inner} outermost slower",
        )
    return repriced, f"{inner} outermost, on the rack uplinks: {said}"


def lay_out(
    problem: PlanProblem,
    j: int,
    pool: Pool,
    nodes: tuple[int, ...],
    estimate: Estimate,
    reorder: bool = True,
) -> tuple[Estimate, Placement]:
    """The job's estimate (its placement possibly reordered, re-priced) and placement."""
    estimate, note = _reordered(problem, j, pool, len(nodes), estimate, reorder)
    order = tuple(estimate.layout.placement)
    by_rack: dict[int, list[int]] = {}
    for n in nodes:
        by_rack.setdefault(pool.rack_of(n), []).append(n)
    crossing: tuple[Dimension, ...] = ()
    if len(by_rack) > 1:
        racks = np.repeat(np.array([pool.rack_of(n) for n in nodes]), pool.gpus_per_node)
        crossing = _crossing(estimate, order, racks)
    else:
        note = "within one rack"
    domain = min(pool.domain_gpus, len(nodes) * pool.gpus_per_node)
    inside = tuple(
        d
        for d in order
        if d in estimate.layout.placement and fits_one_domain(estimate.layout.group_span(d), domain)
    )
    placement = Placement(
        order,
        tuple((r, tuple(ids)) for r, ids in sorted(by_rack.items())),
        -(-len(nodes) // pool.rack_nodes),
        crossing,
        inside,
        traffic_gb_per_step(problem.jobs[j], estimate),
        note,
    )
    return estimate, placement
