"""The cost model's front door: the profiles by name, and pricing one layout of one job.

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
from models.hardware import GpuSpec
from models.job import TrainingJob
from models.layout import Layout, resolve_layout
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.estimate import Estimate
from optimizer.costmodel.grid import GridPrices, LayoutBox, LayoutGrid
from optimizer.costmodel.standard.profile import (
    capacity_bytes as standard_capacity_bytes,
)
from optimizer.costmodel.standard.profile import (
    mfu_ceiling_standard_box,
    price_standard,
    price_standard_box,
    price_standard_grid,
)
from optimizer.costmodel.workshop.profile import capacity_bytes as workshop_capacity_bytes
from optimizer.costmodel.workshop.profile import price_workshop, price_workshop_grid

Pricer = Callable[[TrainingJob, Layout, CostAssumptions], Estimate]
GridPricer = Callable[[TrainingJob, LayoutGrid, CostAssumptions], GridPrices]
BoxPricer = Callable[[TrainingJob, LayoutBox, CostAssumptions], GridPrices]
BoxCeiling = Callable[[TrainingJob, LayoutBox, CostAssumptions], np.ndarray]


@dataclass(frozen=True)
class Profile:
    """A named cost model: one layout in full detail, a grid of layouts at once, or (when
    its formulas broadcast) a box of every combination, factored by what each reads."""

    name: str
    price: Pricer
    price_grid: GridPricer
    capacity: Callable[[GpuSpec], float]  # bytes a layout's parts share on one GPU
    price_box: BoxPricer | None = None
    # per box cell, an MFU that no ZeRO stage of its layout exceeds (the search's ceilings)
    mfu_ceiling_box: BoxCeiling | None = None


PROFILES: dict[str, Profile] = {
    "workshop": Profile("workshop", price_workshop, price_workshop_grid, workshop_capacity_bytes),
    "standard": Profile(
        "standard",
        price_standard,
        price_standard_grid,
        standard_capacity_bytes,
        price_standard_box,
        mfu_ceiling_standard_box,
    ),
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


def device_capacity_bytes(gpu: GpuSpec, profile: str) -> float:
    """The memory a layout's parts share on one GPU, as the profile's estimates state it
    (their `memory.capacity`): the search's default memory limit."""
    return profile_named(profile).capacity(gpu)


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
    if estimate.mfu_fp8_peak is not None:
        figures["mfu_fp8_peak"] = estimate.mfu_fp8_peak
    broken = [name for name, value in figures.items() if not math.isfinite(value)]
    if broken or estimate.step_time_s <= 0:
        raise InvalidSpec(
            f"the spec's figures drive {', '.join(broken) or 'step_time_s'} out of range "
            "(infinite or undefined): check efficiencies, FLOP/s and bandwidths near zero"
        )
    return estimate
