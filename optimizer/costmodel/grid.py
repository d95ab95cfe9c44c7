"""Many layouts at once: equally shaped integer arrays that a profile prices in one call.

The exhaustive enumerator and the CP-SAT model's tables both price through this, with the
same formulas that `evaluate` uses for one layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, partial
from itertools import permutations
from typing import Any

import numpy as np

from models.layout import DIMENSIONS, Dimension, Layout, Recompute, Schedule, group_span

RECOMPUTE_CODES: tuple[Recompute, ...] = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
SCHEDULE_CODES: tuple[Schedule, ...] = (
    Schedule.ONE_F_ONE_B,
    Schedule.ZERO_BUBBLE,
    Schedule.DUALPIPE,
)
# The columns of a search's degree rows, in order.
DEGREE_COLUMNS: tuple[Dimension, ...] = ("tp", "pp", "cp", "dp")
# Every order of the four dimensions, innermost first; a grid names one by its index.
PLACEMENTS: tuple[tuple[Dimension, ...], ...] = tuple(permutations(DIMENSIONS))


def recompute_code(recompute: Recompute) -> int:
    return RECOMPUTE_CODES.index(recompute)


def placement_code(placement: tuple[Dimension, ...]) -> int:
    return PLACEMENTS.index(tuple(placement))


def schedule_code(schedule: Schedule) -> int:
    return SCHEDULE_CODES.index(schedule)


@dataclass(frozen=True)
class LayoutGrid:
    """Resolved layouts (dp set) as int64 arrays of one shape."""

    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    dp: np.ndarray
    vpp: np.ndarray
    micro_batch: np.ndarray
    zero: np.ndarray
    recompute: np.ndarray  # index into RECOMPUTE_CODES
    placement: np.ndarray  # index into PLACEMENTS
    # Optional so that grids built before these knobs existed keep working: 1f1b and ep = 1.
    schedule: np.ndarray | None = None  # index into SCHEDULE_CODES
    ep: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.schedule is None:
            object.__setattr__(self, "schedule", np.zeros_like(self.tp))
        if self.ep is None:
            object.__setattr__(self, "ep", np.ones_like(self.tp))

    def __len__(self) -> int:
        return int(self.tp.size)

    def degree(self, dim: Dimension) -> np.ndarray:
        return {"tp": self.tp, "pp": self.pp, "cp": self.cp, "dp": self.dp}[dim]

    def span(self, dim: Dimension) -> np.ndarray:
        """GPUs spanned by one `dim` group, row by row under each row's placement."""
        span = np.ones_like(self.tp)
        for code, rows in self._rows_by_placement.items():
            span[rows] = group_span(PLACEMENTS[code], dim, partial(self.degree_at, rows=rows))
        return span

    def degree_at(self, dim: Dimension, rows: np.ndarray) -> np.ndarray:
        return self.degree(dim)[rows]

    @cached_property
    def _rows_by_placement(self) -> dict[int, np.ndarray]:
        """Row indices per placement code present, found once per grid: every span of a
        priced grid reuses them (millions of rows for MoE searches)."""
        if self.placement.size == 0:
            return {}
        order = np.argsort(self.placement, kind="stable")
        codes, starts = np.unique(self.placement[order], return_index=True)
        return dict(zip(codes.tolist(), np.split(order, starts[1:]), strict=True))

    def is_recompute(self, recompute: Recompute) -> np.ndarray:
        return self.recompute == recompute_code(recompute)

    def layout(self, index: int) -> Layout:
        return Layout(
            tp=int(self.tp[index]),
            pp=int(self.pp[index]),
            cp=int(self.cp[index]),
            dp=int(self.dp[index]),
            vpp=int(self.vpp[index]),
            micro_batch=int(self.micro_batch[index]),
            zero=int(self.zero[index]),
            recompute=RECOMPUTE_CODES[int(self.recompute[index])],
            placement=PLACEMENTS[int(self.placement[index])],
            schedule=SCHEDULE_CODES[int(self.schedule_codes[index])],
            ep=int(self.expert_parallel[index]),
        )

    @property
    def schedule_codes(self) -> np.ndarray:
        assert self.schedule is not None  # set in __post_init__
        return self.schedule

    @property
    def expert_parallel(self) -> np.ndarray:
        assert self.ep is not None  # set in __post_init__
        return self.ep

    def take(self, index: Any) -> LayoutGrid:
        """The sub-grid at a boolean mask or index array."""
        return LayoutGrid(**{name: getattr(self, name)[index] for name in _FIELDS})

    @classmethod
    def placed(cls, degrees: np.ndarray, placement: np.ndarray) -> LayoutGrid:
        """Degree rows (N, 4) of (tp, pp, cp, dp) under placement codes (N,), every other
        knob at its plainest (vpp 1, micro-batch 1, ZeRO 0, no recompute): for what depends
        only on where the groups land (their spans)."""
        ones = np.ones(len(degrees), dtype=np.int64)
        return cls(
            **{dim: degrees[:, i] for i, dim in enumerate(DEGREE_COLUMNS)},
            vpp=ones,
            micro_batch=ones,
            zero=0 * ones,
            recompute=0 * ones,
            placement=placement,
        )

    @classmethod
    def from_layouts(cls, layouts: list[Layout]) -> LayoutGrid:
        def column(values: list[int]) -> np.ndarray:
            return np.asarray(values, dtype=np.int64)

        return cls(
            tp=column([x.tp for x in layouts]),
            pp=column([x.pp for x in layouts]),
            cp=column([x.cp for x in layouts]),
            dp=column([x.data_parallel_size for x in layouts]),
            vpp=column([x.vpp for x in layouts]),
            micro_batch=column([x.micro_batch for x in layouts]),
            zero=column([x.zero for x in layouts]),
            recompute=column([recompute_code(x.recompute) for x in layouts]),
            placement=column([placement_code(x.placement) for x in layouts]),
            schedule=column([schedule_code(x.schedule) for x in layouts]),
            ep=column([x.ep for x in layouts]),
        )


_FIELDS = (
    "tp",
    "pp",
    "cp",
    "dp",
    "vpp",
    "micro_batch",
    "zero",
    "recompute",
    "placement",
    "schedule",
    "ep",
)


@dataclass(frozen=True)
class GridPrices:
    """Per-layout figures of a grid, as float arrays: memory by part (bytes) and MFU."""

    weights_bytes: np.ndarray
    gradients_bytes: np.ndarray
    optimizer_bytes: np.ndarray
    activations_bytes: np.ndarray
    # the allocator's fragmentation and the runtime's memory outside it (CUDA context, NCCL)
    runtime_bytes: np.ndarray
    bubble: np.ndarray
    mfu: np.ndarray

    @property
    def memory_bytes(self) -> np.ndarray:
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.runtime_bytes
        )


# The knobs of a LayoutBox, one axis each in this order between the tuple and the placement.
BOX_KNOBS = ("vpp", "micro_batch", "zero", "recompute", "schedule", "ep")


@dataclass(frozen=True)
class LayoutBox:
    """Every combination of some degree tuples, knob values and placements, as arrays that
    broadcast against each other instead of one row per layout: axis 0 the tuple, then one
    axis per knob (BOX_KNOBS), the last the tuple's placements. A formula that reads only
    tp and micro_batch is then computed once per (tuple, micro-batch), not once per layout:
    the cost model's own functions, unchanged, factor the pricing by what each depends on.
    Combinations that are not layouts (vpp 8 under DualPipe, padding past a tuple's last
    placement) are priced too and left for the caller to ignore."""

    degrees: np.ndarray  # (T, 4) int64 rows of (tp, pp, cp, dp)
    knobs: dict[str, tuple[int, ...]]  # every BOX_KNOBS name -> its values (codes)
    placements: np.ndarray  # (T, J) placement codes per tuple; any valid code as padding

    @property
    def shape(self) -> tuple[int, ...]:
        knob_sizes = tuple(len(self.knobs[knob]) for knob in BOX_KNOBS)
        return (len(self.degrees), *knob_sizes, self.placements.shape[1])

    def _along(self, values: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """`values` laid on `axes` of the box, size 1 on the others."""
        shape = [1] * len(self.shape)
        for axis in axes:
            shape[axis] = self.shape[axis]
        return np.asarray(values, dtype=np.int64).reshape(shape)

    def degree(self, dim: Dimension) -> np.ndarray:
        return self._along(self.degrees[:, DEGREE_COLUMNS.index(dim)], (0,))

    def knob(self, name: str) -> np.ndarray:
        return self._along(np.asarray(self.knobs[name]), (1 + BOX_KNOBS.index(name),))

    def grid(self) -> LayoutGrid:
        """The box as a LayoutGrid whose columns broadcast against each other: for tests
        written row by row over its columns alone (an engine's rules), each then computed
        over only the axes it reads. Not for what reads spans: those index rows."""
        columns = {knob: self.knob(knob) for knob in BOX_KNOBS}
        placement = self._along(self.placements, (0, len(self.shape) - 1))
        return LayoutGrid(
            **{dim: self.degree(dim) for dim in DEGREE_COLUMNS}, placement=placement, **columns
        )

    def span(self, dim: Dimension) -> np.ndarray:
        """GPUs one `dim` group spans, per tuple and placement."""
        tuples, per_tuple = self.placements.shape
        degrees = np.repeat(self.degrees, per_tuple, axis=0)
        flat = LayoutGrid.placed(degrees, self.placements.ravel())
        return self._along(flat.span(dim).reshape(tuples, per_tuple), (0, len(self.shape) - 1))
