"""The search: a request's space resolved against a job (space.py, problem.py), the cost
model's terms tabulated (terms.py, placements.py, tables.py, dominance.py), the CP-SAT model
(structure.py, model.py, tie_break.py), one request's pricing shared by its searches
(pricing.py), its solves (solve.py, on the CP-SAT kernel optimizer/cpsat/), the optimum by MFU ceilings
(ceilings.py, ceiling_search.py), the frontier
(frontier.py), and the exhaustive enumerator that is its oracle (enumerator.py).

Other rooms import from this module only.
"""

from optimizer.cpsat import CutShort, StopSignal, time_is_up
from optimizer.search.boxes import engine_rules_broken
from optimizer.search.ceiling_search import (
    MAX_EXPLAIN_CEILING_CELLS,
    best_layout_above,
    best_layout_by_ceilings,
    reaching_problem,
    tie_floor,
)
from optimizer.search.ceilings import tuple_ceilings
from optimizer.search.enumerator import PricedSpace, layout_grid, price_space, restriction_masks
from optimizer.search.model import LayoutModel, rule_names
from optimizer.search.pareto import frontier
from optimizer.search.placements import placement_class_of, placement_classes
from optimizer.search.pricing import Pricing
from optimizer.search.problem import (
    ENGINE_RULE_PREFIX,
    EVEN_STAGES,
    KNOBS,
    KV_HEADS,
    MEMORY_FIT,
    MEMORY_LIMIT,
    MIN_INTERLEAVED_PP,
    PRICED_KNOBS,
    MemoryFit,
    SearchProblem,
    at_point,
    divisors,
    fast_link_domain,
    held_to,
    narrow_to_rules,
    priced_knobs,
    resolve_space,
)
from optimizer.search.solve import (
    Found,
    SolveSettings,
    best_layout,
    choosable_model,
    least_memory_beating,
    new_solver,
    solve_best,
)
from optimizer.search.space import (
    MAX_MICRO_BATCH_VALUES,
    MAX_SEARCH_VPP,
    MemoryFitRule,
    SearchSpace,
)
from optimizer.search.tables import NoLayouts, Tables, build_tables
from optimizer.search.terms import LN_MFU_SCALE, MAX_TERM

__all__ = [
    "ENGINE_RULE_PREFIX",
    "EVEN_STAGES",
    "KNOBS",
    "KV_HEADS",
    "LN_MFU_SCALE",
    "MAX_MICRO_BATCH_VALUES",
    "MAX_SEARCH_VPP",
    "MAX_TERM",
    "MEMORY_FIT",
    "MEMORY_LIMIT",
    "MIN_INTERLEAVED_PP",
    "NoLayouts",
    "PRICED_KNOBS",
    "Pricing",
    "CutShort",
    "Found",
    "PricedSpace",
    "LayoutModel",
    "MemoryFit",
    "MemoryFitRule",
    "SearchProblem",
    "SearchSpace",
    "SolveSettings",
    "StopSignal",
    "Tables",
    "at_point",
    "best_layout",
    "best_layout_above",
    "best_layout_by_ceilings",
    "build_tables",
    "choosable_model",
    "divisors",
    "engine_rules_broken",
    "fast_link_domain",
    "held_to",
    "frontier",
    "layout_grid",
    "least_memory_beating",
    "narrow_to_rules",
    "placement_class_of",
    "placement_classes",
    "new_solver",
    "price_space",
    "priced_knobs",
    "reaching_problem",
    "MAX_EXPLAIN_CEILING_CELLS",
    "resolve_space",
    "restriction_masks",
    "rule_names",
    "solve_best",
    "tie_floor",
    "time_is_up",
    "tuple_ceilings",
]
