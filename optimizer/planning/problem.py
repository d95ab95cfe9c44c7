"""A planning problem: the cluster's pools, the jobs, the objective a scheduler chose, and
the settings of one plan call. Checked once here; everything after may trust it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

from models.errors import InvalidSpec
from optimizer.cpsat import StopSignal
from optimizer.planning.cluster import Cell, Pool, cells_of, check_pool
from optimizer.planning.jobs import PlanJob

Objective = Literal["throughput", "fairness", "deadlines", "tokens"]
OBJECTIVES: tuple[Objective, ...] = ("throughput", "fairness", "deadlines", "tokens")
# Sia's default exponent (SOSP'23, sia-simulator's `p_fairness`): below 0 the p-mean leans
# towards the worst-served job.
DEFAULT_FAIRNESS_P = -0.5

# The model's size, counted before anything is built: a request beyond these is refused.
MAX_OPTIONS = 50_000  # jobs x configurations (pool, nodes, stays or restarts)
MAX_CELL_VARIABLES = 100_000  # jobs x cells (racks or NVLink domains) they may use
MAX_CURVE_POINTS = 20_000  # (job, pool, node count) the scaling curves price


class PlanTooLarge(InvalidSpec):
    """A plan whose model would exceed the caps; the message gives the counts."""


@dataclass(frozen=True)
class PlanProblem:
    pools: tuple[Pool, ...]
    jobs: tuple[PlanJob, ...]
    objective: Objective = "throughput"
    fairness_p: float = DEFAULT_FAIRNESS_P
    horizon_minutes: float = 60.0  # how long the plan holds: restart costs are spread over it
    assign_nodes: bool = True  # false: pools and counts only (Sia's problem), no node ids

    def pool_index(self, name: str) -> int:
        return next(i for i, pool in enumerate(self.pools) if pool.name == name)

    def running_pool(self, job: PlanJob) -> int | None:
        return None if job.running is None else self.pool_index(job.running.pool)

    def running_gpus(self, job: PlanJob) -> int | None:
        where = self.running_pool(job)
        if where is None or job.running is None:
            return None
        return len(job.running.nodes) * self.pools[where].gpus_per_node

    def failed_nodes(self, job: PlanJob) -> tuple[int, ...]:
        """The unavailable nodes among those `job` runs on: its training stopped with them."""
        if job.running is None:
            return ()
        down = self.pools[self.pool_index(job.running.pool)].unavailable
        return tuple(node for node in job.running.nodes if node in down)

    @property
    def horizon_s(self) -> float:
        return self.horizon_minutes * 60.0

    def cells(self) -> tuple[Cell, ...]:
        """Every pool's cells, numbered across the cluster in pool order."""
        return self._cells

    @cached_property
    def _cells(self) -> tuple[Cell, ...]:
        # built once per problem: a pool of 100,000 nodes takes a tenth of a second
        cells: list[Cell] = []
        for i, pool in enumerate(self.pools):
            cells += cells_of(pool, i, len(cells))
        return tuple(cells)


@dataclass(frozen=True)
class PlanSettings:
    """How one plan call may spend its time. `time_limit_s` bounds the whole call (scaling
    curves, solve, explanations); `stop`, set from another thread, ends it early."""

    time_limit_s: float = 10.0
    workers: int = 1
    seed: int = 0
    gap_limit: float = 0.0  # stop at this relative gap (0: prove optimality)
    explain: bool = True
    curve_time_limit_s: float = 2.0  # each scaling-curve point's optimize call
    stop: StopSignal = field(default_factory=StopSignal)


def released_from_failures(problem: PlanProblem) -> tuple[PlanProblem, tuple[str, ...]]:
    """The problem with each pinned job (running, not movable) that holds a failed node made
    movable, and a warning for each: its training stopped with the node, so it restarts
    wherever the plan puts it (interface.md: the replan moves that job). Kept pinned, it would
    make every plan infeasible for a fact no rule can change."""
    jobs, warnings = [], []
    for job in problem.jobs:
        down = problem.failed_nodes(job) if job.pinned else ()
        if down and job.running is not None:
            warnings.append(
                f"job {job.name!r} is pinned, but its node(s) {', '.join(map(str, down))} of "
                f"pool {job.running.pool!r} are unavailable: it restarts where this plan puts it"
            )
            job = replace(job, movable=True)
        jobs.append(job)
    return (replace(problem, jobs=tuple(jobs)), tuple(warnings)) if warnings else (problem, ())


def check_problem(problem: PlanProblem) -> None:
    """InvalidSpec naming the field for a snapshot that cannot be real."""
    if not problem.pools:
        raise InvalidSpec("the cluster has no pools", "cluster.pools")
    _unique([p.name for p in problem.pools], "pool", "cluster.pools")
    _unique([j.name for j in problem.jobs], "job", "jobs")
    # `field` names the request field; the message names the pool or job (as for any list)
    for pool in problem.pools:
        check_pool(pool, "cluster.pools")
    held: dict[tuple[str, int], str] = {}
    for job in problem.jobs:
        _check_job(problem, job, "jobs", held)
    if not -10 <= problem.fairness_p < 0:
        raise InvalidSpec(
            f"fairness_p({problem.fairness_p:g}) must be negative (Sia's -0.5), at least -10",
            "fairness_p",
        )


def _unique(names: list[str], what: str, where: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidSpec(f"two {what}s are named {name!r}: names must be unique", where)
        seen.add(name)


def _check_job(problem: PlanProblem, job: PlanJob, where: str, held: dict) -> None:
    if job.max_gpus is not None and job.max_gpus < job.min_gpus:
        raise InvalidSpec(
            f"job {job.name!r}: max_gpus({job.max_gpus}) < min_gpus({job.min_gpus})",
            f"{where}.max_gpus",
        )
    if job.deadline is not None and problem.objective == "deadlines" and job.deadline.hours <= 0:
        raise InvalidSpec(f"job {job.name!r}: its deadline has passed", f"{where}.deadline")
    if job.running is None:
        return  # movable and resizable speak of running jobs: a waiting one keeps nothing
    names = [p.name for p in problem.pools]
    if job.running.pool not in names:
        raise InvalidSpec(
            f"job {job.name!r} runs in pool {job.running.pool!r}, which is not in the "
            f"cluster (pools: {', '.join(names)})",
            f"{where}.running.pool",
        )
    pool = problem.pools[names.index(job.running.pool)]
    if not job.running.nodes:
        raise InvalidSpec(f"job {job.name!r} runs on no nodes", f"{where}.running.nodes")
    for node in job.running.nodes:
        if not 0 <= node < pool.nodes:
            raise InvalidSpec(
                f"job {job.name!r} runs on node {node}, not one of pool {pool.name!r}'s "
                f"nodes 0-{pool.nodes - 1}",
                f"{where}.running.nodes",
            )
        other = held.setdefault((pool.name, node), job.name)
        if other != job.name:
            raise InvalidSpec(
                f"jobs {other!r} and {job.name!r} both run on node {node} of pool {pool.name!r}",
                f"{where}.running.nodes",
            )
    if len(set(job.running.nodes)) != len(job.running.nodes):
        raise InvalidSpec(f"job {job.name!r} lists a node twice", f"{where}.running.nodes")


def curve_points(problem: PlanProblem) -> int:
    """How many (job, pool, node count) its scaling curves price, before any is priced."""
    return sum(
        len(job.candidate_nodes(pool, problem.running_gpus(job)))
        for job in problem.jobs
        for pool in problem.pools
    )


def check_size(problem: PlanProblem) -> None:
    """PlanTooLarge, with the counts, before anything is priced or built."""
    points = curve_points(problem)
    jobs = len(problem.jobs)
    if points > MAX_CURVE_POINTS:
        raise PlanTooLarge(
            f"plan too large: {jobs} jobs x {len(problem.pools)} pools need {points:,} "
            f"configurations priced (limit {MAX_CURVE_POINTS:,}): give node_counts, narrow "
            "min_gpus/max_gpus, or plan fewer jobs at once",
            "jobs",
        )
    options = 2 * points + jobs  # each count may stay or restart, plus "nothing"
    if options > MAX_OPTIONS:
        raise PlanTooLarge(
            f"plan too large: {options:,} job configurations (limit {MAX_OPTIONS:,})", "jobs"
        )
    if not problem.assign_nodes:
        return
    cells = len(problem.cells())
    assignments = jobs * cells
    if assignments > MAX_CELL_VARIABLES:
        raise PlanTooLarge(
            f"plan too large: {jobs} jobs x {cells:,} racks or NVLink domains = "
            f"{assignments:,} node-count variables (limit {MAX_CELL_VARIABLES:,}): set "
            "assign_nodes false (pools and counts only), use larger racks, or plan fewer "
            "jobs at once",
            "cluster.pools",
        )
