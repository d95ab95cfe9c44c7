"""A small scheduler simulator: a seeded trace of job arrivals replayed against a cluster,
the planner called on every arrival and completion (in this process, or over HTTP on a
real server with `--url`), beside first-come-first-served with a fixed size and layout per
job. Reports job completion times and GPU utilisation.

    .venv/bin/python -m bench.simulate                  # 30 jobs, seed 1, in-process
    .venv/bin/python -m bench.simulate --url http://127.0.0.1:8000 --jobs 20

The planner sees each running job where it runs (movable, resizable, a restart cost), so a
replan moves a job only when the objective pays for the lost minutes. A job's progress is
its plan's tokens/s; a moved or resized job trains nothing for its restart minutes. FCFS
gives each job, in arrival order, its requested GPUs on the first pool with room (the
faster first), at the best layout for that size, and never changes it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from api.client import Client
from api.schemas import PlanOut, PlanRequestIn, plan_out
from bench.report import machine_line, publish
from optimizer.planning import plan

POOLS = [
    {"name": "h100", "gpu": "h100-sxm", "nodes": 32, "gpus_per_node": 8, "nodes_per_rack": 8},
    {"name": "a100", "gpu": "a100-80gb", "nodes": 32, "gpus_per_node": 8, "nodes_per_rack": 8},
]
# model, global batch, sequence, the GPUs FCFS gives it, the node counts the planner prices
TEMPLATES = [
    ("llama3-8b", 256, 8192, 32, [1, 2, 4, 8]),
    ("mistral-7b", 512, 4096, 64, [2, 4, 8, 16]),
    ("llama3-70b", 512, 8192, 128, [8, 16, 32]),
    ("qwen2.5-72b", 256, 8192, 128, [8, 16]),
]
RESTART_MINUTES = 5.0
GPUS_PER_NODE = 8
SECTION = "## Scheduler simulation"


@dataclass
class Job:
    name: str
    template: int
    arrival_s: float
    tokens: float
    left: float = 0.0
    pool: str | None = None
    nodes: list[int] = field(default_factory=list)
    tokens_per_s: float = 0.0
    paused_until_s: float = 0.0
    finish_s: float | None = None
    restarts: int = 0
    gpu_s: float = 0.0  # GPU-seconds held, paused or not

    def request(self) -> dict[str, Any]:
        model, batch, seq, fixed, counts = TEMPLATES[self.template]
        return {"model": model, "training": {"global_batch": batch, "seq_len": seq}}


def trace(jobs: int, seed: int, fcfs_speed: dict[int, float]) -> list[Job]:
    """Poisson arrivals (mean gap 20 minutes); each job's work is 1-6 hours at its FCFS
    size on H100."""
    rng = random.Random(seed)
    clock, made = 0.0, []
    for k in range(jobs):
        clock += rng.expovariate(1 / 1200)
        t = rng.randrange(len(TEMPLATES))
        hours = rng.uniform(1, 6)
        made.append(Job(f"job{k:02d}", t, clock, hours * 3600 * fcfs_speed[t]))
    return made


class Planner:
    """Calls the planner, in process or over HTTP, on the jobs present."""

    def __init__(self, url: str | None, objective: str, time_limit_s: float) -> None:
        self.client = None if url is None else Client(url, read_timeout_s=120)
        self.objective, self.time_limit_s = objective, time_limit_s
        self.walls: list[float] = []

    def body(self, jobs: list[Job]) -> dict[str, Any]:
        entries = []
        for job in jobs:
            model, batch, seq, fixed, counts = TEMPLATES[job.template]
            entry: dict[str, Any] = {
                "name": job.name,
                "request": job.request(),
                "node_counts": counts,
                "restart_minutes": RESTART_MINUTES,
            }
            if job.pool is not None:
                entry["running"] = {"pool": job.pool, "nodes": job.nodes}
            entries.append(entry)
        return {
            "cluster": {"pools": POOLS},
            "jobs": entries,
            "objective": self.objective,
            "time_limit_s": self.time_limit_s,
            "explain": False,
        }

    def __call__(self, jobs: list[Job]) -> PlanOut:
        body = self.body(jobs)
        start = time.perf_counter()
        if self.client is not None:
            answer = self.client.plan(body)
        else:
            request = PlanRequestIn.model_validate(body)
            answer = plan_out(plan(request.to_problem(), request.settings(self.time_limit_s)))
        self.walls.append(time.perf_counter() - start)
        return answer


def advance(jobs: list[Job], now_s: float, until_s: float) -> None:
    for job in jobs:
        if job.pool is None or job.finish_s is not None:
            continue
        training_s = max(until_s - max(now_s, job.paused_until_s), 0.0)
        job.left -= job.tokens_per_s * training_s
        job.gpu_s += len(job.nodes) * GPUS_PER_NODE * (until_s - now_s)


def next_finish(jobs: list[Job], now_s: float) -> tuple[float, Job | None]:
    best: tuple[float, Job | None] = (float("inf"), None)
    for job in jobs:
        if job.pool is not None and job.tokens_per_s > 0 and job.finish_s is None:
            at = max(now_s, job.paused_until_s) + max(job.left, 0.0) / job.tokens_per_s
            best = min(best, (at, job), key=lambda b: b[0])
    return best


def apply(answer: PlanOut, jobs: list[Job], now_s: float) -> None:
    by_name = {j.name: j for j in jobs}
    for planned in answer.jobs:
        job = by_name[planned.name]
        if planned.change in ("moves", "resizes"):
            job.paused_until_s, job.restarts = now_s + RESTART_MINUTES * 60, job.restarts + 1
        job.pool, job.nodes, job.tokens_per_s = (
            planned.pool,
            list(planned.nodes),
            planned.tokens_per_s,
        )


def run_planner(trace_jobs: list[Job], planner: Planner) -> list[Job]:
    pending = sorted(trace_jobs, key=lambda j: j.arrival_s)
    for job in pending:
        job.left = job.tokens
    active: list[Job] = []
    now_s = 0.0
    while pending or active:
        arrival = pending[0].arrival_s if pending else float("inf")
        finish_at, finishing = next_finish(active, now_s)
        until = min(arrival, finish_at)
        if until == float("inf"):
            break  # nothing runs and nothing arrives: the rest cannot be served
        advance(active, now_s, until)
        now_s = until
        if finishing is not None and finish_at <= arrival:
            finishing.finish_s, finishing.pool, finishing.nodes = now_s, None, []
            active.remove(finishing)
        else:
            active.append(pending.pop(0))
        if active:
            apply(planner(active), active, now_s)
    return trace_jobs


def fcfs_speeds() -> dict[tuple[int, str], float]:
    """Each template's tokens/s at its FCFS size on each pool, at the best layout for that
    size (the fixed layout FCFS runs it with), priced as the planner prices its curves."""
    from optimizer.planning import build_curves

    jobs = []
    for t, (_, _, _, fixed, _) in enumerate(TEMPLATES):
        job = Job(f"t{t}", t, 0.0, 0.0)
        jobs.append(
            {"name": job.name, "request": job.request(), "node_counts": [fixed // GPUS_PER_NODE]}
        )
    request = PlanRequestIn.model_validate({"cluster": {"pools": POOLS}, "jobs": jobs})
    problem = request.to_problem()
    curves = build_curves(problem, request.settings(60.0), time.perf_counter() + 600)
    return {(p.job, problem.pools[p.pool].name): p.tokens_per_s for p in curves.points}


def run_fcfs(trace_jobs: list[Job], speeds: dict[tuple[int, str], float]) -> list[Job]:
    """Strict first-come-first-served: the head of the queue waits until its GPUs are free."""
    free = {pool["name"]: list(range(pool["nodes"])) for pool in POOLS}
    queue = sorted(trace_jobs, key=lambda j: j.arrival_s)
    for job in queue:
        job.left = job.tokens
    arrived: list[Job] = []
    running: list[Job] = []
    now_s = 0.0
    while queue or arrived or running:
        arrival = queue[0].arrival_s if queue else float("inf")
        finish_at, finishing = next_finish(running, now_s)
        until = min(arrival, finish_at)
        if until == float("inf"):
            break
        advance(running, now_s, until)
        now_s = until
        if finishing is not None and finish_at <= arrival:
            finishing.finish_s = now_s
            free[finishing.pool or ""] += finishing.nodes
            finishing.pool, finishing.nodes = None, []
            running.remove(finishing)
        else:
            arrived.append(queue.pop(0))
        while arrived and _start(arrived[0], free, speeds):
            running.append(arrived.pop(0))
    return trace_jobs


def _start(job: Job, free: dict[str, list[int]], speeds: dict[tuple[int, str], float]) -> bool:
    nodes = TEMPLATES[job.template][3] // GPUS_PER_NODE
    pools = sorted(free, key=lambda p: -speeds.get((job.template, p), 0.0))
    for pool in pools:
        if speeds.get((job.template, pool), 0.0) > 0 and len(free[pool]) >= nodes:
            job.pool, job.nodes = pool, sorted(free[pool])[:nodes]
            free[pool] = [n for n in free[pool] if n not in job.nodes]
            job.tokens_per_s = speeds[job.template, pool]
            return True
    return False


def summary(name: str, jobs: list[Job]) -> dict[str, Any]:
    done = [j for j in jobs if j.finish_s is not None]
    jct_h = sorted((j.finish_s - j.arrival_s) / 3600 for j in done if j.finish_s is not None)
    end_s = max((j.finish_s or 0.0) for j in done) if done else 0.0
    gpus = sum(pool["nodes"] * GPUS_PER_NODE for pool in POOLS)
    return {
        "policy": name,
        "finished": f"{len(done)}/{len(jobs)}",
        "mean JCT h": statistics.mean(jct_h) if jct_h else float("nan"),
        "median JCT h": statistics.median(jct_h) if jct_h else float("nan"),
        "p95 JCT h": jct_h[int(0.95 * (len(jct_h) - 1))] if jct_h else float("nan"),
        "makespan h": end_s / 3600,
        "GPU utilisation": sum(j.gpu_s for j in jobs) / (gpus * end_s) if end_s else 0.0,
        "restarts": sum(j.restarts for j in jobs),
    }


def fresh(jobs: list[Job]) -> list[Job]:
    return [Job(j.name, j.template, j.arrival_s, j.tokens) for j in jobs]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--objective", default="fairness", choices=("throughput", "fairness"))
    parser.add_argument("--time-limit-s", type=float, default=5.0, help="each plan's")
    parser.add_argument("--url", help="a running `layoutopt serve` (default: in process)")
    parser.add_argument("--write", action="store_true", help="into docs/performance.md")
    args = parser.parse_args()
    start = time.perf_counter()
    speeds = fcfs_speeds()
    base = {t: speeds.get((t, "h100"), 0.0) for t in range(len(TEMPLATES))}
    jobs = trace(args.jobs, args.seed, base)
    planner = Planner(args.url, args.objective, args.time_limit_s)
    rows = [summary("FCFS, fixed size and layout", run_fcfs(fresh(jobs), speeds))]
    rows.append(summary(f"planner ({args.objective})", run_planner(fresh(jobs), planner)))
    lines = _report(args, rows, planner.walls, time.perf_counter() - start)
    publish(SECTION, lines, args.write)


def _report(
    args: argparse.Namespace, rows: list[dict[str, Any]], walls: list[float], wall_s: float
) -> list[str]:
    gpus = sum(p["nodes"] for p in POOLS) * GPUS_PER_NODE
    where = "in process" if args.url is None else f"over HTTP ({args.url})"
    command = (
        f"`.venv/bin/python -m bench.simulate --jobs {args.jobs} --seed {args.seed} "
        f"--objective {args.objective}`"
    )
    lines = [
        f"{machine_line()}. Rerun: {command}.",
        "",
        f"{args.jobs} jobs (seed {args.seed}) arriving on {gpus} GPUs "
        f"({', '.join(p['name'] for p in POOLS)}, racks of 8 nodes); planner {where}, objective "
        f"{args.objective}, {args.time_limit_s:g} s limit, restart {RESTART_MINUTES:g} min: "
        f"{len(walls)} plans, median {statistics.median(walls):.2f} s, max {max(walls):.2f} s; "
        f"{wall_s:.0f} s in all (scaling curves included).",
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
