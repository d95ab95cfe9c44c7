"""Placements told apart only where they price apart: per degree tuple, the orders of the
dimensions grouped by which priced groups fit one NVLink domain."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np

from models.layout import DIMENSIONS, Dimension
from optimizer.costmodel import LayoutGrid, domains_spanned, expert_span
from optimizer.search.problem import (
    SearchProblem,
    divisors,
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

    def counts(self) -> np.ndarray:
        """Per tuple, how many classes it has."""
        return np.asarray([len(classes) for classes in self.representative], dtype=np.int64)

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
    if problem.job.model.is_moe:
        keys += _expert_links(problem, grid, domain)
    return keys


def _expert_links(problem: SearchProblem, grid: LayoutGrid, domain: int) -> list[np.ndarray]:
    """For each expert-parallel degree the model admits (a divisor of its experts: the same
    for every search of a request, so their classes agree), what the placement changes in
    the all-to-all's price: whether the expert group fits one NVLink domain and how many it
    touches (links.all_to_all_bytes_s reads no more of its span)."""
    keys = []
    for ep in divisors(problem.job.model.num_experts):
        span = expert_span(replace(grid, ep=np.full_like(grid.tp, ep)))
        keys += [
            on_fast_links(problem, span),
            domains_spanned(np.full_like(span, ep), span, domain),
        ]
    return keys


def placement_class_of(problem: SearchProblem) -> np.ndarray:
    """[tuple k, i] -> the code of the placement that represents problem.placements[i]'s
    class for tuple k (its first placement with the same priced links). Each tuple's row is
    worked out once per context (_classes_known) and kept."""
    codes = np.asarray(problem.placements, dtype=np.int64)
    if len(problem.degrees) == 0:  # no tuple, no class
        return np.zeros((0, codes.size), dtype=np.int64)
    known = _classes_known(problem)
    tuples = [tuple(row) for row in problem.degrees.tolist()]
    missing = sorted({i for i, key in enumerate(tuples) if key not in known})
    if missing:
        rows = _class_of(replace(problem, degrees=problem.degrees[missing]))
        with _CLASSES_LOCK:
            known.update(zip((tuples[i] for i in missing), rows.tolist(), strict=True))
    return np.asarray([known[key] for key in tuples], dtype=np.int64).reshape(-1, codes.size)


# Every search of an optimize with explanations asks for the classes of many of the same
# tuples (its optimum, the relaxations' wide model, each choice's space): worked out afresh
# each time they were a tenth of an explained optimize (docs/performance.md, "## Solver").
# Kept per context (profile, cluster, experts, placement list: all a class reads besides the
# tuple) for the last few contexts.
_CLASSES: OrderedDict[tuple, dict[tuple[int, ...], list[int]]] = OrderedDict()
_CLASSES_LOCK = threading.Lock()
CLASS_CONTEXTS_KEPT = 8


def _classes_known(problem: SearchProblem) -> dict[tuple[int, ...], list[int]]:
    """The tuples' class rows worked out so far in the problem's context."""
    model = problem.job.model
    experts = model.num_experts if model.is_moe else 0
    context = (problem.profile, problem.job.cluster, experts, tuple(problem.placements))
    with _CLASSES_LOCK:
        if context not in _CLASSES:
            _CLASSES[context] = {}
            while len(_CLASSES) > CLASS_CONTEXTS_KEPT:
                _CLASSES.popitem(last=False)
        _CLASSES.move_to_end(context)
        return _CLASSES[context]


def _class_of(problem: SearchProblem) -> np.ndarray:
    """placement_class_of, worked out for every tuple of the problem."""
    codes = np.asarray(problem.placements, dtype=np.int64)
    k, p = np.meshgrid(np.arange(len(problem.degrees)), codes, indexing="ij")
    grid = LayoutGrid.placed(problem.degrees[k.ravel()], p.ravel())
    dims = PLACEMENT_PRICED_DIMS.get(problem.profile, DIMENSIONS)
    fits = np.stack(_priced_links(problem, grid, dims), axis=1)
    fits = fits.reshape(*k.shape, -1)
    representative = np.empty(k.shape, dtype=np.int64)
    for row in range(len(problem.degrees)):
        seen: dict[bytes, int] = {}
        for col, code in enumerate(codes):
            representative[row, col] = seen.setdefault(fits[row, col].tobytes(), int(code))
    return representative


def placement_classes(problem: SearchProblem) -> PlacementClasses:
    of = placement_class_of(problem)
    return PlacementClasses([list(dict.fromkeys(row.tolist())) for row in of])
