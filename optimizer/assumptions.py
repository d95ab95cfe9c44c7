"""Named assumptions of the cost model: every figure that is a judgement, not a spec, lives here."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CostAssumptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kernel_efficiency: float = Field(
        0.6,
        gt=0,
        le=1,
        description=(
            "Fraction of peak FLOP/s that the matmul kernels reach with no communication or "
            "bubble (the workshop plate's assumption: 0.6)."
        ),
    )
