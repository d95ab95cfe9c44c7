"""The Megatron-LM export writes --overlap-moe-expert-parallel-comm exactly where the cost
model prices the expert all-to-all paired: one rule (costmodel ranks.paired_overlap_on), the
dispatcher the engine's own addition, over every layout of a MoE model the engine runs."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

from models.errors import InvalidSpec
from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer.costmodel import CostAssumptions, LayoutGrid
from optimizer.costmodel.standard.breakdown import breakdown
from optimizer.costmodel.standard.profile import grid_degrees
from optimizer.engines import engine_assumptions, ensure_runnable, export, get_engine

FLAG = "--overlap-moe-expert-parallel-comm"
# a share hidden without the paired overlap, so that a paired price differs from an unpaired
# one even where no pass runs paired (a step no longer than the warm-up)
ASSUMED = CostAssumptions(moe_all_to_all_overlap_fraction=0.3)


def mixtral_job(gpu: str) -> TrainingJob:
    return TrainingJob(
        model=model_preset("mixtral-8x7b"),
        cluster=ClusterSpec(gpus=64, gpu=gpu_preset(gpu)),
        training=TrainingSpec(global_batch=256, seq_len=4096, precision="bf16"),
    )


def layouts() -> list[Layout]:
    """Every combination of the knobs the rule reads (pp 1 with a moot schedule among them)."""
    knobs = product((1, 2), (1, 2), (1, 2, 4), (1, 2), (1, 8), ("selective", "full"))
    return [
        Layout(tp=tp, cp=cp, pp=pp, vpp=vpp, ep=ep, recompute=r, schedule=schedule, zero=1)
        for tp, cp, pp, vpp, ep, r in knobs
        for schedule in (("1f1b", "zero-bubble") if vpp == 1 else ("1f1b",))
    ]


def a2a_s(job: TrainingJob, runnable: list[Layout], settings: dict[str, object]) -> np.ndarray:
    """Each layout's expert all-to-all a micro-batch, priced at once by the formulas
    `evaluate` prices one layout with (a grid of one)."""
    a = engine_assumptions(get_engine("megatron", settings), ASSUMED)
    grid = grid_degrees(LayoutGrid.from_layouts(runnable))
    return np.asarray(breakdown(job, a, grid).layer_times_s["moe_all_to_all"])


@pytest.mark.parametrize(
    ("gpu", "dispatcher"), [("gb200", "alltoall"), ("h100-sxm", "flex"), ("gb200", "allgather")]
)
def test_the_export_writes_the_overlap_exactly_where_it_is_priced(
    gpu: str, dispatcher: str
) -> None:
    job = mixtral_job(gpu)
    asked = {"overlap_moe_expert_parallel_comm": True, "moe_token_dispatcher_type": dispatcher}
    engine = get_engine("megatron", asked)
    runnable, flagged = [], []
    for layout in layouts():
        try:
            resolved = ensure_runnable(engine, job, layout)
        except InvalidSpec:
            continue  # a layout Megatron-LM refuses has no export to agree with
        runnable.append(resolved)
        flagged.append(FLAG in export(engine, job, resolved).text)
    assert len(runnable) > 40
    not_asked = asked | {"overlap_moe_expert_parallel_comm": False}
    paired = a2a_s(job, runnable, asked) != a2a_s(job, runnable, not_asked)
    disagree = [str(x) for x, f, p in zip(runnable, flagged, paired, strict=True) if f != p]
    assert not disagree
    # the rule has both answers to give here, but for a dispatcher that refuses the overlap
    assert any(flagged) == (dispatcher != "allgather")
    assert not all(flagged)
