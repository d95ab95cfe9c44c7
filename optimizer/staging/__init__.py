"""The stage search: each pipeline rank's layers and recompute mode chosen by CP-SAT, over
every layout of a request (front.py, search.py), from the cost model's stage-plan terms
(tables.py, bounds.py) in a model whose constraints are those formulas (model.py); the
exhaustive oracle for small models is oracle.py.

Other rooms import from this module only.
"""

from optimizer.staging.front import PLAN_ENGINES, recompute_per_stage, search_stage_plans
from optimizer.staging.search import PlanFound, StageSearch

__all__ = ["PLAN_ENGINES", "PlanFound", "StageSearch", "recompute_per_stage", "search_stage_plans"]
