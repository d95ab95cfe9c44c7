"""Request and response schemas: the one request shape shared by HTTP, CLI and client.

Domain objects (`models/`, `optimizer/`) are embedded as they are; this module only adds
the edge: preset names and Hugging Face configs resolved to specs, and estimates turned
into the rounded JSON of the interface contract (docs/interface.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from models.hardware import MAX_GPUS, ClusterSpec, GpuSpec
from models.hf_config import from_hf_config, looks_like_hf_config
from models.job import TrainingJob
from models.layout import Dimension, Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from optimizer.assumptions import CostAssumptions
from optimizer.estimate import Estimate

MEMORY_DECIMALS = 2  # GB, as the plate prints
FRACTION_DECIMALS = 4


def _model_from_ref(value: Any) -> Any:
    """A preset name or a Hugging Face config.json becomes a TransformerSpec."""
    if isinstance(value, str):
        return model_preset(value)
    if isinstance(value, Mapping) and looks_like_hf_config(value):
        return from_hf_config(value)
    return value


def _gpu_from_ref(value: Any) -> Any:
    return gpu_preset(value) if isinstance(value, str) else value


ModelRef = Annotated[
    TransformerSpec,
    BeforeValidator(_model_from_ref, json_schema_input_type=str | TransformerSpec | dict[str, Any]),
    Field(description="A preset name, a full spec, or a Hugging Face config.json object."),
]
GpuRef = Annotated[
    GpuSpec,
    BeforeValidator(_gpu_from_ref, json_schema_input_type=str | GpuSpec),
    Field(description="A GPU preset name or a full GPU spec."),
]

PLATE_EXAMPLE: dict[str, Any] = {
    "model": "llama3-405b",
    "cluster": {"gpus": 16384, "gpu": "h100-sxm", "gpus_per_node": 8},
    "training": {"global_batch": 2048, "seq_len": 8192},
    "layout": {
        "tp": 8,
        "pp": 16,
        "cp": 1,
        "vpp": 4,
        "micro_batch": 1,
        "zero": 2,
        "recompute": "none",
    },
    "profile": "workshop",
}


class ClusterIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpus: int = Field(gt=0, le=MAX_GPUS, description="GPUs in the job.")
    gpu: GpuRef = Field("h100-sxm", validate_default=True)  # type: ignore[assignment]
    gpus_per_node: int = Field(8, gt=0, le=1024, description="GPUs sharing one NVLink domain.")

    def to_domain(self) -> ClusterSpec:
        return ClusterSpec(gpus=self.gpus, gpu=self.gpu, gpus_per_node=self.gpus_per_node)


class PlanRequest(BaseModel):
    """What every route takes: the job, and which cost model prices it."""

    model_config = ConfigDict(extra="forbid")

    model: ModelRef
    cluster: ClusterIn
    training: TrainingSpec = TrainingSpec()
    profile: str = Field("workshop", max_length=64, description="Cost-model profile.")
    assumptions: CostAssumptions = CostAssumptions()

    def job(self) -> TrainingJob:
        return TrainingJob(
            model=self.model, cluster=self.cluster.to_domain(), training=self.training
        )


class EvaluateRequest(PlanRequest):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [PLATE_EXAMPLE]})

    layout: Layout = Layout()


class LayoutOut(BaseModel):
    tp: int
    pp: int
    cp: int
    dp: int
    vpp: int
    micro_batch: int
    micro_batches: int
    zero: int
    recompute: str
    placement: list[Dimension]


class MemoryOut(BaseModel):
    weights: float
    gradients: float
    optimizer: float
    activations: float
    total: float
    capacity: float


class MfuStepOut(BaseModel):
    name: str
    mfu: float


class EstimateOut(BaseModel):
    """One priced layout, rounded as the plate prints: GB to 2 decimals, fractions to 4."""

    profile: str
    layout: LayoutOut
    memory_gb: MemoryOut
    fits: bool
    bubble: float
    mfu: float
    mfu_steps: list[MfuStepOut]
    step_time_s: float
    tokens_per_s_per_gpu: float
    times_s: dict[str, float]
    warnings: list[str]


def _gb(value_bytes: float) -> float:
    return round(value_bytes / 1e9, MEMORY_DECIMALS)


def _fraction(value: float) -> float:
    return round(value, FRACTION_DECIMALS)


def estimate_out(estimate: Estimate) -> EstimateOut:
    layout, memory = estimate.layout, estimate.memory
    return EstimateOut(
        profile=estimate.profile,
        layout=LayoutOut(
            tp=layout.tp,
            pp=layout.pp,
            cp=layout.cp,
            dp=layout.data_parallel_size,
            vpp=layout.vpp,
            micro_batch=layout.micro_batch,
            micro_batches=estimate.micro_batches,
            zero=layout.zero,
            recompute=layout.recompute.value,
            placement=list(layout.placement),
        ),
        memory_gb=MemoryOut(
            weights=_gb(memory.weights),
            gradients=_gb(memory.gradients),
            optimizer=_gb(memory.optimizer),
            activations=_gb(memory.activations),
            total=_gb(memory.total),
            capacity=_gb(memory.capacity),
        ),
        fits=estimate.fits,
        bubble=_fraction(estimate.bubble),
        mfu=_fraction(estimate.mfu),
        mfu_steps=[MfuStepOut(name=s.name, mfu=_fraction(s.mfu)) for s in estimate.mfu_steps],
        step_time_s=round(estimate.step_time_s, 4),
        tokens_per_s_per_gpu=round(estimate.tokens_per_s_per_gpu, 2),
        times_s={name: float(f"{value:.6g}") for name, value in estimate.times_s.items()},
        warnings=list(estimate.warnings),
    )


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail


class PresetsOut(BaseModel):
    """The catalogue: each preset's spec and the source of its figures."""

    models: dict[str, dict[str, Any]]
    gpus: dict[str, dict[str, Any]]


class ReadyOut(BaseModel):
    status: str
    solver_admitted: int = Field(description="Solves running or queued now.")
    solver_capacity: int = Field(description="Workers plus queue depth: more gets 503.")
