"""A scheduler simulator: a scenario's job arrivals and node failures (bench/cluster_scenarios.py)
replayed against a cluster under three policies, each seeing the same events:

- FCFS: each job, in arrival order, gets its fixed GPU count on the fastest pool with room,
  at the best layout for that size, and keeps it; the head of the queue blocks the rest;
- greedy: each waiting job, in arrival order, takes the node count of its choices that
  trains fastest on the free nodes (backfilling past a job that does not fit), and keeps it;
- the planner, called on every arrival, completion, failure and repair (in this process, or
  over HTTP on a real server with `--url`), which sees every running job where it runs
  (movable, resizable, its restart and checkpoint minutes) and the failed nodes.

    .venv/bin/python -m bench.simulate                       # small: 30 jobs on 512 GPUs
    .venv/bin/python -m bench.simulate --scenario acme --jobs 80
    .venv/bin/python -m bench.simulate --url http://127.0.0.1:8000 --jobs 20

A job's progress is its layout's tokens/s; a moved or resized job trains nothing for its
restart minutes; a failed node stops its job, which loses half a checkpoint interval of
training (the expected loss), restarts elsewhere, and under FCFS and greedy queues again.
All policies price sizes with the same scaling curves (`optimizer.planning.build_curves`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from api.client import Client
from api.schemas import PlanOut, PlanRequestIn, plan_out
from bench.cluster_scenarios import GPUS_PER_NODE, SCENARIOS, Arrival, Failure, Scenario
from bench.report import machine_line, publish
from optimizer.planning import build_curves, plan

SECTIONS = {"small": "## Scheduler simulation", "acme": "## An LLM cluster with failures"}
Speeds = dict[tuple[int, str, int], float]  # (template, pool, nodes) -> tokens/s


@dataclass
class Job:
    name: str
    template: int
    kind: str
    arrival_s: float
    tokens: float
    reference_gpu_h: float  # its work in GPU-hours at its fixed size on the first pool
    left: float = 0.0
    pool: str | None = None
    nodes: list[int] = field(default_factory=list)
    tokens_per_s: float = 0.0
    paused_until_s: float = 0.0
    started_s: float | None = None
    finish_s: float | None = None
    failed: bool = False  # a node it held failed; it must restart elsewhere
    restarts: int = 0
    gpu_s: float = 0.0  # GPU-seconds held, paused or not
    cross_pod_gpu_s: float = 0.0

    @property
    def running(self) -> bool:
        return self.pool is not None and self.finish_s is None


@dataclass
class Cluster:
    scenario: Scenario
    down: dict[str, set[int]]

    def free(self, jobs: list[Job]) -> dict[str, list[int]]:
        held = {(j.pool, n) for j in jobs if j.running for n in j.nodes}
        return {
            pool["name"]: [
                n
                for n in range(pool["nodes"])
                if n not in self.down[pool["name"]] and (pool["name"], n) not in held
            ]
            for pool in self.scenario.pools
        }

    def pods(self, nodes: list[int]) -> int:
        size = self.scenario.nodes_per_pod
        return 1 if size is None else len({n // size for n in nodes})


class Policy(Protocol):
    name: str

    def schedule(self, jobs: list[Job], cluster: Cluster, now_s: float) -> None: ...


def speeds_of(scenario: Scenario) -> Speeds:
    """Each template's tokens/s at every size it may run at, on every pool, at the best
    layout for that size, priced as the planner prices its curves."""
    entries = []
    for t, template in enumerate(scenario.templates):
        counts = sorted({*template.node_counts, template.fixed_gpus // GPUS_PER_NODE})
        entries.append({"name": f"t{t}", "request": template.request(), "node_counts": counts})
    body = {"cluster": {"pools": list(scenario.pools)}, "jobs": entries}
    request = PlanRequestIn.model_validate(body)
    problem = request.to_problem()
    curves = build_curves(problem, request.settings(60.0), time.perf_counter() + 1800)
    return {
        (p.job, problem.pools[p.pool].name, p.nodes): p.tokens_per_s
        for p in curves.points
        if p.usable
    }


def jobs_of(scenario: Scenario, arrivals: list[Arrival], speeds: Speeds) -> list[Job]:
    first = scenario.pools[0]["name"]
    made = []
    for a in arrivals:
        template = scenario.templates[a.template]
        fixed_nodes = template.fixed_gpus // GPUS_PER_NODE
        tokens = a.hours_at_fixed * 3600 * speeds[a.template, first, fixed_nodes]
        gpu_h = a.hours_at_fixed * template.fixed_gpus
        made.append(Job(a.name, a.template, template.kind, a.at_s, tokens, gpu_h, left=tokens))
    return made


def advance(jobs: list[Job], cluster: Cluster, now_s: float, until_s: float) -> None:
    for job in jobs:
        if not job.running:
            continue
        training_s = max(until_s - max(now_s, job.paused_until_s), 0.0)
        job.left -= job.tokens_per_s * training_s
        held_s = len(job.nodes) * GPUS_PER_NODE * (until_s - now_s)
        job.gpu_s += held_s
        if cluster.pods(job.nodes) > 1:
            job.cross_pod_gpu_s += held_s


def next_finish(jobs: list[Job], now_s: float) -> tuple[float, Job | None]:
    best: tuple[float, Job | None] = (float("inf"), None)
    for job in jobs:
        if job.running and job.tokens_per_s > 0:
            at = max(now_s, job.paused_until_s) + max(job.left, 0.0) / job.tokens_per_s
            best = min(best, (at, job), key=lambda b: b[0])
    return best


def fail(failure: Failure, jobs: list[Job], cluster: Cluster, scenario: Scenario) -> bool:
    """The node goes down; its job, if any, loses half a checkpoint interval of training."""
    cluster.down[failure.pool].add(failure.node)
    for job in jobs:
        if job.running and job.pool == failure.pool and failure.node in job.nodes:
            lost_s = (scenario.checkpoint_minutes or 0.0) * 60 / 2
            job.left = min(job.left + lost_s * job.tokens_per_s, job.tokens)
            job.failed = True
            return True
    return False


def replay(
    scenario: Scenario, jobs: list[Job], failures: list[Failure], policy: Policy
) -> tuple[list[Job], int]:
    """Every event in time order, the policy called after each; the failures that hit a job."""
    cluster = Cluster(scenario, {pool["name"]: set() for pool in scenario.pools})
    pending = sorted(jobs, key=lambda j: j.arrival_s)
    to_fail, repairs = sorted(failures, key=lambda f: f.at_s), []
    present: list[Job] = []
    now_s, hits = 0.0, 0
    while pending or present:
        finish_at, finishing = next_finish(present, now_s)
        times = {
            "finish": finish_at,
            "repair": repairs[0].repaired_s if repairs else float("inf"),
            "failure": to_fail[0].at_s if to_fail else float("inf"),
            "arrival": pending[0].arrival_s if pending else float("inf"),
        }
        event = min(times, key=lambda k: times[k])
        if times[event] == float("inf"):
            break  # nothing runs and nothing arrives: the rest cannot be served
        advance(present, cluster, now_s, times[event])
        now_s = times[event]
        if event == "finish" and finishing is not None:
            finishing.finish_s, finishing.pool, finishing.nodes = now_s, None, []
            present.remove(finishing)
        elif event == "repair":
            repaired = repairs.pop(0)
            cluster.down[repaired.pool].discard(repaired.node)
        elif event == "failure":
            failure = to_fail.pop(0)
            hits += fail(failure, present, cluster, scenario)
            repairs = sorted([*repairs, failure], key=lambda f: f.repaired_s)
        else:
            present.append(pending.pop(0))
        policy.schedule(present, cluster, now_s)
    return jobs, hits


def _release_failed(jobs: list[Job], now_s: float) -> None:
    """FCFS and greedy stop a job whose node failed; it waits in its arrival place."""
    for job in jobs:
        if job.failed:
            job.pool, job.nodes, job.failed = None, [], False
            job.restarts += 1


def _seat(
    job: Job, pool: str, nodes: list[int], speed: float, now_s: float, restart_s: float
) -> None:
    """The job runs on `nodes`; one that ran before and was stopped restarts first."""
    if not job.running and job.started_s is not None:
        job.paused_until_s = now_s + restart_s
    job.pool, job.nodes, job.tokens_per_s = pool, nodes, speed
    job.started_s = now_s if job.started_s is None else job.started_s


Choice = tuple[float, str, int]  # tokens/s, pool, nodes


@dataclass
class Queue:
    """Waiting jobs seated in arrival order and kept where seated: FCFS gives each its fixed
    size on the fastest pool with room, the head of the queue blocking the rest; elastic
    greedy gives each the size of its choices that trains fastest on the free nodes, and a job
    that finds no room lets the ones behind it backfill."""

    scenario: Scenario
    speeds: Speeds
    elastic: bool

    @property
    def name(self) -> str:
        return "greedy, elastic with backfill" if self.elastic else "FCFS, fixed size and layout"

    def schedule(self, jobs: list[Job], cluster: Cluster, now_s: float) -> None:
        _release_failed(jobs, now_s)
        free = cluster.free(jobs)
        restart_s = self.scenario.restart_minutes * 60
        for job in sorted(jobs, key=lambda j: j.arrival_s):
            if job.running:
                continue
            choice = self.choose(job, free)
            if choice is None and not self.elastic:
                return
            if choice is not None:
                speed, pool, nodes = choice
                _seat(job, pool, free[pool][:nodes], speed, now_s, restart_s)
                free[pool] = free[pool][nodes:]

    def choose(self, job: Job, free: dict[str, list[int]]) -> Choice | None:
        """The fastest (tokens/s, pool, nodes) of the job's sizes with room, if any."""
        template = self.scenario.templates[job.template]
        sizes = template.node_counts if self.elastic else (template.fixed_gpus // GPUS_PER_NODE,)
        fits = [(self.speeds.get((job.template, p, n), 0.0), p, n) for p in free for n in sizes]
        room = [fit for fit in fits if fit[0] > 0 and len(free[fit[1]]) >= fit[2]]
        return max(room) if room else None


def fcfs(scenario: Scenario, speeds: Speeds) -> Queue:
    return Queue(scenario, speeds, elastic=False)


def greedy(scenario: Scenario, speeds: Speeds) -> Queue:
    return Queue(scenario, speeds, elastic=True)


class Planner:
    """Calls the planner, in process or over HTTP, on the jobs present."""

    def __init__(
        self, scenario: Scenario, url: str | None, objective: str, time_limit_s: float
    ) -> None:
        self.scenario = scenario
        self.client = None if url is None else Client(url, read_timeout_s=120)
        self.objective, self.time_limit_s = objective, time_limit_s
        self.name = f"planner ({objective})"
        self.walls: list[float] = []

    def body(self, jobs: list[Job], cluster: Cluster) -> dict[str, Any]:
        entries = []
        for job in jobs:
            template = self.scenario.templates[job.template]
            entry: dict[str, Any] = {
                "name": job.name,
                "request": template.request(),
                "node_counts": list(template.node_counts),
                "restart_minutes": self.scenario.restart_minutes,
            }
            if self.scenario.checkpoint_minutes is not None:
                entry["checkpoint_minutes"] = self.scenario.checkpoint_minutes
            if job.running:
                entry["running"] = {"pool": job.pool, "nodes": job.nodes}
            entries.append(entry)
        pools = [
            pool | {"unavailable_nodes": sorted(cluster.down[pool["name"]])}
            for pool in self.scenario.pools
        ]
        return {
            "cluster": {"pools": pools},
            "jobs": entries,
            "objective": self.objective,
            "time_limit_s": self.time_limit_s,
            "explain": False,
        }

    def ask(self, body: dict[str, Any]) -> PlanOut:
        start = time.perf_counter()
        if self.client is not None:
            answer = self.client.plan(body)
        else:
            request = PlanRequestIn.model_validate(body)
            answer = plan_out(plan(request.to_problem(), request.settings(self.time_limit_s)))
        self.walls.append(time.perf_counter() - start)
        return answer

    def schedule(self, jobs: list[Job], cluster: Cluster, now_s: float) -> None:
        if not jobs:
            return
        answer = self.ask(self.body(jobs, cluster))
        by_name = {j.name: j for j in jobs}
        for planned in answer.jobs:
            job = by_name[planned.name]
            job.failed = False
            if planned.pool is None:
                job.restarts += job.running  # stopped: it checkpoints and waits
                job.pool, job.nodes = None, []
                continue
            moved = planned.change in ("moves", "resizes")
            job.restarts += moved
            restart_s = self.scenario.restart_minutes * 60
            _seat(job, planned.pool, list(planned.nodes), planned.tokens_per_s, now_s, restart_s)
            if moved:
                job.paused_until_s = now_s + restart_s


def summary(name: str, jobs: list[Job], scenario: Scenario, hits: int) -> dict[str, Any]:
    done = [j for j in jobs if j.finish_s is not None]
    jct_h = sorted((j.finish_s - j.arrival_s) / 3600 for j in done if j.finish_s is not None)
    end_s = max((j.finish_s or 0.0) for j in done) if done else 0.0
    row: dict[str, Any] = {
        "policy": name,
        "finished": f"{len(done)}/{len(jobs)}",
        "mean JCT h": statistics.mean(jct_h) if jct_h else float("nan"),
        "p95 JCT h": _p95(jct_h),
        "makespan h": end_s / 3600,
        "GPU utilisation": sum(j.gpu_s for j in jobs) / (scenario.gpus * end_s) if end_s else 0.0,
        "goodput": sum(j.reference_gpu_h for j in done) * 3600 / (scenario.gpus * end_s)
        if end_s
        else 0.0,
        "restarts a job": sum(j.restarts for j in jobs) / len(jobs),
    }
    if any(j.kind == "eval" for j in jobs):
        waits = sorted(
            ((j.started_s if j.started_s is not None else end_s) - j.arrival_s) / 3600
            for j in jobs
            if j.kind == "eval"
        )
        pretrain = [
            ((j.finish_s or 0.0) - j.arrival_s) / 3600 for j in done if j.kind == "pretrain"
        ]
        row["eval queue p95 h"] = _p95(waits)
        row["pretrain mean JCT h"] = statistics.mean(pretrain) if pretrain else float("nan")
        held = sum(j.gpu_s for j in jobs)
        row["cross-pod GPU-h share"] = sum(j.cross_pod_gpu_s for j in jobs) / held if held else 0.0
        row["failures hitting a job"] = hits
    return row


def _p95(values: list[float]) -> float:
    return values[int(0.95 * (len(values) - 1))] if values else float("nan")


def fresh(jobs: list[Job]) -> list[Job]:
    return [
        Job(j.name, j.template, j.kind, j.arrival_s, j.tokens, j.reference_gpu_h, left=j.tokens)
        for j in jobs
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="small", choices=sorted(SCENARIOS))
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--objective", default="fairness", choices=("throughput", "fairness"))
    parser.add_argument("--time-limit-s", type=float, default=5.0, help="each plan's")
    parser.add_argument(
        "--failures-x", type=float, default=1.0, help="times the scenario's failure rate"
    )
    parser.add_argument("--url", help="a running `layoutopt serve` (default: in process)")
    parser.add_argument("--write", action="store_true", help="into docs/performance.md")
    args = parser.parse_args()
    scenario = SCENARIOS[args.scenario]
    start = time.perf_counter()
    speeds = speeds_of(scenario)
    jobs = jobs_of(scenario, scenario.arrivals(args.jobs, args.seed), speeds)
    failures = scenario.failures(args.seed, args.failures_x)
    planner = Planner(scenario, args.url, args.objective, args.time_limit_s)
    rows = []
    for policy in (fcfs(scenario, speeds), greedy(scenario, speeds), planner):
        replayed, hits = replay(scenario, fresh(jobs), failures, policy)
        rows.append(summary(policy.name, replayed, scenario, hits))
    lines = _report(args, scenario, rows, planner.walls, len(failures), time.perf_counter() - start)
    publish(section(scenario, args.failures_x), lines, args.write)


def section(scenario: Scenario, failures_x: float) -> str:
    """The report's heading for this scenario at this failure rate."""
    rate = "" if failures_x == 1 else f", at {failures_x:g}x the failure rate"
    return SECTIONS[scenario.name] + rate


def _report(
    args: argparse.Namespace,
    scenario: Scenario,
    rows: list[dict[str, Any]],
    walls: list[float],
    failures: int,
    wall_s: float,
) -> list[str]:
    where = "in process" if args.url is None else f"over HTTP ({args.url})"
    command = (
        f"`.venv/bin/python -m bench.simulate --scenario {scenario.name} --jobs {args.jobs} "
        f"--seed {args.seed} --objective {args.objective} --failures-x {args.failures_x:g}`"
    )
    pools = ", ".join(f"{p['name']} {p['nodes'] * p['gpus_per_node']:,}" for p in scenario.pools)
    lines = [
        f"{machine_line()}. Rerun: {command}.",
        "",
        f"{args.jobs} jobs (seed {args.seed}) arriving on {scenario.gpus:,} GPUs ({pools}; "
        f"racks of {scenario.pools[0]['nodes_per_rack']} nodes"
        + (
            f", pods of {scenario.nodes_per_pod * GPUS_PER_NODE:,} GPUs"
            if scenario.nodes_per_pod
            else ""
        )
        + f"); {failures} node failures ({args.failures_x:g}x the scenario's rate); planner {where}, objective {args.objective}, "
        f"{args.time_limit_s:g} s limit, restart {scenario.restart_minutes:g} min: "
        f"{len(walls)} plans, median {statistics.median(walls):.2f} s, "
        f"p95 {_p95(sorted(walls)):.2f} s, max {max(walls):.2f} s; {wall_s:.0f} s in all "
        "(scaling curves included).",
        "",
    ]
    keys = list(rows[0])
    lines += ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    for row in rows:
        cells = (f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values())
        lines.append("| " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    main()
