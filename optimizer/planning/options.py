"""Each job's configurations and what each is worth under the scheduler's objective.

A job's options are a finite list: nothing, or one usable point of its scaling curve (a
pool and a node count), run where it runs now (`stays`: no restart) or started afresh
(`restarts` for a running job). Every objective is a sum of one term per job, so the
p-norm and the deadline test, nonlinear in throughput, are exact as a table over that list
(the piecewise encoding over a finite domain): the solver only adds table entries.

The terms, per job of weight w at T tokens/s, over a horizon of H seconds, T_eff = T * (H -
lost_s) / H when it restarts (lost_s: its restart, plus half its checkpoint interval when it
cannot save one before a planned move), T when it stays, and x = T_eff / T_alone, T_alone the job's
best throughput alone on the cluster:
- throughput: w * x, the work each job does as a share of its best alone, so that jobs of
  different sizes (and jobs that bring their own throughput in their own unit) add up: raw
  tokens/s summed across a 70B and an 8B model would trade the 70B's H100s for the 8B's
  cheaper tokens (the plan's answer still reports the weighted tokens/s);
- tokens: w * T_eff, weighted tokens/s summed across jobs (the sum `throughput` was before
  it weighed each job by its best alone; for a script that wants that sum);
- fairness (minimised): w * x^p, p = -0.5 by default (throughput is the same sum at p = 1); nothing costs Sia's lambda_n (1.1) times its
  smallest configuration's term (sia-simulator's `__solve_mip_rescaled`: no allocation is a
  penalty, not a constraint);
- deadlines: met weight first (T * (D - lost_s) >= tokens still to train, plus what a failure
  took back since the last checkpoint), then the
  throughput term (w * x) as a tie-break below one unit of met weight.
Each becomes an integer, `value`, maximised: PRIMARY_LEVELS spans the largest possible
sum, so the table resolves 1e-9 of it (deadlines: 1e-4 of the total weight, then 1e-6 of
the throughput).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optimizer.planning.curves import CurvePoint, Curves
from optimizer.planning.jobs import PlanJob
from optimizer.planning.problem import PlanProblem

PRIMARY_LEVELS = 1_000_000_000
NO_ALLOCATION_PENALTY = 1.1  # Sia's lambda_n
MET_LEVELS = 10_000  # deadlines: resolution of the met weight
THROUGHPUT_LEVELS = 1_000_000  # deadlines: resolution of the throughput below it


@dataclass(frozen=True)
class Option:
    job: int
    point: CurvePoint | None = None  # None: nothing
    stays: bool = False  # keeps exactly its current nodes
    restarts: bool = False  # a running job moved or resized
    on_unavailable: bool = False  # stays on a node now unavailable

    @property
    def pool(self) -> int | None:
        return None if self.point is None else self.point.pool

    @property
    def nodes(self) -> int:
        return 0 if self.point is None else self.point.nodes

    @property
    def gpus(self) -> int:
        return 0 if self.point is None else self.point.gpus

    @property
    def tokens_per_s(self) -> float:
        return 0.0 if self.point is None else self.point.tokens_per_s


@dataclass(frozen=True)
class Score:
    """One job's term under the objective: the figures it is made of."""

    tokens_per_s: float  # averaged over the horizon: a restart's lost minutes taken off
    weighted: float  # w * that
    share: float  # normalised throughput x, 0 for nothing
    worth: float  # w * x: the throughput objective's term
    fairness: float  # w * x^p (or the no-allocation penalty)
    meets_deadline: bool | None  # None: no deadline


@dataclass(frozen=True)
class OptionTable:
    options: tuple[tuple[Option, ...], ...]  # per job; index 0 is "nothing"
    values: tuple[tuple[int, ...], ...]  # the integer each option adds, maximised
    scores: tuple[tuple[Score, ...], ...]
    alone_tokens_per_s: tuple[float, ...]  # each job's best configuration alone

    @property
    def count(self) -> int:
        return sum(len(o) for o in self.options)


def job_options(problem: PlanProblem, curves: Curves, j: int) -> tuple[Option, ...]:
    """Nothing, then each usable point by pool and node count, staying before restarting:
    the order the tie-break prefers."""
    job = problem.jobs[j]
    options = [Option(j)]
    where = problem.running_pool(job)
    failed = bool(problem.failed_nodes(job))  # once: a running job may hold many nodes
    restart_s = lost_on_restart_s(problem, job)
    for point in sorted(curves.usable(j), key=lambda p: (p.pool, p.nodes)):
        current = job.running is not None and point.pool == where
        if current and job.running is not None and point.nodes == len(job.running.nodes):
            options.append(Option(j, point, stays=True, on_unavailable=failed))
        if job.running is not None and restart_s >= problem.horizon_s:
            continue  # a restart would take the whole horizon: worth nothing, never chosen
        options.append(Option(j, point, restarts=job.running is not None))
    return tuple(options)


def lost_on_restart_s(problem: PlanProblem, job: PlanJob) -> float:
    """Training a restart costs the job from now on: a planned move or resize, its restart
    and what it trained since its last checkpoint; after a failure, the restart alone (what
    the failure lost is lost whatever the plan does, so it weighs on no choice)."""
    return job.restart_s if problem.failed_nodes(job) else job.move_cost_s


def lost_to_failure_tokens(
    problem: PlanProblem, job: PlanJob, options: tuple[Option, ...]
) -> float:
    """Tokens a failure took back from a job that held a failed node: its throughput where it
    ran times the time since its last checkpoint (half an interval on average). They are
    trained again, so a deadline needs them too."""
    if not problem.failed_nodes(job):
        return 0.0
    running = next((o.tokens_per_s for o in options if o.stays), 0.0)
    return running * job.since_checkpoint_s


def score(
    problem: PlanProblem,
    job: PlanJob,
    option: Option,
    alone: float,
    least: float,
    restart_s: float,
    retrain_tokens: float = 0.0,
) -> Score:
    """The option's term in real units. `least`: the job's smallest normalised throughput;
    `restart_s`: what a restart costs it (lost_on_restart_s, worked out once per job);
    `retrain_tokens`: what a failure took back, added to a deadline's tokens."""
    p = problem.fairness_p
    deadline = None if job.deadline is None else False
    if option.point is None:
        penalty = NO_ALLOCATION_PENALTY * (least**p if least > 0 else 1.0)
        return Score(0.0, 0.0, 0.0, 0.0, job.weight * penalty, deadline)
    lost_s = restart_s if option.restarts else 0.0
    horizon_s = problem.horizon_s
    kept = max(horizon_s - lost_s, 0.0) / horizon_s
    tokens_per_s = option.tokens_per_s * kept
    share = tokens_per_s / alone if alone > 0 else 0.0
    fairness = job.weight * (share**p if share > 0 else NO_ALLOCATION_PENALTY * least**p)
    if job.deadline is not None:
        training_s = max(job.deadline.seconds - lost_s, 0.0)
        deadline = option.tokens_per_s * training_s >= job.deadline.tokens + retrain_tokens
    weighted = job.weight * tokens_per_s
    return Score(tokens_per_s, weighted, share, job.weight * share, fairness, deadline)


def option_table(problem: PlanProblem, curves: Curves) -> OptionTable:
    options = tuple(job_options(problem, curves, j) for j in range(len(problem.jobs)))
    alone = tuple(max((o.tokens_per_s for o in opts), default=0.0) for opts in options)
    scores = []
    for j, opts in enumerate(options):
        shares = [o.tokens_per_s / alone[j] for o in opts if o.point is not None]
        least = min(shares, default=0.0)
        job = problem.jobs[j]
        restart_s = lost_on_restart_s(problem, job)
        retrain = lost_to_failure_tokens(problem, job, opts)
        scores.append(
            tuple(score(problem, job, o, alone[j], least, restart_s, retrain) for o in opts)
        )
    values = integer_values(problem, tuple(scores))
    return OptionTable(options, values, tuple(scores), alone)


def integer_values(
    problem: PlanProblem, scores: tuple[tuple[Score, ...], ...]
) -> tuple[tuple[int, ...], ...]:
    """Each option's term as the integer the solver maximises (see the module's note)."""
    if problem.objective == "fairness":
        worst = sum(max(s.fairness for s in row) for row in scores) or 1.0
        scale = PRIMARY_LEVELS / worst
        return tuple(tuple(-round(s.fairness * scale) for s in row) for row in scores)
    if problem.objective == "tokens":
        most = sum(max(s.weighted for s in row) for row in scores)
        scale = PRIMARY_LEVELS / most if most > 0 else 0.0
        return tuple(tuple(round(s.weighted * scale) for s in row) for row in scores)
    best = sum(max(s.worth for s in row) for row in scores)
    if problem.objective == "throughput":
        scale = PRIMARY_LEVELS / best if best > 0 else 0.0
        return tuple(tuple(round(s.worth * scale) for s in row) for row in scores)
    due = sum(job.weight for job in problem.jobs if job.deadline is not None) or 1.0
    per_weight = MET_LEVELS / due
    per_throughput = (THROUGHPUT_LEVELS - 1) / best if best > 0 else 0.0
    return tuple(
        tuple(
            round(problem.jobs[j].weight * per_weight) * bool(s.meets_deadline) * THROUGHPUT_LEVELS
            + math.floor(s.worth * per_throughput)
            for s in row
        )
        for j, row in enumerate(scores)
    )


def objective_scale(problem: PlanProblem, table: OptionTable) -> float:
    """Integer units per objective unit (throughput: the sum of w * x; tokens: weighted
    tokens/s; fairness: the sum of w * x^p, its sign flipped; deadlines: met weight)."""
    if problem.objective == "fairness":
        worst = sum(max(s.fairness for s in row) for row in table.scores) or 1.0
        return -PRIMARY_LEVELS / worst
    if problem.objective == "tokens":
        most = sum(max(s.weighted for s in row) for row in table.scores)
        return PRIMARY_LEVELS / most if most > 0 else 1.0
    if problem.objective == "throughput":
        best = sum(max(s.worth for s in row) for row in table.scores)
        return PRIMARY_LEVELS / best if best > 0 else 1.0
    due = sum(job.weight for job in problem.jobs if job.deadline is not None) or 1.0
    return MET_LEVELS * THROUGHPUT_LEVELS / due
