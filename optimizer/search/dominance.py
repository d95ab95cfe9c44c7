"""Rows no memory cap and no rule can make the answer, dropped before the solver sees them."""

from __future__ import annotations

import numpy as np

from optimizer.search.problem import KNOBS, SearchProblem
from optimizer.search.terms import Table, Term, term_totals


def _ruled_knobs(problem: SearchProblem) -> list[str]:
    """Knobs some rule of the problem restricts (which a relaxation may then free)."""
    ruled = [k for k, allowed in problem.allowed.items() if set(problem.knobs[k]) - set(allowed)]
    return ruled + [knob for knob in problem.fixed if knob in KNOBS]


def without_dominated(problem: SearchProblem, table: Table, terms: tuple[Term, ...]) -> Table:
    """Drop each layout another beats on both memory and MFU (or equals on both and precedes
    in the tie-break order) with the same degrees and the same values of every ruled knob:
    no cap on memory and no rule can then make it the answer, so the solver never needs it.
    Engine rules count as ruled knobs: only rows that break the same engine rules compete."""
    totals = term_totals(table, terms)
    memory, ln_mfu = totals["memory_bytes"], totals["ln_mfu"]
    group_keys = [table.degree_index] + [table.axis_index[k] for k in _ruled_knobs(problem)]
    if table.breaks:  # rows breaking different engine rules are not interchangeable
        group_keys.append(_break_pattern(table))
    rank_keys = [table.axis_index[axis] for axis in reversed(table.axes)]
    order = np.lexsort((*rank_keys, memory, -ln_mfu, *reversed(group_keys)))
    group = np.stack(group_keys, axis=1)[order]
    starts = np.flatnonzero(np.r_[True, np.any(group[1:] != group[:-1], axis=1)])
    ends = np.r_[starts[1:], len(order)]
    keep = np.zeros(len(order), dtype=bool)
    for start, end in zip(starts, ends, strict=True):
        # best MFU first within the group: a row survives if it needs less memory than all
        # the rows before it
        segment = memory[order[start:end]]
        least_before = np.minimum.accumulate(np.r_[np.iinfo(np.int64).max, segment[:-1]])
        keep[start:end] = segment < least_before
    return table.take(np.sort(order[keep]))


def _break_pattern(table: Table) -> np.ndarray:
    """Per row, which engine rules it breaks, as one integer (bit i: the i-th rule)."""
    pattern = np.zeros(len(table.degree_index), dtype=np.int64)
    for bit, broken in enumerate(table.breaks.values()):
        pattern |= broken.astype(np.int64) << bit
    return pattern
