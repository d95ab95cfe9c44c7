"""The optimiser step's time (profile standard): a memory-bound pass over the rank's optimiser
shard and its gradient buffer, after the backward, that nothing hides. Each figure is worked by
hand from the model's parameter count, the bytes the engines' code moves and the GPU's HBM
bandwidth."""

from __future__ import annotations

import pytest

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.costmodel.standard import MFU_STEP_NAMES
from optimizer.engines import engine_assumptions, get_engine

MODEL = model_preset("llama3-8b")
PARAMS = MODEL.total_params  # 8.03e9
H100 = gpu_preset("h100-sxm")


def job(gpus: int = 8) -> TrainingJob:
    return TrainingJob(
        model=MODEL,
        cluster=ClusterSpec(gpus=gpus, gpu=H100, gpus_per_node=8),
        training=TrainingSpec(global_batch=64, seq_len=4096),
    )


def layout(**degrees: object) -> Layout:
    values: dict[str, object] = {"tp": 1, "pp": 1, "cp": 1, "micro_batch": 1, "zero": 1}
    return Layout(**(values | degrees))


def optimizer_step_s(estimate_layout: Layout, assumptions: CostAssumptions) -> float:
    estimate = evaluate(job(), estimate_layout, "standard", assumptions)
    return estimate.times_s["optimizer_step"]


def seconds(bytes_moved: float) -> float:
    return bytes_moved / (H100.memory_bandwidth_gb_s * 1e9)


def test_megatron_core_step_over_a_zero1_shard() -> None:
    # dp 8, ZeRO-1: each rank steps P/8 parameters at 38 bytes (norm 4, FusedAdam 28, the
    # master's copy to the bf16 weight 6) and zeroes its whole fp32 gradient buffer (4 P)
    expected = seconds(PARAMS / 8 * 38 + PARAMS * 4)
    assert optimizer_step_s(layout(), CostAssumptions()) == pytest.approx(expected, rel=1e-9)


def test_bf16_gradients_are_cast_and_a_freed_buffer_is_not_zeroed() -> None:
    # a bf16 buffer: the shard's gradients cast to fp32 first (read 2, write 4), the buffer
    # zeroed at 2 bytes a parameter
    bf16 = CostAssumptions(gradient_bytes_per_param=2)
    expected = seconds(PARAMS / 8 * (38 + 6) + PARAMS * 2)
    assert optimizer_step_s(layout(), bf16) == pytest.approx(expected, rel=1e-9)
    freed = CostAssumptions(gradient_buffer_zeroed=False)
    assert optimizer_step_s(layout(), freed) == pytest.approx(seconds(PARAMS / 8 * 38), rel=1e-9)


def test_without_zero_every_rank_steps_every_parameter() -> None:
    expected = seconds(PARAMS * 38 + PARAMS * 4)
    assert optimizer_step_s(layout(zero=0), CostAssumptions()) == pytest.approx(expected, rel=1e-9)


def test_torchtitan_steps_its_fsdp_shard_with_fused_adamw() -> None:
    # fully_shard over 8: the shard is the master (no copy); fused AdamW 28, the clip's norm 4
    # and rescale 8; its sharded fp32 gradients zeroed (4 bytes a shard parameter)
    titan = engine_assumptions(get_engine("torchtitan"), CostAssumptions())
    expected = seconds(PARAMS / 8 * 40 + PARAMS / 8 * 4)
    assert optimizer_step_s(layout(zero=3), titan) == pytest.approx(expected, rel=1e-9)


def test_the_fullest_pipeline_rank_sets_the_step() -> None:
    # pp 2: 16 layers a rank, the first with the embedding and the last with the head (untied,
    # V h each); both hold 16 layers + V h parameters, stepped whole under ZeRO-0 with dp 4
    rank_params = 16 * MODEL.params_per_layer + MODEL.vocab_size * MODEL.hidden_size
    expected = seconds(rank_params * (38 + 4))
    assert optimizer_step_s(layout(pp=2, zero=0), CostAssumptions()) == pytest.approx(
        expected, rel=1e-9
    )


def test_the_waterfall_charges_it_last_and_it_adds_to_the_step() -> None:
    estimate = evaluate(job(), layout(), "standard", CostAssumptions())
    assert estimate.mfu_steps[-1].name == MFU_STEP_NAMES[-1] == "after optimizer step"
    step = estimate.step_time_s
    before = step - estimate.times_s["optimizer_step"]
    # MFU is model FLOPs over the step: the last two steps differ by the optimiser's share
    assert estimate.mfu_steps[-2].mfu / estimate.mfu_steps[-1].mfu == pytest.approx(step / before)
    zero = evaluate(job(), layout(), "standard", CostAssumptions(optimizer_step_bytes_per_param=0))
    free = CostAssumptions(optimizer_step_bytes_per_param=0, gradient_buffer_zeroed=False)
    assert evaluate(job(), layout(), "standard", free).times_s["optimizer_step"] == 0
    assert zero.step_time_s < step


def test_a_gpu_without_a_memory_bandwidth_charges_no_step() -> None:
    bare = H100.model_copy(update={"memory_bandwidth_gb_s": None})
    unknown = job().model_copy(update={"cluster": ClusterSpec(gpus=8, gpu=bare, gpus_per_node=8)})
    estimate = evaluate(unknown, layout(), "standard", CostAssumptions())
    assert estimate.times_s["optimizer_step"] == 0
    # and the answer says what that leaves out
    assert any("no memory_bandwidth_gb_s" in warning for warning in estimate.warnings)
    priced = evaluate(job(), layout(), "standard", CostAssumptions())
    assert not any("memory_bandwidth_gb_s" in warning for warning in priced.warnings)


@pytest.mark.parametrize("engine", ["generic", "megatron", "torchtitan"])
def test_sharding_never_lengthens_the_step_it_prices(engine: str) -> None:
    # more data-parallel ranks or a higher ZeRO stage shard the optimiser state finer: the
    # rank steps fewer parameters (the gradient buffer it zeroes shrinks only from ZeRO-2);
    # without ZeRO every rank steps all of them, however many there are
    priced = engine_assumptions(get_engine(engine), CostAssumptions())
    stages = (3,) if engine == "torchtitan" else (0, 1)
    for zero in stages:
        few, many = (
            evaluate(job(gpus), layout(zero=zero), "standard", priced).times_s["optimizer_step"]
            for gpus in (8, 64)
        )
        assert 0 < many < few if zero else many == few
    if engine != "torchtitan":
        unsharded, sharded = (optimizer_step_s(layout(zero=zero), priced) for zero in (0, 1))
        assert sharded < unsharded
