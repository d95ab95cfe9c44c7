"""Placements told apart only where they price apart: per degree tuple, the orders of the
dimensions grouped by which priced groups fit one NVLink domain."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.layout import DIMENSIONS, Dimension
from optimizer.costmodel import LayoutGrid, domains_spanned
from optimizer.search.problem import (
    SearchProblem,
    degree_columns,
    fast_link_domain,
    on_fast_links,
)

# The dimensions whose groups a profile prices differently inside and across a node;
# placements alike on these price alike. Missing profile: all four (correct, slower).
PLACEMENT_PRICED_DIMS: dict[str, tuple[Dimension, ...]] = {"workshop": ("tp",)}


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

    def codes(self) -> np.ndarray:
        """[tuple k, class j] -> placement code, -1 past a tuple's last class."""
        padded = np.full((len(self.representative), self.count), -1, dtype=np.int64)
        for k, representative in enumerate(self.representative):
            padded[k, : len(representative)] = representative
        return padded


def _priced_links(
    problem: SearchProblem, grid: LayoutGrid, dims: tuple[Dimension, ...]
) -> list[np.ndarray]:
    """Per row, what a placement changes in the price of each priced group: whether it fits
    one NVLink domain and, for the profiles that charge a ring's network steps by the
    domains it crosses (standard), how many domains it touches; the data-parallel group
    (dp x cp together) counts as one more group."""
    spans: dict[str, np.ndarray] = {dim: grid.span(dim) for dim in dims}
    keys = [on_fast_links(problem, span) for span in spans.values()]
    if problem.profile in PLACEMENT_PRICED_DIMS:
        return keys
    domain = fast_link_domain(problem)
    groups: dict[str, np.ndarray] = {dim: grid.degree(dim) for dim in dims}
    if "dp" in spans and "cp" in spans:
        spans["data"] = np.maximum(spans["dp"], spans["cp"])
        groups["data"] = groups["dp"] * groups["cp"]
        keys.append(on_fast_links(problem, spans["data"]))
    for name, span in spans.items():
        keys.append(domains_spanned(groups[name], span, domain))
    return keys


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
    dims = PLACEMENT_PRICED_DIMS.get(problem.profile, DIMENSIONS)
    # expert groups' links depend on more than these fits: keep MoE placements apart
    apart = problem.job.model.is_moe and problem.profile not in PLACEMENT_PRICED_DIMS
    fits = np.stack(_priced_links(problem, grid, dims), axis=1)
    fits = fits.reshape(*k.shape, -1)
    representative = []
    for row in range(len(problem.degrees)):
        seen: dict[bytes, int] = {}
        for col, code in enumerate(codes):
            key = fits[row, col].tobytes() + (bytes([col]) if apart else b"")
            seen.setdefault(key, int(code))
        representative.append(list(seen.values()))
    return PlacementClasses(representative)
