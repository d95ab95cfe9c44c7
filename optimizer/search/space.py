"""The search space a request asks for: its `search` object, every field optional, each
list of values capped (every value multiplies the layouts to price). problem.py resolves
it against a job."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from models.layout import (
    DIMENSIONS,
    MAX_DEGREE,
    Dimension,
    Recompute,
    RecomputeMode,
    Schedule,
    ScheduleName,
)
from models.strict import SPEC_CONFIG, JsonInt
from optimizer.costmodel import recompute_code

MAX_SEARCH_VPP = 64
# Lists of knob values a request may give: every value multiplies the layouts to price, so
# the lists are capped (a 10 KB body of 2,000 micro-batch sizes once took 1.85 GB).
MAX_MICRO_BATCH_VALUES = 16
Stage = Annotated[JsonInt, Field(ge=0, le=3)]
MicroBatch = Annotated[JsonInt, Field(ge=1, le=1_000_000)]
# How a layout's memory is held to the limit: the upper end of its memory interval (the
# published runs' misses of its regime) or the point estimate alone.
MemoryFitRule = Literal["interval", "point"]


class SearchSpace(BaseModel):
    """Bounds and allowed values of the search; None means "the solver chooses"."""

    model_config = SPEC_CONFIG

    tp: JsonInt | None = Field(
        None, gt=0, le=MAX_DEGREE, description="Fix the tensor-parallel degree."
    )
    pp: JsonInt | None = Field(
        None, gt=0, le=MAX_DEGREE, description="Fix the pipeline-parallel degree."
    )
    cp: JsonInt | None = Field(
        None, gt=0, le=MAX_DEGREE, description="Fix the context-parallel degree."
    )
    vpp: JsonInt | None = Field(
        None, gt=0, le=MAX_SEARCH_VPP, description="Fix the interleaved chunks per device."
    )
    max_vpp: JsonInt | None = Field(
        None,
        gt=0,
        le=MAX_SEARCH_VPP,
        description="Most interleaved chunks; default: the profile's (workshop 4, standard 8), "
        "or a fixed vpp when larger.",
    )
    zero_stages: list[Stage] | None = Field(
        None,
        min_length=1,
        max_length=4,
        description="Allowed ZeRO stages; default: every stage the profile prices.",
    )
    recompute: list[RecomputeMode] | None = Field(
        None,
        min_length=1,
        max_length=len(Recompute),
        description="Allowed recompute modes; default: every mode the profile prices.",
    )
    micro_batches: list[MicroBatch] = Field(
        [1],
        min_length=1,
        max_length=MAX_MICRO_BATCH_VALUES,
        description="Allowed micro-batch sizes (sequences per micro-batch).",
    )
    schedules: list[ScheduleName] | None = Field(
        None,
        min_length=1,
        max_length=len(Schedule),
        description="Allowed pipeline schedules; default: every one the profile prices.",
    )
    ep: JsonInt | None = Field(
        None, gt=0, le=MAX_DEGREE, description="Fix the expert-parallel degree (MoE)."
    )
    memory_limit_gb: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Per-device memory limit on everything a GPU holds (under profile "
        "standard the CUDA context and NCCL's buffers too); default the GPU's: what CUDA "
        "reports as its total (usable_memory_gb) for standard, its nominal memory_gb for "
        "workshop.",
    )
    memory_fit: MemoryFitRule = Field(
        "interval",
        description="What must be under the memory limit: `interval`, the upper end of the "
        "layout's memory interval (like runs measured up to that much more than the estimate), "
        "or `point`, the estimate alone. Under a profile without intervals (workshop) the "
        "estimate; the answer's memory_fit says which rule held and what it costs.",
    )
    even_stages: bool = Field(
        False,
        description="Every pipeline chunk holds the same number of layers (num_layers divisible "
        "by pp * vpp), as engines without uneven splits require; relaxable.",
    )
    min_interleaved_pp: JsonInt | None = Field(
        None,
        ge=2,
        le=1_000_000,
        description="The fewest pipeline stages interleaving (vpp > 1) may run on; 3 for "
        "Megatron-LM's engines that asserted 'pipeline-model-parallel size should be greater "
        "than 2 with interleaved schedule'; relaxable. Default: no limit.",
    )
    require_tp_divides_kv_heads: bool = Field(
        True, description="tp must divide the KV heads (Megatron-LM's rule); relaxable."
    )
    placement: tuple[Dimension, ...] | None = Field(
        None,
        strict=False,  # a JSON list
        min_length=4,
        max_length=4,
        description="Fix the order of dimensions, innermost first, each once; default: the "
        "solver's.",
    )

    @field_validator("zero_stages")
    @classmethod
    def _zero_stages_in_order(cls, stages: list[int] | None) -> list[int] | None:
        if stages is None:
            return None
        return sorted(set(stages))

    @field_validator("recompute")
    @classmethod
    def _recompute_in_order(cls, modes: list[Recompute] | None) -> list[Recompute] | None:
        return None if modes is None else sorted(set(modes), key=recompute_code)

    @field_validator("micro_batches")
    @classmethod
    def _micro_batches_in_order(cls, sizes: list[int]) -> list[int]:
        return sorted(set(sizes))

    @field_validator("placement")
    @classmethod
    def _placement_is_a_permutation(
        cls, placement: tuple[str, ...] | None
    ) -> tuple[str, ...] | None:
        if placement is not None and sorted(placement) != sorted(DIMENSIONS):
            raise ValueError(
                f"placement must order each of {list(DIMENSIONS)} once, got {list(placement)}"
            )
        return placement

    @model_validator(mode="after")
    def _vpp_within_max(self) -> SearchSpace:
        if self.vpp is not None and self.max_vpp is not None and self.vpp > self.max_vpp:
            raise ValueError(f"vpp({self.vpp}) exceeds max_vpp({self.max_vpp})")
        return self
