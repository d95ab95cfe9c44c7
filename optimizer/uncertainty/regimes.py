"""The regime of a job: what the validation rows are grouped by when one asks how well the
cost model does for jobs like it (GPU generation, precision, scale, dense or MoE, engine).

Functions of a `TrainingJob`, so a request is placed in the same regimes as the rows are.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from models.job import TrainingJob

# The architecture of each GPU family (a preset's name up to its first hyphen, which the data
# file's own clusters keep: `h100-96gb-grand-teton`), as the vendors name them.
GPU_GENERATIONS = {
    "a100": "Ampere",
    "h100": "Hopper",
    "h200": "Hopper",
    "b200": "Blackwell",
    "gb200": "Blackwell",
    "b300": "Blackwell",
    "gb300": "Blackwell",
    "mi300x": "AMD CDNA",
    "mi325x": "AMD CDNA",
    "mi350x": "AMD CDNA",
    "mi355x": "AMD CDNA",
}
GPU_COUNT_BUCKETS = ((64, "8-64"), (512, "65-512"), (4096, "513-4,096"))
# Precisions whose matmuls run below bf16 (their casts and scaling priced apart).
LOW_PRECISIONS = ("fp8", "mxfp8", "nvfp4")


def gpu_generation(job: TrainingJob) -> str:
    return GPU_GENERATIONS.get(job.cluster.gpu.name.split("-")[0], "other")


def gpu_count_bucket(job: TrainingJob) -> str:
    for bound, label in GPU_COUNT_BUCKETS:
        if job.cluster.gpus <= bound:
            return label
    return "over 4,096"


def dense_or_moe(job: TrainingJob) -> str:
    return "MoE" if job.model.is_moe else "dense"


def precision_class(precision: str) -> str:
    """bf16 and fp16 are one regime (bf16 matmuls); the 8- and 4-bit formats another."""
    return "fp8/fp4" if precision in LOW_PRECISIONS else "bf16/fp16"


@dataclass(frozen=True)
class Regime:
    """A job's regime; None in a field: any value (a widened regime)."""

    engine: str | None
    generation: str | None
    precision: str | None
    architecture: str | None
    scale: str | None

    def holds(self, other: Regime) -> bool:
        """Whether `other` (a row's full regime) falls in this one."""
        return all(getattr(self, f.name) in (None, getattr(other, f.name)) for f in fields(self))

    def widened(self) -> list[Regime]:
        """This regime, then ever wider ones: scale first, the GPU generation last, down to
        every row."""
        regimes = [self]
        for name in ("scale", "architecture", "engine", "precision", "generation"):
            regimes.append(replace(regimes[-1], **{name: None}))
        return regimes

    def words(self) -> str:
        named = [str(getattr(self, f.name)) for f in fields(self) if getattr(self, f.name)]
        return ", ".join(named) if named else "every regime"


def regime_of(job: TrainingJob, engine: str | None, precision: str) -> Regime:
    """The job's regime under `engine` (bare or with a version: the version is not split)."""
    family = None if engine is None else engine.partition("@")[0]
    return Regime(
        family or "generic",
        gpu_generation(job),
        precision_class(precision),
        dense_or_moe(job),
        gpu_count_bucket(job),
    )
