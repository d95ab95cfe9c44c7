"""The scheduler simulator's replay (bench/simulate.py), worked by hand on a 4-node pool with
given speeds: FCFS blocks behind its head, greedy takes the fastest size that fits, and a
failed node costs its job half a checkpoint interval and a restart."""

from __future__ import annotations

import pytest

from bench.cluster_scenarios import Arrival, Failure, Scenario, Template
from bench.simulate import fcfs, greedy, jobs_of, replay

POOL = {"name": "p", "gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8, "nodes_per_rack": 4}
TINY = Scenario(
    name="tiny",
    pools=(POOL,),
    templates=(Template("llama3-8b", 64, 8192, 16, (1, 2, 4), (1, 1)),),
    restart_minutes=10.0,
    checkpoint_minutes=30.0,
    nodes_per_pod=None,
    failures_per_node_hour=0.0,
    repair_hours=2.0,
    horizon_hours=4.0,
)
SPEEDS = {(0, "p", 1): 100.0, (0, "p", 2): 180.0, (0, "p", 4): 300.0}
# three jobs of an hour each at their fixed 16 GPUs (2 nodes, 180 tokens/s)
ARRIVALS = [Arrival(name, 0, 0.0, 1.0) for name in ("a", "b", "c")]


def _finish_s(jobs: list) -> dict[str, float]:
    return {job.name: job.finish_s for job in jobs}


def test_fcfs_runs_two_at_their_fixed_size_and_the_third_after() -> None:
    jobs, hits = replay(TINY, jobs_of(TINY, ARRIVALS, SPEEDS), [], fcfs(TINY, SPEEDS))
    assert _finish_s(jobs) == pytest.approx({"a": 3600, "b": 3600, "c": 7200})
    assert hits == 0


def test_greedy_gives_each_the_fastest_size_that_fits_in_turn() -> None:
    # 4 nodes train at 300 tokens/s: 180 * 3600 tokens take 2,160 s each, one after another
    jobs, _ = replay(TINY, jobs_of(TINY, ARRIVALS, SPEEDS), [], greedy(TINY, SPEEDS))
    assert _finish_s(jobs) == pytest.approx({"a": 2160, "b": 4320, "c": 6480})


def test_a_failed_node_costs_half_a_checkpoint_and_a_restart() -> None:
    # At 1,800 s node 0 (job a's) fails: a loses 900 s of training and waits at the head of
    # the queue with one node free; b finishes at 3,600 s, a restarts on nodes 1-2 after 600 s
    # and trains its 2,700 s left: 3,600 + 600 + 2,700 = 6,900 s; then c, an hour.
    failure = Failure(1800.0, "p", 0, 1800.0 + 2 * 3600)
    jobs, hits = replay(TINY, jobs_of(TINY, ARRIVALS, SPEEDS), [failure], fcfs(TINY, SPEEDS))
    assert _finish_s(jobs) == pytest.approx({"a": 6900, "b": 3600, "c": 10500})
    assert hits == 1
    assert [job.restarts for job in jobs] == [1, 0, 0]
