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

from dataclasses import dataclass

import numpy as np

from models.hardware import fits_one_domain
from models.layout import Dimension
from optimizer.costmodel import Estimate
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
    problem: PlanProblem, table: OptionTable, cells: tuple[Cell, ...], plan: Assignment
) -> tuple[tuple[int, ...], ...]:
    """Each job's node ids (empty without node assignment, or for nothing)."""
    named: list[list[int]] = [[] for _ in problem.jobs]
    for cell in cells:
        free = list(cell.available)
        holders = [j for j in range(len(problem.jobs)) if plan.nodes_in.get((j, cell.index), 0)]
        staying = [j for j in holders if table.options[j][plan.choice[j]].stays]
        for j in staying:
            mine = [n for n in free if n in _held(problem.jobs[j], problem.pools[cell.pool])]
            named[j] += mine
            free = [n for n in free if n not in mine]
        for j in holders:
            if j in staying:
                continue
            want = plan.nodes_in[j, cell.index]
            held = _held(problem.jobs[j], problem.pools[cell.pool])
            own = [n for n in free if n in held][:want]
            rest = [n for n in free if n not in own][: want - len(own)]
            named[j] += own + rest
            free = [n for n in free if n not in own and n not in rest]
    return tuple(tuple(sorted(ids)) for ids in named)


def _held(job: PlanJob, pool: Pool) -> frozenset[int]:
    running = job.running
    return (
        frozenset(running.nodes)
        if running is not None and running.pool == pool.name
        else frozenset()
    )


def traffic_gb_per_step(job: PlanJob, estimate: Estimate) -> dict[str, float]:
    """Bytes each GPU sends per step over pipeline and data parallelism, in GB: the payloads
    the cost model prices (standard/times.py: `pp_p2p_s`, one activation send forward and
    one gradient send back per chunk and micro-batch, sharded over tp; `ring_pass_bytes`,
    a ring all-reduce of the bf16 gradients, 2(g-1)/g of them, over the data group)."""
    lay, model, training = estimate.layout, job.request.model, job.request.training
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
    problem: PlanProblem, j: int, pool: Pool, nodes: int, estimate: Estimate
) -> tuple[Estimate, str]:
    """The estimate with pp and dp swapped when that puts the lighter one outermost and the
    cost model prices it no slower; and the reason for the order kept, in words."""
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
    request = job.request
    layout = estimate.layout.model_copy(update={"placement": swapped})
    repriced = evaluate_on(
        request.on(pool, nodes), layout, request.profile, request.assumptions, request.engine
    )
    if repriced.tokens_per_s_per_gpu < estimate.tokens_per_s_per_gpu * (1 - 1e-9):
        return (
            estimate,
            f"{outer} outermost: {said}, but the cost model prices {inner} outermost slower",
        )
    return repriced, f"{inner} outermost, on the rack uplinks: {said}"


def lay_out(
    problem: PlanProblem, j: int, pool: Pool, nodes: tuple[int, ...], estimate: Estimate
) -> tuple[Estimate, Placement]:
    """The job's estimate (its placement possibly reordered, re-priced) and placement."""
    estimate, note = _reordered(problem, j, pool, len(nodes), estimate)
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
