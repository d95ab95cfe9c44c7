"""The exhaustive oracle of the planner's tests: every combination of the jobs' options,
each checked against the rules and packed onto the cells every way there is, written
without the CP-SAT model so that the two can disagree.

It returns the best objective (the same integers the solver maximises) and, at that
objective, the fewest racks spanned; and, for any one choice of options, the fewest racks
it can span. Exponential: for small instances only (3 jobs, 16 nodes).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import cache

from optimizer.planning.cluster import Cell
from optimizer.planning.options import OptionTable
from optimizer.planning.problem import PlanProblem

NONE_FIT = 10**9


def allowed(problem: PlanProblem, table: OptionTable, j: int) -> list[int]:
    """Job j's options that its rules allow: something if it must run, its own nodes if
    pinned, nothing on an unavailable node."""
    job, options = problem.jobs[j], table.options[j]
    keep = []
    for o, option in enumerate(options):
        if option.on_unavailable or (job.must_run and option.point is None):
            continue
        if job.pinned and not option.stays:
            continue
        keep.append(o)
    return keep


def _spreads(
    cells: tuple[tuple[int, int, int], ...], free: tuple[int, ...], nodes: int, domain: int
) -> Iterator[tuple[int, ...]]:
    """Every way to take `nodes` nodes from cells (rack, size, index) with `free` left: any
    split over racks, or (multi-node NVLink domains) whole free domains plus one remainder."""
    if domain == 1:

        def split(i: int, left: int) -> Iterator[tuple[int, ...]]:
            if i == len(free):
                if left == 0:
                    yield ()
                return
            for take in range(min(left, free[i]) + 1):
                for rest in split(i + 1, left - take):
                    yield (take, *rest)

        yield from split(0, nodes)
        return
    whole, rest = divmod(nodes, domain)
    full = [i for i, (_, size, _) in enumerate(cells) if free[i] == size == domain]
    for chosen in itertools.combinations(full, whole):
        spots = (
            [i for i in range(len(free)) if i not in chosen and free[i] >= rest] if rest else [None]
        )
        for spot in spots:
            takes = [domain if i in chosen else 0 for i in range(len(free))]
            if spot is not None:
                takes[spot] = rest
            yield tuple(takes)


def fewest_racks(
    problem: PlanProblem,
    pool: int,
    cells: tuple[Cell, ...],
    free: tuple[int, ...],
    counts: tuple[int, ...],
) -> int:
    """The fewest racks the jobs of `counts` nodes can span together in `pool`, NONE_FIT if
    they cannot be packed."""
    shape = tuple((c.rack, len(c.node_ids), c.index) for c in cells)
    domain = problem.pools[pool].domain_nodes

    @cache
    def best(k: int, left: tuple[int, ...]) -> int:
        if k == len(counts):
            return 0
        least = NONE_FIT
        for takes in _spreads(shape, left, counts[k], domain):
            racks = len({shape[i][0] for i, n in enumerate(takes) if n})
            after = tuple(f - n for f, n in zip(left, takes, strict=True))
            least = min(least, racks + best(k + 1, after))
        return least

    return best(0, free)


def _stayers(
    problem: PlanProblem,
    table: OptionTable,
    combo: tuple[int, ...],
    pool: int,
    cells: tuple[Cell, ...],
) -> tuple[tuple[int, ...], int] | None:
    """Free nodes per cell once the jobs that stay in `pool` hold their own, and the racks
    they span; None if two of them (or an unavailable node) clash."""
    free = [c.capacity for c in cells]
    racks = 0
    for j, o in enumerate(combo):
        option, running = table.options[j][o], problem.jobs[j].running
        if not option.stays or option.pool != pool or running is None:
            continue
        spanned = set()
        for i, cell in enumerate(cells):
            mine = sum(n in running.nodes and n in cell.available for n in cell.node_ids)
            free[i] -= mine
            if mine:
                spanned.add(cell.rack)
        racks += len(spanned)
    return (tuple(free), racks) if min(free, default=0) >= 0 else None


def exhaustive(
    problem: PlanProblem, table: OptionTable
) -> tuple[int, int | None, tuple[int, ...]] | None:
    """(best value, fewest racks at it or None without node assignment, one best choice);
    None if no combination satisfies the rules."""
    every = problem.cells()
    memo: dict[tuple[int, tuple[int, ...], tuple[int, ...]], int] = {}
    best: tuple[int, int, tuple[int, ...]] | None = None
    lists = [allowed(problem, table, j) for j in range(len(problem.jobs))]
    for combo in itertools.product(*lists):
        racks = _packed_racks(problem, table, combo, every, memo)
        if racks is None:
            continue
        value = sum(table.values[j][o] for j, o in enumerate(combo))
        key = (value, -racks, combo)
        if best is None or key[:2] > (best[0], -best[1]):
            best = (value, racks, combo)
    if best is None:
        return None
    return best[0], best[1] if problem.assign_nodes else None, best[2]


def _packed_racks(
    problem: PlanProblem,
    table: OptionTable,
    combo: tuple[int, ...],
    every: tuple[Cell, ...],
    memo: dict[tuple[int, tuple[int, ...], tuple[int, ...]], int],
) -> int | None:
    """The fewest racks the combination spans, None if it cannot be packed."""
    total = 0
    for p, pool in enumerate(problem.pools):
        moving = tuple(
            sorted(
                table.options[j][o].nodes
                for j, o in enumerate(combo)
                if table.options[j][o].pool == p and not table.options[j][o].stays
            )
        )
        staying = sum(
            table.options[j][o].nodes
            for j, o in enumerate(combo)
            if table.options[j][o].pool == p and table.options[j][o].stays
        )
        if not problem.assign_nodes:
            if sum(moving) + staying > pool.available_nodes:
                return None
            continue
        cells = tuple(c for c in every if c.pool == p)
        held = _stayers(problem, table, combo, p, cells)
        if held is None:
            return None
        key = (p, held[0], moving)
        if key not in memo:
            memo[key] = fewest_racks(problem, p, cells, held[0], moving)
        racks = memo[key]
        if racks >= NONE_FIT:
            return None
        total += racks + held[1]
    return total


def fewest_racks_for(
    problem: PlanProblem, table: OptionTable, choice: tuple[int, ...]
) -> int | None:
    """The fewest racks this choice of options can span, None if it cannot be packed."""
    return _packed_racks(problem, table, choice, problem.cells(), {})
