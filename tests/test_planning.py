"""The planner against its oracle and its promises: the exhaustive enumerator agrees on the
objective and the racks, infeasible plans come with a minimal conflict, the same request
gives the same plan whatever the worker count, the time limit holds to 50 ms, and a node
failure moves only the job that ran on it. Synthetic curves: no optimize calls here."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from api.schemas import plan_out
from optimizer.planning import (
    PlanJob,
    PlanProblem,
    PlanResult,
    PlanSettings,
    PlanTooLarge,
    Pool,
    Running,
    given_curves,
    plan,
)
from optimizer.planning.enumerator import exhaustive, fewest_racks_for
from optimizer.planning.greedy import greedy_plan
from optimizer.planning.options import option_table
from tests.planning_cases import (
    REQUEST,
    REQUEST_GPU,
    check_plan,
    choice_of,
    large_instance,
    random_instance,
    twin_instance,
)

OBJECTIVES = ("throughput", "fairness", "deadlines")
# Seeds 4 and 5 are infeasible (a job that must run has no configuration it may take);
# 13, 43 and 46 have NVLink domains of two nodes with running jobs across them.
SEEDS = (0, 1, 2, 4, 5, 7, 13, 17, 32, 43, 46, 78)


def plan_json(result: PlanResult) -> str:
    """The answer as a scheduler reads it, less the solver's timings."""
    answer = plan_out(result).model_dump(mode="json")
    answer.pop("solver")
    return json.dumps(answer, sort_keys=True)


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("seed", SEEDS)
def test_plan_matches_the_exhaustive_oracle(seed: int, objective: str) -> None:
    problem, curves = random_instance(seed, objective)
    result = plan(problem, PlanSettings(time_limit_s=20, explain=False), curves)
    table = option_table(problem, curves)
    best = exhaustive(problem, table)
    if best is None:
        assert result.status == "infeasible"
        assert result.conflict, "an infeasible plan names its conflict"
        return
    assert result.status == "optimal"
    assert result.value_units == best[0]
    # the racks: the fewest the chosen options can span (ties in the objective are broken
    # by the option tie-break before the topology, so compare at the solver's options)
    assert result.racks_spanned == fewest_racks_for(
        problem, table, choice_of(problem, table, result)
    )
    assert result.racks_spanned >= best[1]
    check_plan(problem, result)


def test_the_oracle_sweep_covers_infeasible_and_nvlink_cases() -> None:
    kinds = set()
    for seed in SEEDS:
        problem, curves = random_instance(seed)
        best = exhaustive(problem, option_table(problem, curves))
        kinds.add("infeasible" if best is None else "feasible")
        kinds.add("domains" if any(p.domain_nodes > 1 for p in problem.pools) else "racks")
    assert kinds == {"infeasible", "feasible", "domains", "racks"}


def two_musts(min_gpus: int) -> PlanProblem:
    pool = Pool("h100", REQUEST_GPU, 16, 8, None, 8)
    jobs = tuple(
        PlanJob(name, REQUEST, min_gpus=min_gpus, preemptible=False, node_counts=(8, 10, 12))
        for name in ("a", "b")
    )
    return PlanProblem((pool,), jobs)


def test_two_non_preemptible_jobs_whose_minimums_exceed_a_pool_conflict() -> None:
    problem = two_musts(min_gpus=80)  # 10 nodes each, 16 in the pool
    curves = given_curves(problem, {(j, "h100", n): 1000.0 * n for j in "ab" for n in (10, 12)})
    result = plan(problem, PlanSettings(time_limit_s=10), curves)
    assert result.status == "infeasible" and result.jobs == ()
    assert {c.name for c in result.conflict} == {"must_run:a", "must_run:b", "capacity:h100"}
    words = {c.name: c.description for c in result.conflict}
    assert "10 nodes (80 GPUs)" in words["must_run:a"]
    assert "16 available nodes" in words["capacity:h100"]
    assert exhaustive(problem, option_table(problem, curves)) is None


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("instance", [random_instance, twin_instance])
def test_same_plan_byte_for_byte_whatever_the_workers(instance, objective: str) -> None:  # type: ignore[no-untyped-def]
    for seed in (1, 7, 8):
        problem, curves = instance(seed, objective)
        answers = {
            plan_json(plan(problem, PlanSettings(time_limit_s=20, workers=w), curves))
            for w in (1, 2, 1)
        }
        assert len(answers) == 1


def test_identical_jobs_are_told_apart_by_the_tie_break() -> None:
    problem, curves = twin_instance(3)
    result = plan(problem, PlanSettings(time_limit_s=20), curves)
    assert result.stats.tie_break_proved
    gpus = [job.gpus for job in result.jobs]
    assert gpus == sorted(gpus, reverse=True)  # earlier jobs first among equals


def test_large_cluster_plan_keeps_its_time_limit_within_50_ms() -> None:
    problem, curves = large_instance()
    for time_limit_s, explain in ((1.0, False), (1.5, True)):
        start = time.perf_counter()
        result = plan(problem, PlanSettings(time_limit_s=time_limit_s, explain=explain), curves)
        wall_s = time.perf_counter() - start
        assert wall_s <= time_limit_s + 0.05, (time_limit_s, wall_s)
        assert result.status in ("optimal", "feasible")
        check_plan(problem, result)


def test_a_failed_node_moves_only_the_job_that_ran_on_it() -> None:
    problem, curves = large_instance(jobs=6, nodes=64)
    first = plan(problem, PlanSettings(time_limit_s=20, explain=False), curves)
    assert first.status == "optimal"
    running = tuple(
        replace(job, running=Running(planned.pool, planned.nodes))
        for job, planned in zip(problem.jobs, first.jobs, strict=True)
        if planned.pool is not None
    )
    victim = running[1]
    assert victim.running is not None
    failed = victim.running.nodes[0]
    pools = tuple(
        replace(p, unavailable=p.unavailable | {failed}) if p.name == victim.running.pool else p
        for p in problem.pools
    )
    again = replace(problem, pools=pools, jobs=running)
    second = plan(
        again,
        PlanSettings(time_limit_s=20, explain=False),
        given_curves(again, _table(curves, problem)),
    )
    changes = {job.name: job.change for job in second.jobs}
    assert changes.pop(victim.name) in ("moves", "resizes", "stops")
    assert set(changes.values()) == {"stays"}
    check_plan(again, second)


def _table(curves, problem):  # type: ignore[no-untyped-def]
    return {
        (problem.jobs[p.job].name, problem.pools[p.pool].name, p.nodes): p.tokens_per_s
        for p in curves.points
    }


def test_the_greedy_plan_keeps_every_rule() -> None:
    for seed in SEEDS:
        problem, curves = random_instance(seed)
        table = option_table(problem, curves)
        greedy = greedy_plan(problem, table, problem.cells())
        if exhaustive(problem, table) is None:
            assert greedy is None
        elif greedy is not None:
            assert fewest_racks_for(problem, table, greedy.choice) is not None


def test_a_plan_beyond_the_size_caps_is_refused_with_the_numbers() -> None:
    pool = Pool("h100", REQUEST_GPU, 100_000, 8, None, 1)
    jobs = tuple(PlanJob(f"j{k}", REQUEST, node_counts=(1,)) for k in range(3))
    with pytest.raises(PlanTooLarge, match=r"3 jobs x 100,000 racks or NVLink domains = 300,000"):
        plan(
            PlanProblem((pool,), jobs), PlanSettings(), given_curves(PlanProblem((pool,), jobs), {})
        )
