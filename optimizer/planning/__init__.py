"""Planning: many jobs on one cluster, each job's pool, GPU count, nodes and layout in one
proved plan (issue 17). The rooms it draws on: the search (each job's scaling curve, from
`optimize`), the cost model (every figure reported). Its pieces, in the order a plan runs:

- `cluster.py`, `jobs.py`, `problem.py`: the snapshot (pools, racks, NVLink domains,
  unavailable nodes), the jobs and their rules, the objective, the size caps;
- `curves.py`: each job's best throughput per (pool, node count), cached;
- `options.py`: each job's configurations and their worth under the objective (the
  p-norm and the deadline test as exact tables over each job's finite options);
- `greedy.py`, `model.py`, `solve.py`: the greedy hint, the CP-SAT model, its staged solves;
- `placement.py`: node ids, and each layout laid on its racks;
- `explain.py`, `conflicts.py`: shortfalls and the value of one more node; minimal conflicts;
- `enumerator.py`: the exhaustive oracle of the tests;
- `plans.py`: the front door, `plan`.

Other rooms import from this module only.
"""

from optimizer.planning.cluster import Pool
from optimizer.planning.curves import CURVE_CACHE, CurvePoint, Curves, build_curves, given_curves
from optimizer.planning.jobs import Deadline, MeasuredThroughput, PlanJob, Running
from optimizer.planning.placement import Placement
from optimizer.planning.plans import plan
from optimizer.planning.problem import (
    DEFAULT_FAIRNESS_P,
    MAX_CELL_VARIABLES,
    MAX_CURVE_POINTS,
    MAX_OPTIONS,
    OBJECTIVES,
    Objective,
    PlanProblem,
    PlanSettings,
    PlanTooLarge,
)
from optimizer.planning.results import JobPlan, NodeValue, PlanResult, PlanStats, Reason, Shortfall

__all__ = [
    "CURVE_CACHE",
    "DEFAULT_FAIRNESS_P",
    "MAX_CELL_VARIABLES",
    "MAX_CURVE_POINTS",
    "MAX_OPTIONS",
    "OBJECTIVES",
    "CurvePoint",
    "Curves",
    "Deadline",
    "JobPlan",
    "NodeValue",
    "Objective",
    "MeasuredThroughput",
    "Placement",
    "PlanJob",
    "PlanProblem",
    "PlanResult",
    "PlanSettings",
    "PlanStats",
    "PlanTooLarge",
    "Pool",
    "Reason",
    "Running",
    "Shortfall",
    "build_curves",
    "given_curves",
    "plan",
]
