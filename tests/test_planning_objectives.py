"""The planner's objectives and explanations on toy cases worked by hand: one pool of four
nodes, curves linear in nodes, so every figure below is arithmetic."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from optimizer.planning import (
    Deadline,
    PlanJob,
    PlanProblem,
    PlanSettings,
    Pool,
    Running,
    given_curves,
    plan,
)
from tests.planning_cases import REQUEST, REQUEST_GPU

POOL = Pool("h100", REQUEST_GPU, 4, 8, None, 4)
COUNTS = (1, 2, 3, 4)


def toy(objective: str, *jobs: PlanJob, per_node: dict[str, float]) -> tuple[PlanProblem, object]:
    problem = PlanProblem((POOL,), jobs, objective)  # type: ignore[arg-type]
    table = {(j.name, "h100", n): per_node[j.name] * n for j in jobs for n in COUNTS}
    return problem, given_curves(problem, table)


def job(name: str, **extra: object) -> PlanJob:
    return PlanJob(name, REQUEST, node_counts=COUNTS, **extra)  # type: ignore[arg-type]


def test_throughput_gives_the_pool_to_the_job_whose_share_weighs_most_and_says_why() -> None:
    # a: 1,000 tokens/s a node (alone, 4 nodes: 4,000), b: 1,500 (6,000) at weight 2. The
    # throughput objective is the sum of w * x, x a job's share of its best alone: all four
    # nodes to b: 2 * 1 = 2; a 1 and b 3: 0.25 + 2 * 0.75 = 1.75; a alone: 1.
    problem, curves = toy(
        "throughput", job("a"), job("b", weight=2.0), per_node={"a": 1000.0, "b": 1500.0}
    )
    result = plan(problem, PlanSettings(time_limit_s=10), curves)  # type: ignore[arg-type]
    assert result.status == "optimal" and result.objective_value == pytest.approx(2.0)
    assert result.terms["weighted_tokens_per_s"] == pytest.approx(2 * 6000.0)
    assert [(j.pool, j.gpus) for j in result.jobs] == [(None, 0), ("h100", 32)]
    (short,) = result.shortfalls
    assert (short.job, short.asked_gpus, short.got_gpus) == ("a", 32, 0)
    capacity, trade_off = short.reasons
    assert capacity.code == "capacity" and "0 of its 4 available nodes free" in capacity.message
    assert "held by b (4)" in capacity.message
    assert "cost the plan 0.25 in weighted shares of best alone" in trade_off.message  # 2 - 1.75
    (value,) = result.node_values
    # a fifth node goes to a: 2 + 1,000 / 4,000
    assert value.objective_gain == pytest.approx(0.25) and value.nodes_for_gain == 1


def test_fairness_is_the_weighted_p_sum_of_shares_of_the_best_alone() -> None:
    # Each job alone: 4 nodes, 4,000 tokens/s. (2, 2): 2 * 0.5^-0.5 = 2.8284; (1, 3):
    # 0.25^-0.5 + 0.75^-0.5 = 3.1547; (4, nothing): 1 + 1.1 * 0.25^-0.5 = 3.2.
    problem, curves = toy("fairness", job("a"), job("b"), per_node={"a": 1000.0, "b": 1000.0})
    result = plan(problem, PlanSettings(time_limit_s=10), curves)  # type: ignore[arg-type]
    assert result.objective_value == pytest.approx(2 * math.sqrt(2), rel=1e-9)
    assert [j.gpus for j in result.jobs] == [16, 16]
    assert [j.share for j in result.jobs] == [0.5, 0.5]


def test_deadlines_meet_the_most_weight_first() -> None:
    # a (weight 2) meets its deadline on 3 nodes or more, b (weight 1) on 2: not both in 4.
    # a meets it; then throughput: a on 4 (2 * 4,000) beats a on 3 and b on 1 (7,000).
    hours = 10.0
    a = job("a", weight=2.0, deadline=Deadline(3000.0 * 3600 * hours, hours))
    b = job("b", deadline=Deadline(2000.0 * 3600 * hours, hours))
    problem, curves = toy("deadlines", a, b, per_node={"a": 1000.0, "b": 1000.0})
    result = plan(problem, PlanSettings(time_limit_s=10), curves)  # type: ignore[arg-type]
    assert result.objective_value == 2.0
    assert [(j.gpus, j.meets_deadline) for j in result.jobs] == [(32, True), (0, False)]


@pytest.mark.parametrize(("restart_minutes", "change"), [(30.0, "stays"), (0.0, "resizes")])
def test_a_restart_costs_its_minutes_over_the_horizon(restart_minutes: float, change: str) -> None:
    # Running on 2 nodes (2,000 tokens/s). On 4 it would train 4,000, less half the hour
    # lost to a 30-minute restart: 2,000, a tie that staying wins; free restarts: resize.
    # Its best alone is 4,000: the objective is its share, 0.5 or 1.
    a = job("a", running=Running("h100", (0, 1)), restart_minutes=restart_minutes)
    problem, curves = toy("throughput", a, per_node={"a": 1000.0})
    result = plan(problem, PlanSettings(time_limit_s=10), curves)  # type: ignore[arg-type]
    assert result.jobs[0].change == change
    assert result.objective_value == pytest.approx(0.5 if restart_minutes else 1.0)
    tokens_per_s = result.terms["weighted_tokens_per_s"]
    assert tokens_per_s == pytest.approx(2000.0 if restart_minutes else 4000.0)


@pytest.mark.parametrize(("checkpoint_minutes", "change"), [(None, "resizes"), (60.0, "stays")])
def test_a_move_without_a_checkpoint_on_demand_loses_half_an_interval(
    checkpoint_minutes: float | None, change: str
) -> None:
    # Running on 2 nodes (2,000 tokens/s, best alone 4,000 on 4). A resize restarts for 10
    # minutes of the 60-minute horizon: 4,000 * 50/60 = 3,333 beats staying. A job that can
    # only resume from a checkpoint taken every hour also loses 30 minutes on average:
    # 4,000 * 20/60 = 1,333, and staying (2,000) wins.
    a = job(
        "a",
        running=Running("h100", (0, 1)),
        restart_minutes=10.0,
        checkpoint_minutes=checkpoint_minutes,
    )
    problem, curves = toy("throughput", a, per_node={"a": 1000.0})
    result = plan(problem, PlanSettings(time_limit_s=10), curves)  # type: ignore[arg-type]
    assert result.jobs[0].change == change
    assert result.objective_value == pytest.approx(50 / 60 if checkpoint_minutes is None else 0.5)
    if checkpoint_minutes is not None:
        (short,) = result.shortfalls
        assert short.reasons[0].code == "restart_cost"
        assert "40 minutes of training lost (its restart and half its checkpoint" in (
            short.reasons[0].message
        )


@pytest.mark.parametrize(("checkpoint_minutes", "met"), [(None, True), (120.0, False)])
def test_a_failure_takes_back_the_training_since_the_last_checkpoint_from_a_deadline(
    checkpoint_minutes: float | None, met: bool
) -> None:
    # Running on nodes 0-1 (2,000 tokens/s); node 1 fails. On the 3 nodes left it trains
    # 3,000 tokens/s: 10.8M in the hour its deadline gives, against 8M still to train. With
    # a checkpoint every 2 hours, the failure took back an hour of its 2,000 tokens/s on
    # average: 7.2M more to train, 15.2M, and the deadline is lost.
    pool = replace(POOL, unavailable=frozenset({1}))
    a = job(
        "a",
        running=Running("h100", (0, 1)),
        restart_minutes=0.0,
        checkpoint_minutes=checkpoint_minutes,
        deadline=Deadline(8e6, 1.0),
    )
    problem = PlanProblem((pool,), (a,), "deadlines")
    table = {("a", "h100", n): 1000.0 * n for n in COUNTS}
    result = plan(problem, PlanSettings(time_limit_s=10), given_curves(problem, table))
    assert result.jobs[0].gpus == 24 and result.jobs[0].meets_deadline is met
