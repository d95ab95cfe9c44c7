"""Rows no memory cap and no rule can make the answer, dropped before the solver sees them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from optimizer.search.problem import KNOBS, SearchProblem
from optimizer.search.terms import Table, Term, term_totals


def _ruled_knobs(problem: SearchProblem) -> list[str]:
    """Knobs some rule of the problem restricts (which a relaxation may then free)."""
    ruled = [k for k, allowed in problem.allowed.items() if set(problem.knobs[k]) - set(allowed)]
    return ruled + [knob for knob in problem.fixed if knob in KNOBS]


def group_keys(problem: SearchProblem, table: Table) -> list[np.ndarray]:
    """Per row, what a row must share with another to compete with it: the degree tuple,
    the value of every ruled knob and (engine rules count as ruled) which rules it breaks."""
    keys = [table.degree_index] + [table.axis_index[k] for k in _ruled_knobs(problem)]
    if table.breaks:  # rows breaking different engine rules are not interchangeable
        keys.append(_break_pattern(table))
    return keys


def without_dominated(
    problem: SearchProblem,
    table: Table,
    terms: tuple[Term, ...],
    finer_keys: Sequence[np.ndarray] = (),
) -> Table:
    """Drop each layout another beats on both memory and MFU (or equals on both and precedes
    in the tie-break order) with the same degrees and the same values of every ruled knob:
    no cap on memory and no rule can then make it the answer, so the solver never needs it.
    Engine rules count as ruled knobs: only rows that break the same engine rules compete.
    `finer_keys` split the groups further (rows kept apart for narrower searches to come).

    A row survives if it needs less memory than every row before it in its group, best MFU
    first: a running minimum per group, computed for all groups at once on memory ranks
    offset so that no group's minimum reaches into the next one."""
    totals = term_totals(table, terms)
    memory, ln_mfu = totals["memory_bytes"], totals["ln_mfu"]
    keys = group_keys(problem, table) + list(finer_keys)
    if not len(memory):
        return table
    # each list of keys as one integer (mixed radix, first key most significant): one
    # sort key instead of a dozen, the same order
    group = _one_key(keys)
    rank = _one_key([table.axis_index[axis] for axis in table.axes])
    order = np.lexsort((rank, memory, -ln_mfu, group))
    group = group[order]
    starts = np.r_[True, group[1:] != group[:-1]]
    group_id = np.cumsum(starts) - 1
    # equal memory, equal rank: a row does not survive one of equal memory before it
    memory_rank = np.unique(memory[order], return_inverse=True)[1].astype(np.int64)
    # later groups sit below earlier ones, so the running minimum restarts at each group
    keyed = (int(group_id[-1]) - group_id) * len(order) + memory_rank
    least_before = np.r_[np.iinfo(np.int64).max, np.minimum.accumulate(keyed)[:-1]]
    least_before[starts] = np.iinfo(np.int64).max
    keep = keyed < least_before
    return table.take(np.sort(order[keep]))


def _one_key(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Non-negative integer columns as one int64 that sorts as they do, first column most
    significant; columns too wide together for 63 bits are first replaced by their ranks."""
    if not columns:
        return np.zeros(0, dtype=np.int64)
    sizes = [int(column.max()) + 1 for column in columns]
    if sum(np.log2(sizes)) >= 62:
        columns = [np.unique(column, return_inverse=True)[1].reshape(-1) for column in columns]
        sizes = [int(column.max()) + 1 for column in columns]
    return np.ravel_multi_index(tuple(np.asarray(c, dtype=np.int64) for c in columns), sizes)


def _break_pattern(table: Table) -> np.ndarray:
    """Per row, which engine rules it breaks, as one integer (bit i: the i-th rule)."""
    pattern = np.zeros(len(table.degree_index), dtype=np.int64)
    for bit, broken in enumerate(table.breaks.values()):
        pattern |= broken.astype(np.int64) << bit
    return pattern
