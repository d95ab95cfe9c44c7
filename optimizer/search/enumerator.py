"""Exhaustive search: every layout of a `SearchProblem`, priced at once by `profile.price_grid`.

The oracle for the CP-SAT model's tests and the baseline of its benchmark. Same space, same
restrictions, same tie-breaks as the solver; its restriction masks also give each search
over a table of whole layouts the few rows it can choose (frontier_rows).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from models.layout import Layout
from optimizer.costmodel import CostAssumptions, GridPrices, LayoutGrid, profile_named
from optimizer.search.dominance import without_dominated_anywhere
from optimizer.search.placements import PlacementClasses
from optimizer.search.problem import (
    EVEN_STAGES,
    KNOBS,
    KV_HEADS,
    MEMORY_LIMIT,
    MIN_INTERLEAVED_PP,
    SearchProblem,
    valid_knob_mask,
)
from optimizer.search.tables import Tables, table_grid, whole_layouts
from optimizer.search.terms import LN_MFU_SCALE


@dataclass(frozen=True)
class PricedSpace:
    """Every valid layout of a problem with its memory per device (bytes) and MFU."""

    grid: LayoutGrid
    prices: GridPrices

    @property
    def memory_bytes(self) -> np.ndarray:
        return self.prices.memory_bytes

    @property
    def mfu(self) -> np.ndarray:
        return self.prices.mfu


def grid_axes(problem: SearchProblem) -> list[int]:
    """The lengths of the product layout_grid spans: degree tuples, each knob, placements."""
    return [len(problem.degrees), *(len(problem.knobs[k]) for k in KNOBS), len(problem.placements)]


def layout_grid(problem: SearchProblem) -> LayoutGrid:
    """The cartesian product of degree tuples, knob values and placements, valid rows only."""
    axes = grid_axes(problem)
    index = np.indices(axes).reshape(len(axes), -1)
    degrees = problem.degrees[index[0]]
    columns = {
        knob: np.asarray(problem.knobs[knob], dtype=np.int64)[index[i + 1]]
        for i, knob in enumerate(KNOBS)
    }
    grid = LayoutGrid(
        tp=degrees[:, 0],
        pp=degrees[:, 1],
        cp=degrees[:, 2],
        dp=degrees[:, 3],
        placement=np.asarray(problem.placements, dtype=np.int64)[index[-1]],
        **columns,
    )
    mask = valid_knob_mask(
        problem.job, grid.pp, grid.dp, grid.vpp, grid.micro_batch, grid.cp, grid.schedule, grid.ep
    )
    return grid.take(mask)


def price_space(problem: SearchProblem, assumptions: CostAssumptions) -> PricedSpace:
    grid = layout_grid(problem)
    return PricedSpace(
        grid, profile_named(problem.profile).price_grid(problem.job, grid, assumptions)
    )


def restriction_masks(problem: SearchProblem, space: PricedSpace) -> dict[str, np.ndarray]:
    """Each relaxable rule of the request as a mask over the priced space."""
    grid = space.grid
    masks = {MEMORY_LIMIT: space.memory_bytes <= problem.memory_limit_bytes}
    if problem.require_kv_divisibility:
        masks[KV_HEADS] = problem.job.model.num_kv_heads % grid.tp == 0
    if problem.require_even_stages:
        masks[EVEN_STAGES] = problem.job.model.num_layers % (grid.pp * grid.vpp) == 0
    if problem.min_interleaved_pp is not None:
        masks[MIN_INTERLEAVED_PP] = (grid.vpp == 1) | (grid.pp >= problem.min_interleaved_pp)
    for name, value in problem.fixed.items():
        masks[f"fixed_{name}"] = getattr(grid, name) == value
    for knob, allowed in problem.allowed.items():
        masks[f"{knob}_allowed"] = np.isin(getattr(grid, knob), allowed)
    for name, broken in problem.engine_breaks(grid).items():
        masks[name] = ~broken
    return masks


def feasible(problem: SearchProblem, space: PricedSpace, relaxed: frozenset[str]) -> np.ndarray:
    """Rows every unrelaxed rule allows; rows without finite figures are no layouts."""
    with np.errstate(all="ignore"):
        mask = np.isfinite(space.memory_bytes) & np.isfinite(space.mfu) & (space.mfu > 0)
    for name, rule in restriction_masks(problem, space).items():
        if name not in relaxed:
            mask &= rule
    return mask


def tie_break_order(space: PricedSpace, rows: np.ndarray) -> np.ndarray:
    """`rows` sorted best first: MFU, then least memory, tp, pp, cp, then the knobs."""
    grid = space.grid
    keys = [grid.placement[rows]]
    keys += [getattr(grid, knob)[rows] for knob in reversed(KNOBS)]
    keys += [grid.cp[rows], grid.pp[rows], grid.tp[rows]]
    keys += [space.memory_bytes[rows], -space.mfu[rows]]
    return rows[np.lexsort(keys)]


def best_layout(
    problem: SearchProblem,
    assumptions: CostAssumptions,
    relaxed: frozenset[str] = frozenset(),
) -> Layout | None:
    space = price_space(problem, assumptions)
    rows = np.flatnonzero(feasible(problem, space, relaxed))
    if rows.size == 0:
        return None
    return space.grid.layout(int(tie_break_order(space, rows)[0]))


def best_of_tables(tables: Tables) -> Layout | None:
    """The numpy argmax over the rows a CP-SAT model of `tables` picks from (one table of
    whole layouts, dominance-pruned): the request's rules as masks, the solver's tie-break
    (its ln(MFU) integers, then memory, then the degrees and knobs). What the solver adds
    beyond this is the proof, the explanations and the conflicts; the benchmark times both.
    ValueError for tables of factored terms (workshop's), which only a join could search."""
    if len(tables.tables) != 1 or not whole_layouts(tables.tables[0].axes):
        raise ValueError("best_of_tables needs one table of whole layouts")
    space = table_space(tables)
    rows = np.flatnonzero(feasible(tables.problem, space, frozenset()))
    if rows.size == 0:
        return None
    return space.grid.layout(int(tie_break_order(space, rows)[0]))


def table_space(tables: Tables) -> PricedSpace:
    """The rows of a search's one table of whole layouts as a priced space: their layouts,
    memory in bytes and MFU, both from the rows' integer terms as the solver reads them."""
    table = tables.tables[0]
    memory = sum(table.values[t.name] for t in tables.terms if t.kind == "memory_bytes")
    ln_mfu = sum(table.values[t.name] for t in tables.terms if t.kind == "ln_mfu")
    zeros = np.zeros(len(table.degree_index))
    prices = GridPrices(
        weights_bytes=np.asarray(memory, dtype=float) * tables.memory_unit_bytes,
        gradients_bytes=zeros,
        optimizer_bytes=zeros,
        activations_bytes=zeros,
        runtime_bytes=zeros,
        bubble=zeros,
        mfu=np.exp(np.asarray(ln_mfu, dtype=float) / LN_MFU_SCALE),
    )
    return PricedSpace(table_grid(tables, table), prices)


# Two layouts whose MFUs differ by a few ulps tie: the same number computed along two paths
# (e.g. tp 2 x pp 1 and tp 1 x pp 2) may differ in its last bit, and more memory for a
# rounding error is no frontier point.
FLOAT_NOISE_RELATIVE = 1e-12


def frontier_points(
    problem: SearchProblem, assumptions: CostAssumptions
) -> list[tuple[float, float, Layout]]:
    """The non-dominated (memory bytes, MFU) points, memory ascending, with a layout each."""
    space = price_space(problem, assumptions)
    rows = np.flatnonzero(feasible(problem, space, frozenset()))
    ranked = tie_break_order(space, rows)  # MFU first, so equal memory keeps its best MFU
    by_memory = ranked[np.argsort(space.memory_bytes[ranked], kind="stable")]
    points: list[tuple[float, float, Layout]] = []
    for row in by_memory:
        mfu = float(space.mfu[row])
        if not points or mfu > points[-1][1] * (1 + FLOAT_NOISE_RELATIVE):
            points.append((float(space.memory_bytes[row]), mfu, space.grid.layout(int(row))))
    return points


def frontier_rows(tables: Tables, relaxed: frozenset[str] = frozenset()) -> Tables:
    """For one table of whole layouts, only the rows every rule but the `relaxed` ones allows
    that no such row beats on memory and MFU: every frontier point, and the best layout of a
    search that relaxes those rules, is among them, and their solves load tens of rows
    instead of thousands (the table is pruned only within groups of rows alike, so that each
    relaxation finds its own rows in it). Other tables as they are."""
    if len(tables.tables) != 1 or not whole_layouts(tables.tables[0].axes):
        return tables
    allowed = tables.tables[0].take(feasible(tables.problem, table_space(tables), relaxed))
    if not len(allowed.degree_index):
        return tables  # nothing fits: the model proves it, with every rule in place
    kept = without_dominated_anywhere(tables.problem, allowed, tables.terms)
    return _on_own_tuples(replace(tables, tables=(kept,)))


def _on_own_tuples(tables: Tables) -> Tables:
    """The tables with only the degree tuples their rows hold (a few of the hundreds a
    request's space has): a model of them is as small as its rows. The tuples keep their
    order, so every tie-break ranks the rows as before; the rules' literals a model would
    hold only for the tuples left out bar no row of these."""
    table = tables.tables[0]
    used = np.unique(table.degree_index)
    if used.size == len(tables.problem.degrees):
        return tables
    problem = replace(tables.problem, degrees=tables.problem.degrees[used])
    classes = PlacementClasses([tables.classes.representative[k] for k in used])
    table = replace(table, degree_index=np.searchsorted(used, table.degree_index))
    return replace(tables, problem=problem, classes=classes, tables=(table,))
