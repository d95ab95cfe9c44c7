"""The plan answer: each job's pool, GPUs, nodes, layout (priced by the cost model) and
throughput; the plan's status, objective, bound, gap; explanations or the minimal conflict;
and a digest of the plan, equal for equal plans."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, Field

from api.schemas.answers import (
    STATUS_DESCRIPTION,
    EstimateOut,
    ExportOut,
    Status,
    estimate_out,
    export_out,
)
from models.layout import Dimension
from optimizer import Conflict
from optimizer.planning import PlanResult


class RackOut(BaseModel):
    rack: int
    nodes: list[int]


class PlacementOut(BaseModel):
    """How the job's layout sits on its nodes: ranks fill nodes in rack order, dimensions
    innermost first, so only the outer dimensions' groups reach other racks."""

    rank_order: list[Dimension] = Field(description="Dimensions from the innermost outward.")
    racks: list[RackOut]
    racks_spanned: int
    min_racks: int = Field(description="The fewest racks its node count could span.")
    crossing_racks: list[Dimension] = Field(description="Dimensions with a group spanning racks.")
    inside_nvlink: list[Dimension] = Field(
        description="Dimensions whose groups sit inside one NVLink domain (tp first)."
    )
    traffic_gb_per_step: dict[str, float] = Field(
        description="GB each GPU sends per step over pipeline (pp) and data (dp) parallelism."
    )
    note: str


class JobPlanOut(BaseModel):
    name: str
    pool: str | None = Field(description="Null: given nothing this plan.")
    gpu: str | None
    gpus: int
    nodes: list[int] = Field(description="Node ids of its pool; empty without node assignment.")
    best: EstimateOut | None = Field(description="Its layout, priced by the cost model.")
    tokens_per_s: float
    horizon_tokens_per_s: float = Field(
        description="Averaged over the horizon: a restart's minutes taken off."
    )
    normalised_throughput: float = Field(
        description="Over its best throughput alone on the cluster."
    )
    memory_gb: float | None = Field(description="Per device, the layout's total.")
    placement: PlacementOut | None
    change: Literal["starts", "stays", "moves", "resizes", "stops", "waits"]
    meets_deadline: bool | None = None
    engine: str | None = None
    export: ExportOut | None = Field(
        None,
        description="The layout in the engine's own input, on the job's GPUs; null "
        "when the job is given nothing.",
    )


class ReasonOut(BaseModel):
    code: str = Field(description="capacity, objective, restart_cost, rule or no_configuration.")
    message: str


class ShortfallOut(BaseModel):
    """A job given less throughput than its best configuration alone on the cluster."""

    job: str
    asked_gpus: int
    asked_pool: str | None
    asked_tokens_per_s: float
    got_gpus: int
    got_pool: str | None
    got_tokens_per_s: float
    reasons: list[ReasonOut]


class NodeValueOut(BaseModel):
    pool: str
    nodes_for_gain: int | None = Field(
        None, description="The fewest more nodes (1, 2, 4, ...) of the pool that buy anything."
    )
    gain_at_that: float | None = None
    objective_gain: float | None = Field(
        description="In the objective's units; fairness: how much the sum w*x^p falls."
    )
    description: str


class ExplanationsOut(BaseModel):
    jobs: list[ShortfallOut] = Field(description="Who got less than its best alone, and why.")
    pools: list[NodeValueOut] = Field(description="What one more node of each pool would buy.")
    complete: bool = Field(description="Every explanation was worked out within the time limit.")


class LeftOutOut(BaseModel):
    """A configuration not in the plan: its search found no layout (or was not run)."""

    job: str
    pool: str
    gpus: int
    status: str
    note: str


class PlanSolverOut(BaseModel):
    wall_s: float
    curve_wall_s: float = Field(
        description="Pricing the scaling curves (cached points cost nothing)."
    )
    solve_wall_s: float
    explain_wall_s: float
    proved_optimal: bool
    topology_proved: bool = Field(
        description="The racks spanned are proved fewest for the chosen options."
    )
    tie_break_proved: bool = Field(
        description="The plan is the one its tie-break picks, whatever the workers."
    )
    solves: int
    workers: int
    seed: int
    optimize_calls: int
    curve_cache_hits: int
    configurations: int
    variables: int
    constraints: int
    branches: int
    from_greedy: bool
    objective_solve_s: float = Field(
        description="The solve that settled the objective (its proof)."
    )


class PlanOut(BaseModel):
    status: Status = Field(description=STATUS_DESCRIPTION)
    objective: str
    objective_value: float | None = Field(
        description="throughput: the sum of w*x (each job's weighted share of its best alone); "
        "tokens: weighted tokens/s; fairness: the sum of w*x^p (minimised); deadlines: met "
        "weight.",
    )
    bound: float | None = Field(description="The best any plan could reach, as far as proved.")
    gap: float | None = Field(
        description="Relative gap between the plan and the bound (0 when optimal)."
    )
    objective_terms: dict[str, float]
    racks_spanned: int | None
    jobs: list[JobPlanOut]
    explanations: ExplanationsOut | None
    conflict: list[Conflict] = Field(
        description="When infeasible: a minimal set of rules that clash."
    )
    left_out: list[LeftOutOut]
    warnings: list[str]
    solver: PlanSolverOut
    plan_digest: str = Field(
        description="sha256 of the plan (status, objective, jobs): equal plans, equal digests."
    )


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _job_out(job: Any) -> JobPlanOut:
    placement = None
    if job.placement is not None:
        p = job.placement
        placement = PlacementOut(
            rank_order=list(p.rank_order),
            racks=[RackOut(rack=r, nodes=list(ids)) for r, ids in p.racks],
            racks_spanned=len(p.racks),
            min_racks=p.min_racks,
            crossing_racks=list(p.crossing),
            inside_nvlink=list(p.inside_nvlink),
            traffic_gb_per_step=p.traffic_gb_per_step,
            note=p.note,
        )
    # the job's artefact is its own `export`, once: not again inside its estimate
    best = None if job.estimate is None else estimate_out(replace(job.estimate, export=None))
    return JobPlanOut(
        name=job.name,
        pool=job.pool,
        gpu=job.gpu,
        gpus=job.gpus,
        nodes=list(job.nodes),
        best=best,
        tokens_per_s=round(job.tokens_per_s, 2),
        horizon_tokens_per_s=round(job.horizon_tokens_per_s, 2),
        normalised_throughput=round(job.share, 4),
        memory_gb=None if best is None else best.memory_gb.total,
        placement=placement,
        change=job.change,
        meets_deadline=job.meets_deadline,
        engine=job.engine,
        export=None if job.export is None else export_out(job.export),
    )


def plan_out(result: PlanResult) -> PlanOut:
    jobs = [_job_out(job) for job in result.jobs]
    explanations = None
    if result.shortfalls or result.node_values:
        explanations = ExplanationsOut(
            jobs=[
                ShortfallOut(**{**vars(s), "reasons": [ReasonOut(**vars(r)) for r in s.reasons]})
                for s in result.shortfalls
            ],
            pools=[
                NodeValueOut(
                    pool=v.pool,
                    objective_gain=_rounded(v.objective_gain),
                    description=v.description,
                    nodes_for_gain=v.nodes_for_gain,
                    gain_at_that=_rounded(v.gain_at_that),
                )
                for v in result.node_values
            ],
            complete=result.explanations_complete,
        )
    head = {
        "status": result.status,
        "objective": result.objective,
        "objective_value": _rounded(result.objective_value),
        "bound": _rounded(result.bound),
        "gap": _rounded(result.gap, 6),
        "objective_terms": {k: round(v, 4) for k, v in result.terms.items()},
        "racks_spanned": result.racks_spanned,
    }
    digest = hashlib.sha256(
        json.dumps(
            {**head, "jobs": [j.model_dump(mode="json") for j in jobs]}, sort_keys=True
        ).encode()
    ).hexdigest()
    return PlanOut(
        **head,
        jobs=jobs,
        explanations=explanations,
        conflict=list(result.conflict),
        left_out=[LeftOutOut(**vars(point)) for point in result.left_out],
        warnings=list(result.warnings),
        solver=PlanSolverOut(**vars(result.stats)),
        plan_digest=digest,
    )
