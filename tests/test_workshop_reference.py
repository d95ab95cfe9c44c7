"""The workshop profile against the spec's reference figures (docs: shared/spec/cost-model.md)."""

from __future__ import annotations

import pytest

from models.layout import Layout, Recompute
from models.presets import model_preset
from optimizer.costmodel.profiles import evaluate
from tests.helpers import plate_job

GB = 1e9


@pytest.mark.parametrize(
    ("preset", "params_e9"),
    [("llama3-8b", 8.03), ("llama3-70b", 70.55), ("llama3-405b", 405.85)],
)
def test_parameter_counts_match_the_spec_table(preset: str, params_e9: float) -> None:
    assert model_preset(preset).total_params / 1e9 == pytest.approx(params_e9, abs=0.005)


def test_405b_parameter_count_by_hand() -> None:
    # P_layer = h*(h + 2*k*hd) + h*h + 3*h*f with h=16384, k=8, hd=128, f=53248
    #         = 16384*18432 + 268435456 + 3*16384*53248
    #         = 301989888 + 268435456 + 2617245696 = 3187671040
    # P = 126 * 3187671040 + 2*128256*16384 = 401646551040 + 4202692608
    spec = model_preset("llama3-405b")
    assert spec.params_per_layer == 3_187_671_040
    assert spec.total_params == 405_849_243_648


def test_the_plates_default_layout_reproduces_every_printed_figure() -> None:
    estimate = evaluate(plate_job(), Layout(tp=8, pp=16, cp=1, vpp=4, micro_batch=1, zero=2))
    memory = estimate.memory
    # The reference table, to the printed digit.
    assert round(memory.weights / GB, 2) == 6.34
    assert round(memory.gradients / GB, 2) == 0.05
    assert round(memory.optimizer / GB, 2) == 0.30
    assert round(memory.activations / GB, 2) == 71.87
    assert round(memory.total / GB, 1) == 78.6
    assert estimate.fits
    assert round(estimate.bubble, 3) == 0.190
    assert round(estimate.mfu, 4) == 0.4255
    assert estimate.layout.dp == 128 and estimate.micro_batches == 16
    assert estimate.warnings == ()


def test_the_plates_tp16_across_the_network_row_prints_16_percent() -> None:
    # tp 16 spans two nodes, so its all-reduces run at 50 GB/s; the plate prints 16%.
    estimate = evaluate(plate_job(), Layout(tp=16, pp=16, vpp=4, zero=2))
    assert round(estimate.mfu * 100) == 16
    assert any("num_kv_heads(8)" in w for w in estimate.warnings)
    assert any("network" in w for w in estimate.warnings)


def test_mfu_steps_come_in_the_specs_order_and_multiply_out() -> None:
    estimate = evaluate(plate_job(), Layout(tp=8, pp=16, vpp=4, zero=2, recompute=Recompute.FULL))
    names = [step.name for step in estimate.mfu_steps]
    assert names == [
        "kernel efficiency",
        "after pipeline bubble",
        "after tensor-parallel communication",
        "after data-parallel communication",
        "after recomputation",
    ]
    first, bubble = estimate.mfu_steps[0].mfu, estimate.mfu_steps[1].mfu
    assert first == 0.6
    assert bubble == pytest.approx(0.6 * (1 - estimate.bubble))
    # Full recompute charges 6/8 on top of the rest.
    assert estimate.mfu_steps[4].mfu == pytest.approx(estimate.mfu_steps[3].mfu * 6 / 8)


def test_step_time_and_throughput_are_consistent_with_mfu() -> None:
    # MFU = 6 * L * P_layer * tokens / (N * F * step_time): the model FLOPs the plate counts.
    job = plate_job()
    estimate = evaluate(job, Layout(tp=8, pp=16, vpp=4, zero=1, recompute=Recompute.FULL))
    flops = 6 * 126 * 3_187_671_040 * 2048 * 8192
    assert flops / (16384 * 989e12 * estimate.step_time_s) == pytest.approx(estimate.mfu, rel=1e-12)
    assert estimate.tokens_per_s_per_gpu == pytest.approx(
        2048 * 8192 / (estimate.step_time_s * 16384)
    )


def test_an_estimate_that_overflowed_is_refused_not_returned() -> None:
    from dataclasses import replace

    from models.errors import InvalidSpec
    from optimizer.costmodel.profiles import require_finite

    estimate = evaluate(plate_job(), Layout(tp=8, pp=16, vpp=4, zero=2))
    assert require_finite(estimate) is estimate
    with pytest.raises(InvalidSpec, match="drive step_time_s out of range"):
        require_finite(replace(estimate, step_time_s=float("inf")))
