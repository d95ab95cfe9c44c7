"""Memory outside the tensors (profile standard): the CUDA context, NCCL's buffers and the
allocator's reserve, each checked against a figure computed here by hand from its source."""

from __future__ import annotations

import pytest

from models.layout import Layout
from models.stage_plan import StagePlan
from optimizer import Request
from optimizer.costmodel import CostAssumptions, device_capacity_bytes, evaluate
from optimizer.costmodel import stage_plans as sp
from optimizer.search import SearchSpace
from optimizer.searches import optimize
from tests.helpers import plate_job

A = CostAssumptions()
MIB = 2**20


def test_nccl_default_is_its_buffers_times_channels_and_connections() -> None:
    # NCCL's per-connection FIFOs: Simple 4 MiB, LL128 120 elements x 640 threads x 8 steps
    # x 8 B, LL 8 lines x 512 threads x 8 steps x 16 B; 16 channels, 2 receiving connections
    per_connection = 4 * MIB + 120 * 640 * 8 * 8 + 8 * 512 * 8 * 16
    assert per_connection == 9_633_792
    assert A.nccl_buffers_gb_per_group == pytest.approx(16 * 2 * per_connection / 1e9, abs=5e-4)
    assert A.cuda_context_gb == pytest.approx(1573 * MIB / 1e9, abs=5e-3)  # BigScience's A100


@pytest.mark.parametrize(
    ("layout", "groups"),
    [
        (Layout(tp=8, pp=16, vpp=4, zero=1), 3),  # tp, dp, pp
        (Layout(tp=8, pp=16, cp=2, vpp=4, zero=1), 4),  # tp, cp, dp x cp, pp
        (Layout(tp=8, pp=16, cp=16, vpp=4, zero=1), 4),  # dp 8 x cp 16: one gradient group
    ],
)
def test_runtime_counts_one_communicator_per_parallel_dimension(
    layout: Layout, groups: int
) -> None:
    est = evaluate(plate_job(), layout, "standard")
    assert est.layout.dp > 1
    expected_gb = A.cuda_context_gb + groups * A.nccl_buffers_gb_per_group
    assert est.memory.runtime == pytest.approx(expected_gb * 1e9)
    assert est.memory.fragmentation == 0  # expandable segments by default
    tensors = est.memory.weights + est.memory.gradients + est.memory.optimizer
    assert est.memory.allocator == pytest.approx(tensors + est.memory.activations)
    assert est.memory.total == pytest.approx(est.memory.allocator + est.memory.runtime)


def test_expert_parallelism_adds_a_communicator_and_the_all_to_all_buffers() -> None:
    job = plate_job(64, "mixtral-8x7b", global_batch=128)
    without = evaluate(job, Layout(tp=2, pp=4, zero=1, recompute="full"), "standard")
    with_ep = evaluate(job, Layout(tp=2, pp=4, ep=8, zero=1, recompute="full"), "standard")
    added = (A.nccl_buffers_gb_per_group + A.nccl_all_to_all_gb) * 1e9
    assert with_ep.memory.runtime - without.memory.runtime == pytest.approx(added)


def test_fragmentation_is_a_share_of_the_tensors_and_can_break_a_fit() -> None:
    job, layout = plate_job(), Layout(tp=8, pp=16, vpp=4, zero=1, recompute="selective")
    plain = evaluate(job, layout, "standard")
    reserve = evaluate(job, layout, "standard", CostAssumptions(allocator_fragmentation=0.4))
    tensors = plain.memory.allocator
    assert reserve.memory.fragmentation == pytest.approx(0.4 * tensors)
    assert reserve.memory.total == pytest.approx(plain.memory.total + 0.4 * tensors)
    assert plain.fits and not reserve.fits  # 74 GB of tensors need expandable segments


def test_capacity_is_what_cuda_reports_for_standard_and_the_plate_for_workshop() -> None:
    job, layout = plate_job(), Layout(tp=8, pp=16, vpp=4, zero=1)
    gpu = job.cluster.gpu
    assert evaluate(job, layout, "standard").memory.capacity == pytest.approx(84.94e9)
    assert device_capacity_bytes(gpu, "standard") == pytest.approx(79.11 * 2**30, rel=1e-4)
    plate = evaluate(job, layout, "workshop").memory
    assert plate.capacity == 80e9 and plate.runtime == 0 and plate.fragmentation == 0


def test_a_stage_plan_carries_the_same_runtime_on_every_rank() -> None:
    job = plate_job()
    layout = Layout(tp=8, pp=16, vpp=4, zero=1)
    plan = StagePlan(layers=(7, *[8] * 14, 7), recompute=("none",) * 16)
    price = sp.price_plan(job, A, evaluate(job, layout, "standard").layout, plan)
    runtime = (A.cuda_context_gb + 3 * A.nccl_buffers_gb_per_group) * 1e9
    for rank in price.rank_memory:
        assert float(rank.total - rank.allocator) == pytest.approx(runtime)
    assert price.memory_bytes - price.allocator_bytes == pytest.approx(runtime)


def test_the_search_bounds_the_total_runtime_included() -> None:
    job = plate_job(64, "llama3-70b", global_batch=128)
    space = SearchSpace(tp=8, cp=1, zero_stages=[1], memory_limit_gb=40)
    result = optimize(Request(job, space=space, engine=None))
    best = result.best
    assert best is not None and best.memory.total <= 40e9
    assert best.memory.runtime > 0 and best.memory.allocator < best.memory.total
