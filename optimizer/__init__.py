"""The optimiser. Its rooms, from the bottom up:

- `costmodel/`: the single source of truth for every figure: memory by part, bubble,
  communication and the MFU waterfall of one layout or a grid, under a named profile;
- `search/`: the search space, the cost model's terms tabulated, the CP-SAT model and its
  solves, the frontier, and the exhaustive enumerator that checks them;
- `results.py`: what a search answers (statuses, bounds, relaxations, choices, conflicts);
- `explain/`: why the optimum is what it is (relaxations, choices, slack, conflicts);
- `request.py`: the one request every front door takes, parsed once at the edge;
- `searches.py`: the front doors, `evaluate_on`, `optimize`, `pareto` and `stage_plans`;
- `memory_fit.py`: the rule a search holds a layout's memory to (its interval's upper end,
  or the estimate alone);
- `uncertainty/`: how sure an estimate is: the interval its regime's published misses give;
- `ties.py`: the layouts tied with the optimum under that interval, and what they differ in;
- `validation/`: the cost model against published training runs (and those misses).

Engines, calibration, studies and the multi-job planner join as rooms of their own here.
What the API may use is re-exported below.
"""

from optimizer.costmodel import (
    PLACEMENTS,
    PROFILES,
    CostAssumptions,
    Estimate,
    Interval,
    ProfileName,
    evaluate,
)
from optimizer.cpsat import StopSignal
from optimizer.memory_fit import memory_fit_words
from optimizer.request import DEFAULT_PROFILE, Request
from optimizer.results import (
    Choice,
    Conflict,
    OptimizeResult,
    ParetoResult,
    Relaxation,
    Slack,
    SolverStats,
    Status,
)
from optimizer.search import MEMORY_FIT, MemoryFit, SearchSpace, SolveSettings
from optimizer.searches import evaluate_on, optimize, pareto, stage_plans
from optimizer.staging import StageSearch
from optimizer.ties import TiedLayout

__all__ = [
    "TiedLayout",
    "Request",
    "StageSearch",
    "stage_plans",
    "DEFAULT_PROFILE",
    "PLACEMENTS",
    "PROFILES",
    "Choice",
    "Conflict",
    "CostAssumptions",
    "Estimate",
    "Interval",
    "MEMORY_FIT",
    "MemoryFit",
    "OptimizeResult",
    "ParetoResult",
    "ProfileName",
    "Relaxation",
    "SearchSpace",
    "Slack",
    "SolverStats",
    "Status",
    "SolveSettings",
    "StopSignal",
    "evaluate",
    "evaluate_on",
    "memory_fit_words",
    "optimize",
    "pareto",
]
