"""The CP-SAT model's data: the cost model's terms tabulated per degree tuple and knob values.

Each term (a memory part in bytes, or the logarithm of a utilisation factor) depends on the
degree tuple and a few knobs, declared per profile as data (`TERMS`). A term's table prices
exactly those combinations through `profile.price_grid`, so the solver's numbers come from
the one cost model. Terms with the same knobs share one table (one row literal per row).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from typing import Literal

import numpy as np

from models.layout import DIMENSIONS, Dimension
from optimizer.assumptions import CostAssumptions
from optimizer.cost_model import profile_named
from optimizer.grid import GridPrices, LayoutGrid
from optimizer.space import KNOBS, SearchProblem, degree_columns, valid_knob_mask

# ln(MFU) in units of 1e-8: ties closer than that are broken by memory, then the degrees.
LN_MFU_SCALE = 10**8
PLACEMENT = "placement"  # a knob of the tables whose values are placement classes


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


# The dimensions whose groups a profile prices differently inside and across a node;
# placements alike on these price alike. Missing profile: all four (correct, slower).
PLACEMENT_PRICED_DIMS: dict[str, tuple[Dimension, ...]] = {"workshop": ("tp",)}


def profile_terms(profile: str) -> tuple[Term, ...]:
    if profile in TERMS:
        return TERMS[profile]
    return (*_memory_terms(ALL_AXES, ALL_AXES), *_mfu_terms(ALL_AXES, ALL_AXES))


@dataclass(frozen=True)
class PlacementClasses:
    """Per degree tuple, the placements told apart by which priced groups fit in a node.

    Placements whose priced groups fit (or do not fit) a node alike price alike; each class
    is represented by its first placement, so ties go to the plate's order.
    """

    representative: list[list[int]]  # [tuple k][class j] -> placement code

    @property
    def count(self) -> int:
        return max(len(classes) for classes in self.representative)


def placement_classes(problem: SearchProblem) -> PlacementClasses:
    codes = np.asarray(problem.placements, dtype=np.int64)
    k, p = np.meshgrid(np.arange(len(problem.degrees)), codes, indexing="ij")
    degrees = problem.degrees[k.ravel()]
    ones = np.ones(k.size, dtype=np.int64)
    grid = LayoutGrid(
        **degree_columns(degrees),
        vpp=ones,
        micro_batch=ones,
        zero=0 * ones,
        recompute=0 * ones,
        placement=p.ravel(),
    )
    cluster = problem.job.cluster
    # workshop prices links by node; other profiles by NVLink domain (which may span nodes)
    node = cluster.gpus_per_node if problem.profile == "workshop" else cluster.nvlink_domain_size
    dims = PLACEMENT_PRICED_DIMS.get(problem.profile, DIMENSIONS)
    # expert groups' links depend on more than these fits: keep MoE placements apart
    apart = problem.job.model.is_moe and problem.profile not in PLACEMENT_PRICED_DIMS
    fits = np.stack([grid.span(dim) <= node for dim in dims], axis=1).reshape(*k.shape, len(dims))
    representative = []
    for row in range(len(problem.degrees)):
        seen: dict[bytes, int] = {}
        for col, code in enumerate(codes):
            key = fits[row, col].tobytes() + (bytes([col]) if apart else b"")
            seen.setdefault(key, int(code))
        representative.append(list(seen.values()))
    return PlacementClasses(representative)


@dataclass(frozen=True)
class Table:
    """Rows of (degree tuple, value index of each axis) and each term's integer per row."""

    axes: tuple[str, ...]
    degree_index: np.ndarray  # (R,)
    axis_index: dict[str, np.ndarray]  # axis -> (R,) index into its values (class for placement)
    values: dict[str, np.ndarray]  # term name -> (R,) int64


@dataclass(frozen=True)
class Tables:
    problem: SearchProblem
    classes: PlacementClasses
    tables: tuple[Table, ...]
    terms: tuple[Term, ...]


def _table_rows(
    problem: SearchProblem, classes: PlacementClasses, axes: tuple[str, ...]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every (degree tuple, axis values) combination, placement classes per tuple."""
    knob_axes = [axis for axis in axes if axis != PLACEMENT]
    ranges = [range(len(problem.knobs[axis])) for axis in knob_axes]
    rows: list[tuple[int, ...]] = []
    for k in range(len(problem.degrees)):
        n_classes = len(classes.representative[k]) if PLACEMENT in axes else 1
        rows += [(k, *combo, j) for combo in product(*ranges) for j in range(n_classes)]
    array = np.asarray(rows, dtype=np.int64).reshape(-1, len(knob_axes) + 2)
    index = {axis: array[:, i + 1] for i, axis in enumerate(knob_axes)}
    if PLACEMENT in axes:
        index[PLACEMENT] = array[:, -1]
    return array[:, 0], index


def _grid_for_rows(
    problem: SearchProblem, classes: PlacementClasses, k: np.ndarray, index: dict[str, np.ndarray]
) -> LayoutGrid:
    """Layouts of the rows; knobs outside the table take a value valid for the tuple."""
    degrees = problem.degrees[k]
    columns = {}
    for knob in KNOBS:
        values = np.asarray(problem.knobs[knob], dtype=np.int64)
        columns[knob] = values[index[knob]] if knob in index else np.full(k.size, values[0])
    if "micro_batch" not in index:  # the first size that divides the batch for this dp
        batch = problem.job.training.global_batch
        sizes = np.asarray(problem.knobs["micro_batch"])
        ok = batch % (degrees[:, 3:4] * sizes[None, :]) == 0
        columns["micro_batch"] = sizes[np.argmax(ok, axis=1)]
    reps = classes.representative
    j = index.get(PLACEMENT, np.zeros(k.size, dtype=np.int64))
    placement = np.asarray([reps[a][b] for a, b in zip(k, j, strict=True)], dtype=np.int64)
    return LayoutGrid(**degree_columns(degrees), placement=placement.reshape(-1), **columns)


def build_tables(problem: SearchProblem, assumptions: CostAssumptions) -> Tables:
    terms = profile_terms(problem.profile)
    classes = placement_classes(problem)
    price_grid = profile_named(problem.profile).price_grid
    tables = []
    for axes in dict.fromkeys(term.axes for term in terms):
        k, index = _table_rows(problem, classes, axes)
        grid = _grid_for_rows(problem, classes, k, index)
        valid = valid_knob_mask(
            problem.job,
            grid.pp,
            grid.dp,
            grid.vpp,
            grid.micro_batch,
            grid.cp,
            grid.schedule,
            grid.ep,
        )
        grid, k = grid.take(valid), k[valid]
        index = {axis: column[valid] for axis, column in index.items()}
        prices = price_grid(problem.job, grid, assumptions)
        values = {}
        for term in terms:
            if term.axes == axes:
                scale = LN_MFU_SCALE if term.kind == "ln_mfu" else 1
                values[term.name] = np.rint(scale * term.value(prices)).astype(np.int64)
        tables.append(Table(axes, k, index, values))
    return Tables(problem, classes, tuple(tables), terms)


def axis_size(tables: Tables, axis: str) -> int:
    if axis == PLACEMENT:
        return tables.classes.count
    return len(tables.problem.knobs[axis])
