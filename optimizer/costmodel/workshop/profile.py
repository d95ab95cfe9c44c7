"""Profile `workshop` behind the `Profile` interface: the teaching plate's formulas
(formulas.py) for one layout in full, or a grid at once."""

from __future__ import annotations

import numpy as np

from models.errors import InvalidSpec
from models.hardware import GpuSpec
from models.job import TrainingJob
from models.layout import Layout, Recompute, Schedule
from optimizer.costmodel.assumptions import PLATE_KERNEL_EFFICIENCY, CostAssumptions
from optimizer.costmodel.estimate import Estimate, MemoryBytes, MfuStep
from optimizer.costmodel.grid import GridPrices, LayoutGrid
from optimizer.costmodel.warnings import cluster_warnings, engine_warnings
from optimizer.costmodel.workshop import formulas as workshop

MFU_STEP_NAMES = (
    "kernel efficiency",
    "after pipeline bubble",
    "after tensor-parallel communication",
    "after data-parallel communication",
    "after recomputation",
)


def _workshop_unpriced(layout: Layout) -> list[str]:
    warnings = []
    if layout.cp > 1:
        warnings.append(
            f"profile workshop does not price context parallelism's K/V exchange: cp({layout.cp}) "
            "only divides activations here"
        )
    if layout.zero >= 3:
        warnings.append("profile workshop does not price ZeRO-3's parameter all-gathers")
    if layout.schedule != Schedule.ONE_F_ONE_B or layout.ep > 1:
        warnings.append(
            f"profile workshop prices 1F1B without experts: schedule {layout.schedule.value} "
            f"and ep({layout.ep}) are ignored here; profile standard prices them"
        )
    return warnings


def _workshop_model_warnings(job: TrainingJob) -> list[str]:
    if job.model.is_moe:
        return [
            "profile workshop prices every layer as dense: a mixture-of-experts model's compute "
            "and all-to-alls need profile standard"
        ]
    return []


def capacity_bytes(gpu: GpuSpec) -> float:
    """The plate's capacity: the GPU's nominal memory (no runtime is priced beside it)."""
    return gpu.memory_bytes


def price_workshop(job: TrainingJob, layout: Layout, assumptions: CostAssumptions) -> Estimate:
    if layout.recompute == Recompute.SELECTIVE:
        raise InvalidSpec(
            "profile workshop prices recompute 'none' or 'full'; selective recompute needs "
            "profile standard",
            "layout.recompute",
        )
    b = workshop_breakdown(job, LayoutGrid.from_layouts([layout]), assumptions)
    factors = (1 - b.bubble, b.tp_factor, b.dp_factor, b.recompute_factor)
    mfus = [b.kernel_efficiency]
    for factor in factors:
        mfus.append(mfus[-1] * float(factor[0]))
    step_time_s = float(b.step_time_s[0])
    return Estimate(
        profile="workshop",
        layout=layout,
        micro_batches=int(b.micro_batches[0]),
        memory=MemoryBytes(
            weights=float(b.weights_bytes[0]),
            gradients=float(b.gradients_bytes[0]),
            optimizer=float(b.optimizer_bytes[0]),
            activations=float(b.activations_bytes[0]),
            capacity=capacity_bytes(job.cluster.gpu),
        ),
        bubble=float(b.bubble[0]),
        mfu_steps=tuple(MfuStep(name, mfu) for name, mfu in zip(MFU_STEP_NAMES, mfus, strict=True)),
        step_time_s=step_time_s,
        tokens_per_s_per_gpu=job.training.tokens_per_step / (step_time_s * job.cluster.gpus),
        times_s={
            "layer_compute": float(b.layer_compute_s[0]),
            "tp_comm_per_layer": float(b.tp_comm_s[0]),
            "dp_comm": float(b.dp_comm_s[0]),
            "step_compute": float(b.step_compute_s[0]),
        },
        warnings=tuple(
            engine_warnings(job, layout)
            + cluster_warnings(job)
            + _workshop_unpriced(layout)
            + _workshop_model_warnings(job)
        ),
    )


def workshop_breakdown(
    job: TrainingJob, grid: LayoutGrid, assumptions: CostAssumptions
) -> workshop.Breakdown:
    """The workshop formulas over a grid; one layout is a grid of one. The plate prices
    bf16 only, so an fp8 job is refused rather than priced as bf16."""
    if job.training.precision != "bf16":
        raise InvalidSpec(
            f"profile workshop prices bf16 matmuls only; precision {job.training.precision} "
            "needs profile standard",
            "training.precision",
        )
    return workshop.breakdown(
        job,
        assumptions.matmul_efficiency_or(PLATE_KERNEL_EFFICIENCY),
        tp=grid.tp,
        pp=grid.pp,
        cp=grid.cp,
        dp=grid.dp,
        vpp=grid.vpp,
        micro_batch=grid.micro_batch,
        zero=grid.zero,
        full_recompute=grid.is_recompute(Recompute.FULL),
        tp_in_node=grid.span("tp") <= job.cluster.gpus_per_node,
    )


def price_workshop_grid(
    job: TrainingJob, grid: LayoutGrid, assumptions: CostAssumptions
) -> GridPrices:
    b = workshop_breakdown(job, grid, assumptions)
    return GridPrices(
        weights_bytes=np.asarray(b.weights_bytes, dtype=float),
        gradients_bytes=np.asarray(b.gradients_bytes, dtype=float),
        optimizer_bytes=np.asarray(b.optimizer_bytes, dtype=float),
        activations_bytes=np.asarray(b.activations_bytes, dtype=float),
        runtime_bytes=np.zeros_like(np.asarray(b.mfu, dtype=float)),  # the plate prices none
        bubble=np.asarray(b.bubble, dtype=float),
        mfu=np.asarray(b.mfu, dtype=float),
    )
