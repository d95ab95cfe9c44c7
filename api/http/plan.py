"""`POST /v1/plan`: many jobs on one cluster, through admission and the solver pool like
every search (its path is in POOLED_PLAN_PATHS), stoppable when the client goes away."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from api.http.routes import ERROR_RESPONSES, SolverDep, slot_of
from api.schemas import PLAN_EXAMPLE, PlanOut, PlanRequestIn, plan_out
from optimizer import StopSignal
from optimizer.planning import plan
from optimizer.planning.store import curve_cache

router = APIRouter()

# Admission reserves a solver slot for these before the body is parsed (api/http/app.py).
POOLED_PLAN_PATHS = frozenset({"/v1/plan"})

PlanBody = Annotated[
    PlanRequestIn,
    Body(
        openapi_examples={"two pools": {"summary": "Three jobs, two pools", "value": PLAN_EXAMPLE}}
    ),
]


def planned(
    request: PlanRequestIn, time_limit_s: float, curve_store: str, stop: StopSignal
) -> PlanOut:
    # One CP-SAT worker per plan: the pool already gives each core its own request. The
    # store is opened by path in the process that plans (a solver process has its own).
    settings = request.settings(time_limit_s, 1, stop)
    return plan_out(plan(request.to_problem(), settings, cache=curve_cache(curve_store)))


def proved(answer: Any) -> bool:
    """Cache only plans that are the one plan their request has: proved, tie-break too."""
    return bool(answer.solver.proved_optimal and answer.solver.tie_break_proved)


@router.post("/v1/plan", response_model=PlanOut, tags=["plan"], responses=ERROR_RESPONSES)
async def plan_cluster(request: PlanBody, solver: SolverDep, http: Request) -> PlanOut:
    """Each job's pool, GPUs, nodes and layout in one plan, with what was proved of it."""
    time_limit_s = solver.time_limit_for(request.time_limit_s)
    work = partial(planned, request, time_limit_s, http.app.state.settings.curve_store)
    return await solver.run("plan", request, work, proved, slot=slot_of(http), receive=http.receive)
