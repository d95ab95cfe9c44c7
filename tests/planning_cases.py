"""Builders for the planner's tests: seeded random small clusters and jobs with synthetic
scaling curves (no optimize calls), and checks every plan must pass."""

from __future__ import annotations

import random
from dataclasses import replace

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer import Request
from optimizer.planning import (
    Curves,
    Deadline,
    PlanJob,
    PlanProblem,
    PlanResult,
    Pool,
    Running,
    given_curves,
)
from optimizer.planning.options import OptionTable

REQUEST_GPU = gpu_preset("h100-sxm")
# a plan's job: its cluster is where it starts, each scaling-curve point moves it
REQUEST = Request(
    TrainingJob(
        model=model_preset("llama3-8b"),
        cluster=ClusterSpec(gpus=8, gpu=REQUEST_GPU),
        training=TrainingSpec(),
    ),
    profile="workshop",
    engine=None,
)


def _pools(rng: random.Random) -> tuple[Pool, ...]:
    """16 nodes in two pools with racks of 4; one pool may have NVLink domains of 2 nodes."""
    first = rng.choice((8, 12))
    domain = rng.random() < 0.3
    down = frozenset(rng.sample(range(first), rng.randint(0, 2)))
    a = Pool("h100", gpu_preset("h100-sxm"), first, 8, None, 4, down)
    b = Pool(
        "gb200",
        gpu_preset("gb200"),
        16 - first,
        4,
        8 if domain else None,
        4,
        frozenset(rng.sample(range(16 - first), rng.randint(0, 1))),
    )
    return a, b


def _running(rng: random.Random, pools: tuple[Pool, ...], taken: set) -> Running | None:
    if rng.random() < 0.5:
        return None
    pool = rng.choice(pools)
    size = rng.choice((1, 2, 2, 4))
    start = rng.randrange(0, max(pool.nodes - size, 0) + 1)
    nodes = tuple(range(start, min(start + size, pool.nodes)))
    if any((pool.name, n) in taken for n in nodes):
        return None
    taken.update((pool.name, n) for n in nodes)
    return Running(pool.name, nodes)


def random_instance(seed: int, objective: str = "throughput") -> tuple[PlanProblem, Curves]:
    rng = random.Random(seed)
    pools = _pools(rng)
    taken: set = set()
    jobs = []
    for k in range(3):
        running = _running(rng, pools, taken)
        jobs.append(
            PlanJob(
                f"job{k}",
                REQUEST,
                weight=rng.choice((1.0, 1.0, 2.0, 3.0)),
                min_gpus=rng.choice((1, 8, 16, 32)),
                max_gpus=rng.choice((None, 32, 64)),
                node_counts=tuple(range(1, 13)),
                movable=rng.random() < 0.8,
                resizable=rng.random() < 0.8,
                preemptible=rng.random() < 0.7,
                running=running,
                restart_minutes=rng.choice((0.0, 5.0, 20.0)),
                deadline=Deadline(rng.uniform(1e8, 2e9), rng.uniform(5, 48))
                if rng.random() < 0.7
                else None,
            )
        )
    problem = PlanProblem(pools, tuple(jobs), objective)  # type: ignore[arg-type]
    table = {}
    for job in jobs:
        alpha = rng.uniform(0.6, 1.0)
        for pool in pools:
            speed = rng.uniform(0.8, 3.0)
            for n in range(1, pool.nodes + 1):
                if rng.random() < 0.12:
                    continue  # no layout at this count
                gpus = n * pool.gpus_per_node
                table[job.name, pool.name, n] = round(1000 * speed * gpus**alpha, 3)
    return problem, given_curves(problem, table)


def with_objective(problem: PlanProblem, objective: str) -> PlanProblem:
    return replace(problem, objective=objective)  # type: ignore[arg-type]


def check_plan(problem: PlanProblem, result: PlanResult) -> None:
    """What every plan must be: node ids real, available, disjoint, whole; pinned jobs on
    their nodes; jobs that must run running."""
    seen: set[tuple[str, int]] = set()
    for job, planned in zip(problem.jobs, result.jobs, strict=True):
        assert planned.name == job.name
        if job.must_run:
            assert planned.pool is not None, job.name
        if job.pinned and job.running is not None:
            assert planned.pool == job.running.pool
            assert set(planned.nodes) == set(job.running.nodes)
        if planned.pool is None:
            assert planned.gpus == 0 and not planned.nodes
            continue
        pool = next(p for p in problem.pools if p.name == planned.pool)
        if problem.assign_nodes:
            assert len(planned.nodes) * pool.gpus_per_node == planned.gpus
        for node in planned.nodes:
            assert 0 <= node < pool.nodes and node not in pool.unavailable
            assert (pool.name, node) not in seen
            seen.add((pool.name, node))


def choice_of(problem: PlanProblem, table: OptionTable, result: PlanResult) -> tuple[int, ...]:
    """The option index each job of `result` runs in."""
    choice = []
    for j, planned in enumerate(result.jobs):
        pools = [p.name for p in problem.pools]
        for o, option in enumerate(table.options[j]):
            pool = None if option.pool is None else pools[option.pool]
            same = (pool, option.gpus) == (planned.pool, planned.gpus)
            if same and option.stays == (planned.change == "stays"):
                choice.append(o)
                break
    return tuple(choice)


def twin_instance(seed: int, objective: str = "throughput") -> tuple[PlanProblem, Curves]:
    """Three identical waiting jobs (same request, weight and curve) on two pools of
    identical racks: every plan has copies, which only the tie-break tells apart."""
    rng = random.Random(seed)
    pools = (
        Pool("h100", gpu_preset("h100-sxm"), 16, 8, None, 4),
        Pool("b200", gpu_preset("b200"), 8, 8, None, 4),
    )
    jobs = tuple(PlanJob(f"twin{k}", REQUEST, node_counts=(1, 2, 4, 8)) for k in range(3))
    problem = PlanProblem(pools, jobs, objective)  # type: ignore[arg-type]
    table = {}
    for pool, speed in zip(pools, (1.0, rng.uniform(1.5, 2.5)), strict=True):
        for n in (1, 2, 4, 8):
            for job in jobs:
                table[job.name, pool.name, n] = 1000 * speed * n**0.9
    return problem, given_curves(problem, table)


def large_instance(jobs: int = 8, nodes: int = 1024, seed: int = 1) -> tuple[PlanProblem, Curves]:
    """Two pools of `nodes` nodes (16,384 GPUs at 1,024 each), racks of 16, three nodes
    down; three jobs running; synthetic concave curves at every power-of-two count."""
    rng = random.Random(seed)
    pools = (
        Pool(
            "h100",
            gpu_preset("h100-sxm"),
            nodes,
            8,
            None,
            16,
            frozenset({5, nodes // 13, nodes // 3}),
        ),
        Pool("b200", gpu_preset("b200"), nodes, 8, None, 16),
    )
    planned = []
    for k in range(jobs):
        running = None
        if k < 3:  # at 1,024 nodes: 32 nodes each from 100, 164, 228
            first, size = nodes * 100 // 1024 + k * nodes // 16, nodes // 32
            running = Running("h100", tuple(range(first, first + size)))
        weight = rng.choice((1.0, 2.0))
        planned.append(
            PlanJob(f"job{k}", REQUEST, weight, 8 * rng.choice((1, 4, 16)), running=running)
        )
    problem = PlanProblem(pools, tuple(planned))
    table = {}
    for job in planned:
        alpha = rng.uniform(0.7, 0.95)
        for pool, speed in zip(pools, (1.0, 2.2), strict=True):
            for n in range(1, nodes + 1):
                table[job.name, pool.name, n] = (
                    1000 * speed * rng.uniform(0.9, 1.1) * (8 * n) ** alpha
                )
    return problem, given_curves(problem, table)
