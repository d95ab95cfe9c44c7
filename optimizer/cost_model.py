"""The cost model's front door: price one layout of one job under a named profile.

One source of truth: the CLI, the HTTP API, the page, the enumerator and the CP-SAT model
all get their figures from the profile functions reached from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import AfterValidator, Field

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout, Recompute, Schedule, resolve_layout
from optimizer import workshop
from optimizer.assumptions import CostAssumptions
from optimizer.estimate import Estimate, MemoryBytes, MfuStep
from optimizer.grid import GridPrices, LayoutGrid
from optimizer.standard_profile import price_standard, price_standard_grid

Pricer = Callable[[TrainingJob, Layout, CostAssumptions], Estimate]
GridPricer = Callable[[TrainingJob, LayoutGrid, CostAssumptions], GridPrices]


@dataclass(frozen=True)
class Profile:
    """A named cost model: one layout in full detail, or a grid of layouts at once."""

    name: str
    price: Pricer
    price_grid: GridPricer


MFU_STEP_NAMES = (
    "kernel efficiency",
    "after pipeline bubble",
    "after tensor-parallel communication",
    "after data-parallel communication",
    "after recomputation",
)


def tp_in_node(job: TrainingJob, layout: Layout) -> bool:
    """Whether each tensor-parallel group sits inside one node's NVLink under the placement."""
    return layout.group_span("tp") <= job.cluster.gpus_per_node


def engine_warnings(job: TrainingJob, layout: Layout) -> list[str]:
    """What-ifs the formulas price but a training engine would refuse or run badly."""
    model, tp = job.model, layout.tp
    warnings = []
    if model.num_kv_heads % tp and tp % model.num_kv_heads == 0:
        warnings.append(
            f"tp({tp}) exceeds num_kv_heads({model.num_kv_heads}): engines such as Megatron-LM "
            "refuse to split KV heads this way (others replicate them); priced anyway"
        )
    elif model.num_kv_heads % tp:
        warnings.append(
            f"tp({tp}) does not divide num_kv_heads({model.num_kv_heads}): engines such as "
            "Megatron-LM refuse it; priced anyway"
        )
    if not tp_in_node(job, layout):
        span = layout.group_span("tp")
        warnings.append(
            f"tensor-parallel groups span {span} GPUs, beyond a node of {job.cluster.gpus_per_node}: "
            f"their all-reduces run on the network at {job.cluster.gpu.inter_node_gb_s:g} GB/s"
        )
    return warnings


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
            capacity=job.cluster.gpu.memory_bytes,
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
            + _workshop_unpriced(layout)
            + _workshop_model_warnings(job)
        ),
    )


def workshop_breakdown(
    job: TrainingJob, grid: LayoutGrid, assumptions: CostAssumptions
) -> workshop.Breakdown:
    """The workshop formulas over a grid; one layout is a grid of one."""
    return workshop.breakdown(
        job,
        assumptions.kernel_efficiency,
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
        bubble=np.asarray(b.bubble, dtype=float),
        mfu=np.asarray(b.mfu, dtype=float),
    )


PROFILES: dict[str, Profile] = {
    "workshop": Profile("workshop", price_workshop, price_workshop_grid),
    "standard": Profile("standard", price_standard, price_standard_grid),
}


def known_profile(name: str) -> str:
    """`name` if it is a profile (a validator: the error lists the known ones)."""
    profile_named(name)
    return name


# A request's profile: one of PROFILES, published as an enum.
ProfileName = Annotated[
    str, AfterValidator(known_profile), Field(json_schema_extra={"enum": list(PROFILES)})
]
DEFAULT_EVALUATE_PROFILE = "workshop"


def profile_named(name: str) -> Profile:
    if name not in PROFILES:
        raise InvalidSpec(
            f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}", "profile"
        )
    return PROFILES[name]


def evaluate(
    job: TrainingJob,
    layout: Layout,
    profile: str = DEFAULT_EVALUATE_PROFILE,
    assumptions: CostAssumptions | None = None,
) -> Estimate:
    """Resolve the layout against the job (deriving dp) and price it."""
    pricer = profile_named(profile).price
    estimate = pricer(job, resolve_layout(layout, job), assumptions or CostAssumptions())
    return require_finite(estimate)


def require_finite(estimate: Estimate) -> Estimate:
    """Refuse an estimate that overflowed: a silent inf or NaN would be a wrong answer."""
    memory = estimate.memory
    figures = {
        "memory": memory.total,
        "bubble": estimate.bubble,
        **{f"mfu_steps.{step.name}": step.mfu for step in estimate.mfu_steps},
        "step_time_s": estimate.step_time_s,
        "tokens_per_s_per_gpu": estimate.tokens_per_s_per_gpu,
        **{f"times_s.{name}": value for name, value in estimate.times_s.items()},
    }
    if estimate.hardware_flops_utilization is not None:
        figures["hardware_flops_utilization"] = estimate.hardware_flops_utilization
    broken = [name for name, value in figures.items() if not math.isfinite(value)]
    if broken or estimate.step_time_s <= 0:
        raise InvalidSpec(
            f"the spec's figures drive {', '.join(broken) or 'step_time_s'} out of range "
            "(infinite or undefined): check efficiencies, FLOP/s and bandwidths near zero"
        )
    return estimate
