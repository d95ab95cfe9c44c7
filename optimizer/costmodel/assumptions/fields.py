"""Shared pieces of the assumption groups: the plate's constants, bounds and field makers."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

# The workshop plate's kernel efficiency, measured against H100 (whose matmul ceiling, the
# maximum achievable matmul FLOP/s, is 80.3% of peak: stas00/ml-engineering@744d01e
# compute/accelerator/README.md l.342-379).
PLATE_KERNEL_EFFICIENCY = 0.6
PLATE_GPU_MATMUL_EFFICIENCY = 0.803

# An efficiency below 1% is a typo, not a cluster: refusing it keeps every figure finite.
MIN_EFFICIENCY = 0.01


def fraction_field(default: float, description: str) -> float:
    return Field(default, ge=0, le=1, description=description)


def per_zero_stage_field(default: list[Any], description: str) -> Any:
    """One value for each of ZeRO stages 0, 1 and 2 (stage 3 is priced apart)."""
    return Field(default, min_length=3, max_length=3, description=description)


# Volumes of a stage's parameters a data-parallel sync sends (docs/cost-model.md, "Engines").
Volumes = Annotated[float, Field(ge=0, le=100)]
# HBM bytes per parameter a gradient accumulation pass moves
AccumulationBytes = Annotated[float, Field(ge=0, le=64)]


def latency_field(default: float, description: str) -> float:
    return Field(default, ge=0, le=1e-3, description=description)
