"""The cost model's figures as the CP-SAT model's terms: each memory part in whole bytes and
the logarithm of each utilisation factor scaled to integers, with the knobs each depends on
per profile (`TERMS`). Memory and ln(MFU) are then sums of terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from optimizer.costmodel import GridPrices
from optimizer.search.problem import KNOBS

# ln(MFU) in units of 1e-8: ties closer than that are broken by memory, then the degrees.
LN_MFU_SCALE = 10**8


PLACEMENT = "placement"  # a knob of the tables whose values are placement classes


TERM_KINDS = ("memory_bytes", "ln_mfu")


# Largest magnitude of a term in the model's units (bytes; ln(MFU) x LN_MFU_SCALE): sums of a
# few stay far inside int64. An ln(MFU) term beyond it (or NaN, inf) is no usable price. A
# memory part beyond it is held at it: 2^52 bytes (4.5 PB) is above every memory limit a
# request may set (1e15 bytes), so such a layout fits nowhere, as it should.
MAX_TERM = 2.0**52


@dataclass(frozen=True)
class Term:
    name: str
    axes: tuple[str, ...]  # knobs the term depends on besides the degree tuple
    kind: Literal["memory_bytes", "ln_mfu"]
    value: Callable[[GridPrices], np.ndarray]


def _ln_pipeline_factor(prices: GridPrices) -> np.ndarray:
    return np.log1p(-prices.bubble)


def _ln_other_factors(prices: GridPrices) -> np.ndarray:
    """Kernel efficiency, tensor- and data-parallel communication and recompute together."""
    return np.log(prices.mfu) - np.log1p(-prices.bubble)


def _memory_terms(states_axes: tuple[str, ...], activation_axes: tuple[str, ...]) -> list[Term]:
    return [
        Term("weights_bytes", states_axes, "memory_bytes", lambda p: p.weights_bytes),
        Term("gradients_bytes", states_axes, "memory_bytes", lambda p: p.gradients_bytes),
        Term("optimizer_bytes", states_axes, "memory_bytes", lambda p: p.optimizer_bytes),
        Term("activations_bytes", activation_axes, "memory_bytes", lambda p: p.activations_bytes),
        Term("runtime_bytes", activation_axes, "memory_bytes", lambda p: p.runtime_bytes),
    ]


def _mfu_terms(pipeline_axes: tuple[str, ...], other_axes: tuple[str, ...]) -> list[Term]:
    return [
        Term("ln_pipeline_factor", pipeline_axes, "ln_mfu", _ln_pipeline_factor),
        Term("ln_other_factors", other_axes, "ln_mfu", _ln_other_factors),
    ]


ALL_AXES = (*KNOBS, PLACEMENT)


# What each term depends on, per profile. A profile missing here gets every term over every
# knob: correct, only slower.
TERMS: dict[str, tuple[Term, ...]] = {
    "workshop": (
        *_memory_terms(("zero",), ("micro_batch", "recompute")),
        *_mfu_terms(("vpp", "micro_batch"), ("vpp", "micro_batch", "recompute", PLACEMENT)),
    ),
}


def profile_terms(profile: str) -> tuple[Term, ...]:
    if profile in TERMS:
        return TERMS[profile]
    return (*_memory_terms(ALL_AXES, ALL_AXES), *_mfu_terms(ALL_AXES, ALL_AXES))


def term_totals(table: Table, terms: tuple[Term, ...]) -> dict[str, np.ndarray]:
    """Per row, the sum of the table's memory terms and of its ln(MFU) terms."""
    totals = {kind: np.zeros(len(table.degree_index), dtype=np.int64) for kind in TERM_KINDS}
    for term in terms:
        if term.name in table.values:
            totals[term.kind] += table.values[term.name]
    return totals


# CP-SAT refuses a linear sum whose coefficients could add past int64; the model's memory is
# a sum over every row of every table.
MEMORY_SUM_LIMIT = 2.0**60


def in_memory_units(
    tables: tuple[Table, ...], terms: tuple[Term, ...]
) -> tuple[tuple[Table, ...], int]:
    """The tables with memory in the coarsest power-of-two unit the sum needs (usually 1)."""
    memory = [t.name for t in terms if t.kind == "memory_bytes"]
    total = sum(
        float(np.abs(tb.values[n]).sum()) for tb in tables for n in memory if n in tb.values
    )
    if total < MEMORY_SUM_LIMIT:
        return tables, 1
    unit = 2 ** math.ceil(math.log2(total / MEMORY_SUM_LIMIT))
    scaled = tuple(
        replace(tb, values={n: -(-v // unit) if n in memory else v for n, v in tb.values.items()})
        for tb in tables
    )
    return scaled, unit


@dataclass(frozen=True)
class Table:
    """Rows of (degree tuple, value index of each axis) and each term's integer per row."""

    axes: tuple[str, ...]
    degree_index: np.ndarray  # (R,)
    axis_index: dict[str, np.ndarray]  # axis -> (R,) index into its values (class for placement)
    values: dict[str, np.ndarray]  # term name -> (R,) int64
    # engine rule -> (R,) bool, the rows that break it: on a table whose rows are whole layouts
    breaks: dict[str, np.ndarray] = field(default_factory=dict)

    def take(self, rows: np.ndarray) -> Table:
        """The table's `rows` (indices or a mask), every column alike."""
        return Table(
            self.axes,
            self.degree_index[rows],
            {axis: column[rows] for axis, column in self.axis_index.items()},
            {name: column[rows] for name, column in self.values.items()},
            {name: column[rows] for name, column in self.breaks.items()},
        )
