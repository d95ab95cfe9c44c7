"""The stage search at the edge: its request (a search request and whether ranks may differ
in recompute) and its answer (the plan rank by rank, the even split beside it, what was
proved)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from models.strict import REQUEST_CONFIG
from optimizer import Request, StageSearch
from optimizer.engines import PLAN_EXPORTERS, export_plan, plan_layout_string
from optimizer.staging import PlanFound

from .answers import (
    FRACTION_DECIMALS,
    ExportOut,
    LayoutOut,
    MemoryFitOut,
    Status,
    export_out,
    layout_out,
    memory_fit_out,
)
from .requests import SEARCH_EXAMPLE, SearchRequest

# the plate under Megatron-LM, priced by profile standard: stage plans are priced rank by rank
STAGES_EXAMPLE: dict[str, Any] = SEARCH_EXAMPLE | {"engine": "megatron", "profile": "standard"}


class StagesRequest(SearchRequest):
    """A search request whose answer also chooses each pipeline rank's layers (and, where
    the engine allows, its recompute mode). Profile standard; `explain` is not used."""

    model_config = REQUEST_CONFIG | ConfigDict(json_schema_extra={"examples": [STAGES_EXAMPLE]})

    @field_validator("profile")
    @classmethod
    def _standard_only(cls, profile: str) -> str:
        if profile != "standard":
            raise ValueError("stage plans are priced by profile standard, rank by rank")
        return profile

    per_stage_recompute: bool | None = Field(
        None,
        description="Let each pipeline rank recompute in its own mode. Default: where the "
        "engine can launch it (generic); megatron and nemo set one mode for every stage.",
    )

    def to_request(self) -> Request:
        return replace(super().to_request(), per_stage_recompute=self.per_stage_recompute)


class RankOut(BaseModel):
    rank: int
    layers: int
    recompute: str
    memory_gb: float
    time_s: float = Field(description="One micro-batch's forward and backward on the rank.")


class StagePlanOut(BaseModel):
    layout: LayoutOut = Field(description="The degrees and knobs; `recompute` is rank 0's.")
    ranks: list[RankOut]
    mfu: float
    hfu: float
    step_time_s: float
    memory_gb: float = Field(description="The fullest rank's.")
    pipeline_layout: str = Field(
        description="The plan as Megatron-Core's --pipeline-model-parallel-layout "
        "(Megatron-Bridge: model.pipeline_model_parallel_layout)."
    )
    export: ExportOut | None = Field(
        None, description="The engine's artefact for the plan (megatron and nemo; best only)."
    )


class StagesSolverOut(BaseModel):
    wall_s: float
    proved_optimal: bool
    layouts: int = Field(description="Layouts searched, recompute apart.")
    examined: int = Field(description="Layouts examined one by one (capacity count or CP-SAT).")
    pruned: int = Field(description="Layouts whose bound proved them no better, unexamined.")
    plans: float = Field(description="Stage plans over the searched layouts.")
    rounding: float = Field(
        description="The solver's largest relative rounding of an overlap fraction or slot "
        "count: the optimum is proved to within it."
    )


class StagesOut(BaseModel):
    status: Status
    best: StagePlanOut | None
    even_best: StagePlanOut | None = Field(
        description="The best even split at one recompute mode: what the layout search sees."
    )
    gain: float | None = Field(description="best MFU / even_best MFU - 1.")
    solver: StagesSolverOut
    memory_fit: MemoryFitOut | None = Field(
        None,
        description="The rule each rank's memory was held to (search.memory_fit): by default "
        "the memory interval's upper end within the limit.",
    )


def plan_out(found: PlanFound, micro_batches: int) -> StagePlanOut:
    layout, plan, price = found.layout, found.plan, found.price
    ranks = [
        RankOut(
            rank=r,
            layers=n,
            recompute=plan.recompute[r].value,
            memory_gb=round(float(price.rank_memory[r].total) / 1e9, 2),
            time_s=float(f"{price.rank_time_s[r]:.6g}"),
        )
        for r, n in enumerate(plan.layers)
    ]
    layout = layout.model_copy(update={"recompute": plan.recompute[0]})
    return StagePlanOut(
        layout=layout_out(layout, micro_batches),
        ranks=ranks,
        mfu=round(price.mfu, FRACTION_DECIMALS),
        hfu=round(price.hfu, FRACTION_DECIMALS),
        step_time_s=round(price.step_time_s, 4),
        memory_gb=round(price.memory_bytes / 1e9, 2),
        pipeline_layout=plan_layout_string(plan.layers, layout.vpp),
    )


def plan_export(request: Request, found: PlanFound) -> ExportOut | None:
    """The launch artefact of the plan, where the request's engine writes one."""
    if request.engine is None or request.engine.name not in PLAN_EXPORTERS:
        return None
    layout = found.layout.model_copy(update={"recompute": found.plan.recompute[0]})
    layers, modules = found.plan.layers, request.recompute_modules
    return export_out(export_plan(request.engine, request.job, layout, layers, modules))


def stages_answer(request: Request, result: StageSearch) -> StagesOut:
    batch = request.job.training.global_batch

    def out(found: PlanFound | None) -> StagePlanOut | None:
        if found is None:
            return None
        return plan_out(found, found.layout.micro_batches(batch))

    best, even = result.best, result.even_best
    gain = None if best is None or even is None else best.price.mfu / even.price.mfu - 1
    status = result.status
    best_out = out(best)
    if best_out is not None and best is not None:
        best_out = best_out.model_copy(update={"export": plan_export(request, best)})
    return StagesOut(
        status=status,
        best=best_out,
        even_best=out(even),
        gain=None if gain is None else round(gain, FRACTION_DECIMALS),
        memory_fit=None if result.memory_fit is None else memory_fit_out(result.memory_fit),
        solver=StagesSolverOut(
            wall_s=round(result.wall_s, 3),
            proved_optimal=result.proved and best is not None,
            layouts=result.layouts,
            examined=result.solved,
            pruned=result.pruned,
            plans=float(result.space_size),
            rounding=result.rounding,
        ),
    )
