"""A greedy plan: the solver's first hint, the answer when the solver finds nothing in
time, and the benchmark's baseline.

Pinned jobs keep their nodes and running jobs start where they are; then, repeatedly, the
one change of one job's option that adds the most objective per extra node and fits its
pool is made, until none does (a lazy heap of each job's best change). Nodes are then
packed pool by pool: stayers on their own nodes, the rest largest first, each over the
racks with most free nodes (whole NVLink domains first where domains span nodes).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from optimizer.planning.cluster import Cell
from optimizer.planning.options import OptionTable
from optimizer.planning.problem import PlanProblem


@dataclass(frozen=True)
class Assignment:
    """A plan as the model sees it: each job's option and its node count per cell."""

    choice: tuple[int, ...]
    nodes_in: dict[tuple[int, int], int] = field(default_factory=dict)  # (job, cell) -> nodes


def _start(problem: PlanProblem, table: OptionTable) -> list[int] | None:
    """Pinned and running jobs where they are (when they may be), the rest on nothing."""
    choice = []
    for j, job in enumerate(problem.jobs):
        stays = [
            o for o, opt in enumerate(table.options[j]) if opt.stays and not opt.on_unavailable
        ]
        if job.pinned and not stays:
            return None
        choice.append(stays[0] if stays else 0)
    return choice


def _free_nodes(problem: PlanProblem, table: OptionTable, choice: list[int]) -> list[int]:
    free = [pool.available_nodes for pool in problem.pools]
    for j, o in enumerate(choice):
        option = table.options[j][o]
        if option.pool is not None:
            free[option.pool] -= option.nodes
    return free


def _best_change(
    problem: PlanProblem, table: OptionTable, choice: list[int], free: list[int], j: int
) -> tuple[float, int, int] | None:
    """Job j's change adding the most value per extra node that fits: (-gain rate, j, o)."""
    if problem.jobs[j].pinned:
        return None
    options, values = table.options[j], table.values[j]
    now = options[choice[j]]
    best: tuple[float, int, int] | None = None
    for o, option in enumerate(options):
        gain = values[o] - values[choice[j]]
        if gain <= 0 or option.on_unavailable or option.pool is None:
            continue
        extra = option.nodes - (now.nodes if now.pool == option.pool else 0)
        if extra > free[option.pool]:
            continue
        key = (-gain / max(extra, 1), j, o)
        if best is None or key < best:
            best = key
    return best


def _seat_must_run(
    problem: PlanProblem, table: OptionTable, choice: list[int], free: list[int]
) -> None:
    """Jobs that must run and have nothing yet take their smallest option that fits."""
    for j, job in enumerate(problem.jobs):
        if not job.must_run or choice[j]:
            continue
        fits = [
            (opt.nodes, o, opt.pool)
            for o, opt in enumerate(table.options[j])
            if opt.pool is not None and not opt.on_unavailable and opt.nodes <= free[opt.pool]
        ]
        if fits:
            nodes, choice[j], pool = min(fits)
            free[pool] -= nodes


def greedy_choice(problem: PlanProblem, table: OptionTable) -> list[int] | None:
    choice = _start(problem, table)
    if choice is None:
        return None
    free = _free_nodes(problem, table, choice)
    if min(free, default=0) < 0:
        return None
    _seat_must_run(problem, table, choice, free)
    heap = [m for j in range(len(choice)) if (m := _best_change(problem, table, choice, free, j))]
    heapq.heapify(heap)
    while heap:
        rate, j, o = heapq.heappop(heap)
        current = _best_change(problem, table, choice, free, j)
        if current is None:
            continue
        if current != (rate, j, o):
            heapq.heappush(heap, current)
            continue
        old, new = table.options[j][choice[j]], table.options[j][o]
        if old.pool is not None:
            free[old.pool] += old.nodes
        choice[j] = o
        if new.pool is not None:
            free[new.pool] -= new.nodes
        if old.pool is not None and old.pool != new.pool:
            # nodes were freed: any job's best change may now be another one
            again = (_best_change(problem, table, choice, free, k) for k in range(len(choice)))
            heap = [m for m in again if m]
            heapq.heapify(heap)
        elif (m := _best_change(problem, table, choice, free, j)) is not None:
            heapq.heappush(heap, m)  # the others' entries are checked when they come up
    return choice


def _pack_job(
    cells: list[Cell], free: dict[int, list[int]], nodes: int, domain: int
) -> dict[int, int] | None:
    """Cell index -> nodes for one job of `nodes` nodes over `cells` of one pool: the
    racks with most free nodes first, or whole free domains and one for the remainder."""
    taken: dict[int, int] = {}
    if domain > 1:
        whole, rest = divmod(nodes, domain)
        full = [c for c in cells if len(free[c.index]) == domain]
        if len(full) < whole:
            return None
        taken = {cell.index: domain for cell in full[:whole]}
        fits = [c for c in cells if c.index not in taken and len(free[c.index]) >= rest]
        if rest and not fits:
            return None
        if rest:
            taken[min(fits, key=lambda c: (len(free[c.index]), c.index)).index] = rest
        return taken
    left = nodes
    for cell in sorted(cells, key=lambda c: (-len(free[c.index]), c.index)):
        take = min(left, len(free[cell.index]))
        if take:
            taken[cell.index] = take
            left -= take
    return taken if left == 0 else None


def _stayers_nodes(
    problem: PlanProblem, table: OptionTable, cells: tuple[Cell, ...], choice: list[int]
) -> tuple[dict[int, list[int]], dict[tuple[int, int], int]]:
    """Free nodes per cell once the jobs that stay hold their own, and what they hold."""
    held: dict[int, set[int]] = {}  # cell index -> nodes the stayers hold there
    nodes_in: dict[tuple[int, int], int] = {}
    for j, o in enumerate(choice):
        option, running = table.options[j][o], problem.jobs[j].running
        if not option.stays or running is None:
            continue
        ascending = sorted(running.nodes)
        for cell in cells:
            mine = cell.among(ascending) if cell.pool == option.pool else ()
            if mine:
                held.setdefault(cell.index, set()).update(mine)
                nodes_in[j, cell.index] = len(mine)
    free = {cell.index: list(cell.available) for cell in cells}
    for c, theirs in held.items():
        free[c] = [n for n in free[c] if n not in theirs]
    return free, nodes_in


def pack(
    problem: PlanProblem, table: OptionTable, cells: tuple[Cell, ...], choice: list[int]
) -> Assignment | None:
    """Node counts per cell for these options: stayers on their own nodes, the rest largest
    first over the racks with most free nodes. A job that does not fit is dropped to
    nothing (None if it must run)."""
    choice = list(choice)
    free, nodes_in = _stayers_nodes(problem, table, cells, choice)
    for j in sorted(range(len(choice)), key=lambda j: (-table.options[j][choice[j]].nodes, j)):
        option = table.options[j][choice[j]]
        if option.pool is None or option.stays:
            continue
        pool_cells = [c for c in cells if c.pool == option.pool]
        domain = problem.pools[option.pool].domain_nodes
        taken = _pack_job(pool_cells, free, option.nodes, domain)
        if taken is None and problem.jobs[j].must_run:
            return None
        if taken is None:
            choice[j] = 0
            continue
        for c, count in taken.items():
            nodes_in[j, c] = count
            free[c] = free[c][count:]
    return Assignment(tuple(choice), nodes_in)


def greedy_plan(
    problem: PlanProblem, table: OptionTable, cells: tuple[Cell, ...]
) -> Assignment | None:
    """The greedy plan with its node counts per cell, or None when it breaks a rule."""
    choice = greedy_choice(problem, table)
    if choice is None:
        return None
    if not problem.assign_nodes:
        ok = all(o or not job.must_run for o, job in zip(choice, problem.jobs, strict=True))
        return Assignment(tuple(choice)) if ok else None
    return pack(problem, table, cells, choice)
