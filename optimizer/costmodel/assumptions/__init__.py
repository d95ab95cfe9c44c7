"""Named assumptions of the cost model: every figure that is a judgement, not a spec, lives here.

`workshop` reads only `kernel_efficiency`. `standard` reads all of them; docs/cost-model.md
gives the derivation and the source of each default. Defaults marked "judgement" are ours,
stated so that a user can change them, not figures from a paper.
"""

from __future__ import annotations

from models.strict import SPEC_CONFIG

from .communication import CommunicationAssumptions
from .fields import MIN_EFFICIENCY, PLATE_GPU_MATMUL_EFFICIENCY, PLATE_KERNEL_EFFICIENCY
from .kernels import KernelAssumptions
from .memory import MemoryAssumptions
from .provenance import CalibrationProvenance, ProvenanceAssumptions
from .schedule import ScheduleAssumptions

__all__ = [
    "MIN_EFFICIENCY",
    "PLATE_GPU_MATMUL_EFFICIENCY",
    "PLATE_KERNEL_EFFICIENCY",
    "CalibrationProvenance",
    "CostAssumptions",
]


class CostAssumptions(
    KernelAssumptions,
    CommunicationAssumptions,
    ScheduleAssumptions,
    MemoryAssumptions,
    ProvenanceAssumptions,
):
    """Every judgement the cost model makes, one named field each (the request's flat
    `assumptions` object), grouped by what it is about."""

    model_config = SPEC_CONFIG
