"""Contention: a transfer hidden under compute still costs overlap_compute_slowdown of its
time (docs/cost-model.md, "Contention"), checked by hand and on whole layouts."""

from __future__ import annotations

import pytest

from models.layout import Layout
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.costmodel.standard.times import exposed_s
from tests.helpers import plate_job

NONE = CostAssumptions(overlap_compute_slowdown=0.0)


@pytest.mark.parametrize(
    ("comm_s", "hiding_s", "overlap", "slowdown", "expected_s"),
    [
        (1.0, 0.5, 1.0, 0.2, 0.5 + 0.2 * 0.5),  # half hides: the rest, plus 20% of what hid
        (0.3, 1.0, 1.0, 0.2, 0.2 * 0.3),  # all hides: 20% of it
        (0.3, 1.0, 0.5, 0.2, 0.2 * 0.3),  # half the compute is still more than it
        (1.0, 1.0, 0.4, 0.2, 0.6 + 0.2 * 0.4),
        (1.0, 0.5, 1.0, 0.0, 0.5),  # no slowdown: the old max(c - o h, 0)
        (0.3, 1.0, 1.0, 0.0, 0.0),
    ],
)
def test_a_hidden_transfer_costs_its_share(
    comm_s: float, hiding_s: float, overlap: float, slowdown: float, expected_s: float
) -> None:
    assert exposed_s(comm_s, hiding_s, overlap, slowdown) == pytest.approx(expected_s)


def test_the_default_is_the_papers_average() -> None:
    assert CostAssumptions().overlap_compute_slowdown == 0.189  # arXiv 2507.03114, abstract


def test_without_data_parallel_traffic_nothing_changes() -> None:
    job = plate_job(8, "llama3-8b", global_batch=16)
    layout = Layout(tp=8, pp=1, zero=1, recompute="full")  # dp 1: no sync to hide
    with_it, without = (evaluate(job, layout, "standard", a) for a in (CostAssumptions(), NONE))
    assert with_it.step_time_s == pytest.approx(without.step_time_s)


def test_fsdp_gathers_cost_more_when_they_hide() -> None:
    job = plate_job(64, "llama3-8b", global_batch=128)
    layout = Layout(tp=1, pp=1, zero=3, micro_batch=2, recompute="selective")
    with_it, without = (evaluate(job, layout, "standard", a) for a in (CostAssumptions(), NONE))
    assert with_it.step_time_s > without.step_time_s
    # never more than the slowdown times every hidden second: a bound from the parts
    zero3_s = with_it.times_s["zero3_per_micro_batch"] * with_it.micro_batches
    sync_s = with_it.times_s["dp_comm_exposed"]
    # (equal when every gather hides: then the whole difference is the slowdown's share)
    assert with_it.step_time_s - without.step_time_s <= (zero3_s + sync_s) * (1 + 1e-9)
