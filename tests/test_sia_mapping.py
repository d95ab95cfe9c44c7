"""The pure half of the harness that runs the planner inside Sia's simulator: Sia's round
(job goodput tables, node counts, previous allocations) as a plan problem, and the plan
back as Sia's allocations (a node index per GPU). Inputs are hand-built in Sia's shapes; Sia
itself is not imported. The objective is checked against Sia's, worked out by enumeration."""

from __future__ import annotations

import itertools

import pytest

from bench.sia_mapping import (
    SiaJob,
    allocation_of,
    gpu_slots,
    percentile,
    place_counts,
    plan_jobs,
    pools_of,
    rejected,
    sia_rounded,
    sia_weight,
)
from optimizer.planning import JobPlan, PlanProblem, PlanSettings, Running, plan

CLUSTER = {"aws": (2, 4), "rtx": (1, 8)}  # Sia's shapes: 4-GPU T4 nodes, an 8-GPU node


def test_each_sia_gpu_is_a_planner_node_and_each_sia_node_a_rack() -> None:
    aws, rtx = pools_of(CLUSTER)
    assert (aws.name, aws.nodes, aws.gpus_per_node, aws.rack_nodes, aws.racks) == (
        "aws",
        8,
        1,
        4,
        2,
    )
    assert (rtx.name, rtx.nodes, rtx.rack_nodes, rtx.racks) == ("rtx", 8, 8, 1)
    assert aws.gpu.name == "aws"  # the measured tables key on it


def test_previous_allocations_become_distinct_gpu_ids_node_by_node() -> None:
    previous = {"b": ("aws", (1, 1)), "a": ("aws", (1, 0)), "c": (None, ())}
    running = gpu_slots(previous, CLUSTER)
    # in name order: a takes node 1's first GPU (id 4) and node 0's (id 0); b the next two
    assert running == {"a": Running("aws", (0, 4)), "b": Running("aws", (5, 6))}
    with pytest.raises(ValueError, match="more than 4 GPUs"):
        gpu_slots({"x": ("aws", (0, 0, 0)), "y": ("aws", (0, 0))}, CLUSTER)


def test_sia_weight_is_the_best_goodput_to_the_p() -> None:
    assert sia_weight({"aws": {1: 1.0, 4: 4.0}, "rtx": {8: 2.25}}) == pytest.approx(0.5)


def _sia_objective(
    jobs: list[SiaJob],
    allocations: dict[str, tuple[str | None, int]],
    p: float = -0.5,
    decimals: int | None = None,
) -> float:
    """Sia's __solve_mip_rescaled objective: sum of g^p over allocated jobs, 1.1 a job given
    nothing (its goodputs already normalised to the smallest configuration's); `decimals`:
    each g^p rounded as its solver is given it."""
    total = 0.0
    for job in jobs:
        gpu_type, gpus = allocations[job.name]
        if gpu_type is None:
            total += 1.1
        else:
            term = job.goodput[gpu_type][gpus] ** p
            total += term if decimals is None else round(term, decimals)
    return total


def _best_by_enumeration(jobs: list[SiaJob], decimals: int | None = None) -> float:
    """Sia's objective at its minimum over every combination of one configuration (or
    nothing) per job within each type's GPUs."""
    choices = [
        [(None, 0)] + [(t, n) for t, counts in job.goodput.items() for n in counts] for job in jobs
    ]
    return min(
        _sia_objective(jobs, dict(zip([j.name for j in jobs], combo, strict=True)), -0.5, decimals)
        for combo in itertools.product(*choices)
        if all(
            sum(n for t, n in combo if t == gpu_type) <= nodes * per_node
            for gpu_type, (nodes, per_node) in CLUSTER.items()
        )
    )


def test_sia_rounded_gives_the_goodput_whose_power_is_sias_rounded_coefficient() -> None:
    rounded = sia_rounded({"aws": {1: 1.0, 4: 6.6}, "rtx": {1: 1e-8, 8: 1e9}})
    assert rounded["aws"][1] == pytest.approx(1.0)
    assert rounded["aws"][4] == pytest.approx(0.39**-2)  # 6.6^-0.5 = 0.389 -> 0.39
    assert rounded["rtx"][1] == pytest.approx(3000.0**-2)  # 10,000 capped at 3,000
    assert rounded["rtx"][8] == pytest.approx(0.005**-2)  # 3e-5 rounds to 0: half a step


def test_on_rounded_tables_the_plan_minimises_sias_rounded_objective() -> None:
    # the exact optimum (aws 8, rtx 4, rtx 4: 1.349 exact) is 1.36 rounded; Sia's solver,
    # given the rounded terms, takes aws 4, aws 4, rtx 8 (1.35 rounded, 1.354 exact)
    tables = [
        {"aws": {1: 1.0, 2: 1.85, 4: 3.87, 8: 4.4}, "rtx": {1: 2.55, 4: 3.43, 8: 13.17}},
        {"aws": {1: 1.0, 2: 1.73, 4: 3.04, 8: 6.83}, "rtx": {1: 1.18, 4: 6.09, 8: 13.59}},
        {"aws": {1: 1.0, 2: 1.69, 4: 2.89, 8: 4.83}, "rtx": {1: 2.33, 4: 4.58, 8: 13.49}},
    ]
    jobs = [SiaJob(f"job-{i}", table, 0.0) for i, table in enumerate(tables)]
    given = [SiaJob(job.name, sia_rounded(job.goodput), 0.0) for job in jobs]
    problem = PlanProblem(
        pools_of(CLUSTER), plan_jobs(given, {}), objective="fairness", fairness_p=-0.5
    )
    result = plan(problem, PlanSettings(time_limit_s=10, explain=False))
    chosen = {a.name: (a.pool, a.gpus) for a in result.jobs}
    assert _best_by_enumeration(jobs, decimals=2) == pytest.approx(1.35)
    assert _sia_objective(jobs, chosen, decimals=2) == pytest.approx(1.35)
    assert _best_by_enumeration(jobs) < _sia_objective(jobs, chosen)  # not the exact optimum


def test_the_plan_minimises_sias_objective_on_sias_tables() -> None:
    jobs = [
        SiaJob("cifar10-0", {"aws": {1: 1.0, 2: 1.9, 4: 3.2}, "rtx": {1: 1.4, 8: 7.0}}, 50.0),
        SiaJob("bert-1", {"aws": {1: 1.0, 4: 2.0, 8: 3.0}, "rtx": {1: 3.0, 4: 9.0}}, 120.0),
        SiaJob("yolov3-2", {"aws": {1: 1.0, 2: 1.5}, "rtx": {2: 2.5, 4: 4.0}}, 80.0),
    ]
    problem = PlanProblem(
        pools_of(CLUSTER), plan_jobs(jobs, {}), objective="fairness", fairness_p=-0.5
    )
    result = plan(problem, PlanSettings(time_limit_s=10, explain=False))
    assert result.status == "optimal"
    chosen = {a.name: (a.pool, a.gpus) for a in result.jobs}
    best = _best_by_enumeration(jobs)
    assert _sia_objective(jobs, chosen) == pytest.approx(best, rel=1e-6)
    assert result.objective_value == pytest.approx(best, rel=1e-6)
    allocations = {a.name: allocation_of(a, CLUSTER, None) for a in result.jobs}
    tables = {job.name: job.goodput for job in jobs}
    assert rejected(allocations, tables, CLUSTER, {"aws": 2, "rtx": 1}) == []


def test_a_pinned_job_keeps_its_gpus_and_its_sia_tuple() -> None:
    jobs = [
        SiaJob("bert-1", {"rtx": {1: 1.0, 8: 6.0}}, 120.0, pinned=True),
        SiaJob("cifar10-0", {"rtx": {1: 1.0, 8: 8.0}}, 50.0),
    ]
    previous = {"bert-1": ("rtx", (0,))}
    problem = PlanProblem(
        pools_of(CLUSTER),
        plan_jobs(jobs, gpu_slots(previous, CLUSTER)),
        objective="fairness",
    )
    result = plan(problem, PlanSettings(time_limit_s=10, explain=False))
    by_name = {a.name: a for a in result.jobs}
    # the pinned job holds its one GPU, so the other cannot have all eight of the node
    assert allocation_of(by_name["bert-1"], CLUSTER, previous["bert-1"]) is previous["bert-1"]
    assert (by_name["cifar10-0"].pool, by_name["cifar10-0"].gpus) != ("rtx", 8)


def _answer(pool: str | None, nodes: tuple[int, ...]) -> JobPlan:
    return JobPlan("j", pool, pool, len(nodes), nodes, None, None, 1.0, 1.0, 1.0, "starts")


def test_gpu_ids_map_back_to_a_node_index_per_gpu() -> None:
    assert allocation_of(_answer("rtx", (3, 1, 2)), CLUSTER, None) == ("rtx", (0, 0, 0))
    assert allocation_of(_answer("aws", (3, 4, 5)), CLUSTER, None) == ("aws", (0, 1, 1))
    assert allocation_of(_answer(None, ()), CLUSTER, ("aws", (0,))) == (None, ())
    kept = ("aws", (1, 0, 1))  # Sia's order: any reordering of the same nodes is the same
    assert allocation_of(_answer("aws", (0, 4, 5)), CLUSTER, kept) is kept


def _counted(name: str, pool: str | None, gpus: int, change: str) -> JobPlan:
    return JobPlan(name, pool, pool, gpus, (), None, None, 1.0, 1.0, 1.0, change)


def test_counts_only_plans_are_packed_whole_nodes_first_then_the_fullest_node() -> None:
    kept = {"a": ("aws", (0, 0))}
    answers = [
        _counted("a", "aws", 2, "stays"),
        _counted("c", "aws", 2, "starts"),
        _counted("b", "aws", 4, "starts"),
        _counted("d", None, 0, "waits"),
    ]
    placed = place_counts(answers, CLUSTER, kept)
    # a keeps its tuple; b (largest) takes the free node 1 whole; c the two GPUs left on 0
    assert placed == {
        "a": kept["a"],
        "b": ("aws", (1, 1, 1, 1)),
        "c": ("aws", (0, 0)),
        "d": (None, ()),
    }
    assert placed["a"] is kept["a"]


def test_rejected_names_what_sias_cluster_would_refuse() -> None:
    tables = {"a": {"aws": {4: 2.0}}, "b": {"aws": {1: 1.0, 2: 1.5}}}
    fine = {"a": ("aws", (0, 0, 0, 0)), "b": ("aws", (1, 1))}
    assert rejected(fine, tables, CLUSTER, {"aws": 2}) == []
    bad = {"a": ("aws", (0, 0, 0, 0)), "b": ("aws", (0, 1, 1))}
    assert rejected(bad, tables, CLUSTER, {"aws": 2}) == [
        "b: 3 GPUs of aws is not a configuration",
        "node 0 of aws is given 5 GPUs",
    ]


def test_percentile_is_sias_sorted_index() -> None:
    values = list(range(100, 0, -1))
    assert percentile(values, 0.99) == 100  # sorted[int(0.99 * 100)] = sorted[99]
    assert percentile(values, 0.5) == 51
    assert percentile([], 0.5) == 0.0
