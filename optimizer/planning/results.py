"""What a plan answers: each job's pool, nodes, layout and throughput; the plan's status,
objective, bound and gap; who got less than asked and why, what one more node of each pool
would buy, or (infeasible) the minimal conflict."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.costmodel import Estimate
from optimizer.engines import Artefact
from optimizer.planning.placement import Placement
from optimizer.results import Conflict, Status


@dataclass(frozen=True)
class JobPlan:
    name: str
    pool: str | None  # None: given nothing
    gpu: str | None
    gpus: int
    nodes: tuple[int, ...]  # empty without node assignment
    estimate: Estimate | None  # the layout's, priced by the cost model (None: curves given)
    placement: Placement | None
    tokens_per_s: float  # its configuration's throughput
    horizon_tokens_per_s: float  # averaged over the horizon, a restart's minutes taken off
    share: float  # throughput over its best alone on the cluster
    change: str  # starts, stays, moves, resizes, stops, waits
    meets_deadline: bool | None = None
    engine: str | None = None
    export: Artefact | None = None  # the engine's input for the layout on its nodes


@dataclass(frozen=True)
class Reason:
    code: str  # capacity, objective, restart_cost, rule, no_configuration, scaling
    message: str


@dataclass(frozen=True)
class Shortfall:
    """A job given less than its best configuration alone on the cluster, and why."""

    job: str
    asked_gpus: int  # its best configuration alone on the cluster
    asked_pool: str | None
    asked_tokens_per_s: float
    got_gpus: int
    got_pool: str | None
    got_tokens_per_s: float
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class NodeValue:
    """What one more node of a pool would buy, in the objective's units."""

    pool: str
    objective_gain: float | None  # one more node's; None: not worked out in time
    description: str
    nodes_for_gain: int | None = None  # the fewest more nodes (1, 2, 4, ...) that buy anything
    gain_at_that: float | None = None


@dataclass(frozen=True)
class LeftOut:
    """A configuration not in the plan: its search found no layout, or was not run."""

    job: str
    pool: str
    gpus: int
    status: str
    note: str


@dataclass(frozen=True)
class PlanStats:
    wall_s: float
    curve_wall_s: float
    solve_wall_s: float
    explain_wall_s: float
    proved_optimal: bool
    topology_proved: bool
    tie_break_proved: bool
    solves: int
    workers: int
    seed: int
    optimize_calls: int
    curve_cache_hits: int
    configurations: int
    variables: int
    constraints: int
    branches: int = 0
    from_greedy: bool = False
    objective_solve_s: float = 0.0  # the solve that settled the objective (its proof, if any)


@dataclass(frozen=True)
class PlanResult:
    status: Status
    objective: str
    objective_value: float | None
    bound: float | None
    gap: float | None
    terms: dict[str, float]
    jobs: tuple[JobPlan, ...]
    stats: PlanStats
    shortfalls: tuple[Shortfall, ...] = ()
    node_values: tuple[NodeValue, ...] = ()
    conflict: tuple[Conflict, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    warnings: tuple[str, ...] = ()
    explanations_complete: bool = False
    racks_spanned: int | None = None  # the topology term: racks each job spans, summed
    value_units: int | None = None  # the objective in the solver's integers (options.py)
