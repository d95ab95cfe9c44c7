"""The scaling curve's request and answer (`POST /v1/scaling`, `layoutopt scaling`). The
study spec itself is the studies room's `StudySpec`; its rows are flat dicts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.schemas.answers import STATUS_DESCRIPTION, EstimateOut, SolverOut, estimate_out
from api.schemas.requests import ClusterIn, SearchRequest
from models.hardware import MAX_GPUS
from models.job import TrainingJob
from models.strict import REQUEST_CONFIG, JsonInt
from optimizer.studies import (
    MAX_SCALING_POINTS,
    ScalingPoint,
    check_counts,
    not_reached_warnings,
    whole_node_counts,
)

GpuCount = Annotated[JsonInt, Field(gt=0, le=MAX_GPUS)]


class GpuRange(BaseModel):
    """Every whole-node GPU count from `min_gpus` to `max_gpus` (nodes of
    `cluster.gpus_per_node`)."""

    model_config = REQUEST_CONFIG

    min_gpus: GpuCount
    max_gpus: GpuCount


class ScalingClusterIn(ClusterIn):
    """The cluster of a scaling curve: `gpus` is the curve's to vary, so it may be left out."""

    gpus: JsonInt | None = Field(  # type: ignore[assignment]
        None, gt=0, le=MAX_GPUS, description="Ignored: the curve's counts replace it."
    )


SCALING_EXAMPLE: dict[str, Any] = {
    "model": "llama3-70b",
    "cluster": {"gpu": "h100-sxm", "gpus_per_node": 8},
    "training": {"global_batch": 1024, "seq_len": 8192},
    "gpu_counts": [64, 128, 256, 512, 1024],
}


class ScalingRequest(SearchRequest):
    """One job and the GPU counts to find its best layout at: a list, or a range of whole
    nodes. `explain` defaults to false: schedulers want the table, fast."""

    model_config = REQUEST_CONFIG | ConfigDict(json_schema_extra={"examples": [SCALING_EXAMPLE]})

    cluster: ScalingClusterIn  # type: ignore[assignment]
    gpu_counts: list[GpuCount] | None = Field(
        None, min_length=1, max_length=MAX_SCALING_POINTS, description="GPU counts to price."
    )
    gpu_range: GpuRange | None = Field(None, description="Or: every whole-node count in a range.")
    explain: bool = Field(False, description="Work out what binds each point (slower).")

    @model_validator(mode="after")
    def _one_way_to_count(self) -> ScalingRequest:
        if (self.gpu_counts is None) == (self.gpu_range is None):
            raise ValueError("give either gpu_counts or gpu_range")
        return self

    def counts(self) -> list[int]:
        """The counts, ascending and bounded (StudyError naming the numbers past the bound)."""
        if self.gpu_counts is not None:
            return check_counts(self.gpu_counts)
        assert self.gpu_range is not None
        span = self.gpu_range
        return whole_node_counts(span.min_gpus, span.max_gpus, self.cluster.gpus_per_node)

    def job(self) -> TrainingJob:
        """The job at the curve's first count (each point replaces the count)."""
        first = self.counts()[0]
        cluster = ClusterIn.model_validate(self.cluster.model_dump() | {"gpus": first})
        return TrainingJob(model=self.model, cluster=cluster.to_domain(), training=self.training)


class ScalingPointOut(BaseModel):
    gpus: int
    nodes: int
    status: Literal["optimal", "feasible", "infeasible", "unknown", "error"] = Field(
        description=STATUS_DESCRIPTION + " error: this count could not be searched."
    )
    mfu: float | None
    tokens_per_s_per_gpu: float | None
    tokens_per_s: float | None = Field(description="All GPUs together.")
    step_time_s: float | None
    best: EstimateOut | None
    solver: SolverOut | None
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)
    reached: bool = Field(
        True,
        description="false: the time limit (which bounds the whole curve) ran out, or the "
        "request was stopped, before this count was searched; its status is unknown.",
    )


class ScalingOut(BaseModel):
    """The best layout and throughput at each GPU count, ascending."""

    points: list[ScalingPointOut]
    complete: bool = Field(
        description="Every point proved (optimal or infeasible) or refused: more time would "
        "change nothing."
    )
    wall_s: float
    warnings: list[str] = Field(
        default_factory=list, description="What the curve as a whole did not reach, and why."
    )


def scaling_point_out(point: ScalingPoint) -> ScalingPointOut:
    result = point.result
    best = None if result is None or result.best is None else estimate_out(result.best)
    return ScalingPointOut(
        gpus=point.gpus,
        nodes=point.nodes,
        status=point.status,  # type: ignore[arg-type]
        mfu=None if best is None else best.mfu,
        tokens_per_s_per_gpu=None if best is None else best.tokens_per_s_per_gpu,
        tokens_per_s=None if best is None else round(best.tokens_per_s_per_gpu * point.gpus, 1),
        step_time_s=None if best is None else best.step_time_s,
        best=best,
        solver=None if result is None else SolverOut(**vars(result.solver)),
        error=point.error,
        warnings=[] if result is None else list(result.warnings),
        reached=point.reached,
    )


def scaling_out(points: list[ScalingPoint], complete: bool, wall_s: float) -> ScalingOut:
    return ScalingOut(
        points=[scaling_point_out(point) for point in points],
        complete=complete,
        wall_s=round(wall_s, 4),
        warnings=not_reached_warnings(points),
    )
