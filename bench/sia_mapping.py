"""Sia's scheduling round as a plan problem, and the plan back as Sia's allocations: the pure
half of the harness that runs the planner inside Sia's simulator (bench/sia_simulator.py).
Nothing here imports Sia; the shapes are those its `SiaPolicy.optimize(job_infos,
node_infos, prev_allocs)` takes and returns (sia-simulator's sia.py, cluster.py).

Sia's cluster is GPU types of identical nodes; a job gets GPUs of one type, a whole node's
or a part of one (Sia's configurations: 1, 2, 4 GPUs on one node, or whole nodes). The
planner gives whole nodes, so each Sia GPU is one planner node, and each Sia node one rack
of them: the planner's topology term (racks spanned, fewest first) keeps a job on as few Sia
nodes as it can, and its node ids name Sia's nodes (`gpu // gpus_per_node`).

Sia's objective is the sum over jobs of g^p (g: the job's goodput normalised to its
smallest configuration's, p = -0.5), minimised, plus lambda_n (1.1) for each job given
nothing. The planner's `fairness` objective is the sum of w * (T / T_alone)^p, with
1.1 * w * (T_least / T_alone)^p for nothing: with T = g and w = g_alone^p the two are the
same sum, term by term (`sia_weight`). Sia scales a changed configuration's goodput by a
restart factor (its restart delay, its age, its past restarts); the planner takes a
restart's loss as seconds off its horizon (`PlanProblem.horizon_minutes`): `restart_s`,
the horizon times one minus that factor, makes a restart weigh the same in both.

Sia's solver is not given g^p itself but g^p rounded to two decimals and capped at 3,000
(`__power_up_speedup_matrix`): near-equal configurations are ties to it, and which of them
it takes moves which GPU types a job is profiled on next (its goodput model is fitted
online from where it ran). `sia_rounded` hands the planner the goodput whose g^p is that
rounded figure, so that both solvers minimise the same coefficients; the one difference
left is the restart factor f, which Sia applies before rounding (round((f g)^p)) and the
planner after (f^p round(g^p)), at most 0.005 f^p a job apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from models.hardware import GpuSpec
from optimizer.planning import JobPlan, MeasuredThroughput, PlanJob, Pool, Running

SIA_P = -0.5  # the fairness exponent Sia runs with (run_experiment.sh)
SIA_DECIMALS = 2  # sia.py rounds each g^p to two decimals before its solver sees it
SIA_CLIP = 3000.0  # ... and caps it there (simulator_config.sia_goodput_clip_val)

# A placeholder accelerator: jobs that bring their goodput are priced from it alone, so the
# cost model never reads these figures; the GPU type's name is what the tables key on.
_UNPRICED = {"memory_gb": 1.0, "peak_tflops": 1.0, "intra_node_gb_s": 1.0, "inter_node_gb_s": 1.0}

# Sia's allocation of one job: (GPU type, one node index per GPU), or (None, ()) for none.
SiaAllocation = tuple[str | None, tuple[int, ...]]
# GPU type -> (nodes, GPUs a node)
SiaCluster = Mapping[str, tuple[int, int]]


@dataclass(frozen=True)
class SiaJob:
    """What the planner needs of one of Sia's job infos: its normalised goodput per GPU type
    and GPU count (Sia's configurations), what a restart costs it (seconds of the plan's
    horizon), and whether Sia keeps it where it is this round (it is checkpointing or
    restoring: `scaling_underway`)."""

    name: str
    goodput: Mapping[str, Mapping[int, float]]
    restart_s: float
    pinned: bool = False


def pools_of(cluster: SiaCluster) -> tuple[Pool, ...]:
    """One pool per GPU type: a planner node per GPU, a rack per Sia node."""
    return tuple(
        Pool(
            name=gpu_type,
            gpu=GpuSpec(name=gpu_type, **_UNPRICED),
            nodes=nodes * per_node,
            gpus_per_node=1,
            nodes_per_rack=per_node,
        )
        for gpu_type, (nodes, per_node) in cluster.items()
    )


def gpu_slots(allocations: Mapping[str, SiaAllocation], cluster: SiaCluster) -> dict[str, Running]:
    """Each allocated job's GPUs as planner node ids: a Sia node's GPUs numbered from
    `node * gpus_per_node`, handed out in job-name order. ValueError when a node is given
    more GPUs than it has (an allocation Sia's cluster could not hold)."""
    used: dict[tuple[str, int], int] = {}
    running = {}
    for name in sorted(allocations):
        gpu_type, nodes = allocations[name]
        if gpu_type is None or not nodes:
            continue
        per_node = cluster[gpu_type][1]
        slots = []
        for node in nodes:
            taken = used.get((gpu_type, node), 0)
            if taken >= per_node:
                raise ValueError(f"node {node} of {gpu_type} is given more than {per_node} GPUs")
            used[(gpu_type, node)] = taken + 1
            slots.append(node * per_node + taken)
        running[name] = Running(gpu_type, tuple(sorted(slots)))
    return running


def sia_weight(goodput: Mapping[str, Mapping[int, float]]) -> float:
    """w = g_alone^p: the weight that makes the planner's fairness term Sia's (module note)."""
    best = max((g for counts in goodput.values() for g in counts.values()), default=0.0)
    return best**SIA_P if best > 0 else 1.0


def sia_rounded(goodput: Mapping[str, Mapping[int, float]]) -> dict[str, dict[int, float]]:
    """The goodput whose g^p is the coefficient Sia's solver is given: g^p rounded to two
    decimals and capped (module note). A g^p that rounds to 0 (g above 40,000, beyond any
    table Sia builds) is kept at half a step, 0.005, the most the rounding can hide."""
    least = 0.5 * 10.0**-SIA_DECIMALS
    return {
        gpu: {
            n: max(min(round(g**SIA_P, SIA_DECIMALS), SIA_CLIP), least) ** (1.0 / SIA_P)
            for n, g in counts.items()
        }
        for gpu, counts in goodput.items()
    }


def plan_jobs(jobs: Iterable[SiaJob], running: Mapping[str, Running]) -> tuple[PlanJob, ...]:
    """The round's jobs as plan jobs: measured goodput on the counts Sia may give, Sia's
    weight, its restart cost, a pinned job kept on its GPUs."""
    plan = []
    for job in jobs:
        table = {gpu: dict(counts) for gpu, counts in job.goodput.items() if counts}
        now = running.get(job.name)
        pinned = job.pinned and now is not None
        if now is not None and pinned:
            # kept where it is: its own count must be a point of its table, or it has none
            gpus = len(now.nodes)
            table.setdefault(now.pool, {}).setdefault(gpus, _held(job, now.pool, gpus))
        plan.append(
            PlanJob(
                name=job.name,
                request=None,
                weight=sia_weight(table),
                min_gpus=1,  # the counts it may be given are its table's
                movable=not pinned,
                resizable=not pinned,
                preemptible=not pinned,
                running=now,
                restart_minutes=job.restart_s / 60.0,
                measured=MeasuredThroughput.of(table),
            )
        )
    return tuple(plan)


def _held(job: SiaJob, gpu_type: str, gpus: int) -> float:
    """The goodput of a count Sia's table left out (a pinned job's): its nearest below."""
    counts = job.goodput.get(gpu_type, {})
    below = [g for n, g in counts.items() if n <= gpus]
    return max(below, default=1.0)


def allocation_of(
    answer: JobPlan, cluster: SiaCluster, previous: SiaAllocation | None
) -> SiaAllocation:
    """One job's plan as Sia's allocation: a node index per GPU. The previous allocation
    itself when the plan keeps the job on the same GPUs of each node (Sia's cluster counts
    any other tuple as a reallocation, a restart)."""
    if answer.pool is None or not answer.nodes:
        return (None, ())
    per_node = cluster[answer.pool][1]
    nodes = tuple(sorted(gpu // per_node for gpu in answer.nodes))
    if previous is not None and previous[0] == answer.pool and sorted(previous[1]) == list(nodes):
        return previous
    return (answer.pool, nodes)


def place_counts(
    answers: Iterable[JobPlan], cluster: SiaCluster, kept: Mapping[str, SiaAllocation]
) -> dict[str, SiaAllocation]:
    """Allocations from a plan of pools and counts only (`assign_nodes` false, for rounds too
    large to name nodes in): a job that stays keeps its previous allocation; the others,
    largest first, take whole free nodes, then the fullest node that holds the rest (the
    packing Sia's own `alloc_to_placement` aims at)."""
    free = {t: [per_node] * nodes for t, (nodes, per_node) in cluster.items()}
    placed: dict[str, SiaAllocation] = {}
    moving = []
    for answer in answers:
        previous = kept.get(answer.name)
        if answer.pool is None:
            placed[answer.name] = (None, ())
        elif answer.change == "stays" and previous is not None:
            placed[answer.name] = previous
            for node in previous[1]:
                free[answer.pool][node] -= 1
        else:
            moving.append(answer)
    for answer in sorted(moving, key=lambda a: -a.gpus):
        assert answer.pool is not None
        room, per_node = free[answer.pool], cluster[answer.pool][1]
        nodes: list[int] = []
        left = answer.gpus
        for node, gpus in enumerate(room):
            if left >= per_node and gpus == per_node:
                nodes += [node] * per_node
                room[node], left = 0, left - per_node
        while left > 0:
            fits = [n for n, gpus in enumerate(room) if gpus >= left]
            node = (
                min(fits, key=lambda n: room[n])
                if fits
                else max(range(len(room)), key=room.__getitem__)
            )
            take = min(left, room[node])
            if take == 0:
                break  # no GPU left of the type: the plan's capacity rule makes this unreachable
            nodes += [node] * take
            room[node], left = room[node] - take, left - take
        placed[answer.name] = (answer.pool, tuple(sorted(nodes))) if left == 0 else (None, ())
    return placed


def rejected(
    allocations: Mapping[str, SiaAllocation],
    tables: Mapping[str, Mapping[str, Mapping[int, float]]] | None,
    cluster: SiaCluster,
    max_nodes: Mapping[str, int],
) -> list[str]:
    """What Sia's cluster would refuse or have to fix in a round's allocations, one line
    each: a node given more GPUs than it has, a GPU type not in the cluster, a GPU count
    that is not one of the job's configurations, more nodes than the type's physical
    limit (Sia's cluster then re-spreads the job: 'FIXING PLACEMENT'). `tables` None: the
    counts are not checked (a run's log keeps no goodput tables)."""
    problems = []
    used: dict[tuple[str, int], int] = {}
    for name, (gpu_type, nodes) in sorted(allocations.items()):
        if gpu_type is None or not nodes:
            continue
        if gpu_type not in cluster:
            problems.append(f"{name}: GPU type {gpu_type!r} is not in the cluster")
            continue
        count, per_node = cluster[gpu_type]
        if any(not 0 <= n < count for n in nodes):
            problems.append(f"{name}: a node outside {gpu_type}'s 0-{count - 1}")
        for n in nodes:
            used[(gpu_type, n)] = used.get((gpu_type, n), 0) + 1
        if tables is not None and len(nodes) not in tables.get(name, {}).get(gpu_type, {}):
            problems.append(f"{name}: {len(nodes)} GPUs of {gpu_type} is not a configuration")
        if len(set(nodes)) > max_nodes.get(gpu_type, count):
            problems.append(f"{name}: {len(set(nodes))} nodes of {gpu_type}, above its limit")
    for (gpu_type, n), gpus in sorted(used.items()):
        if gpus > cluster[gpu_type][1]:
            problems.append(f"node {n} of {gpu_type} is given {gpus} GPUs")
    return problems


def percentile(values: Sequence[float], q: float) -> float:
    """Sia's print_run_stats percentile: the sorted value at index int(q * n)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]
