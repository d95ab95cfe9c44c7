"""Thin route functions: validate at the edge, hand the work to the solver pool, shape the answer."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from api.metrics import CONTENT_TYPE
from api.schemas import (
    ErrorOut,
    EstimateOut,
    EvaluateRequest,
    PresetsOut,
    ReadyOut,
    estimate_out,
)
from api.workers import Solver
from models.presets import gpu_presets, model_presets
from optimizer.cost_model import evaluate

router = APIRouter()

# Documented in OpenAPI so clients (and schemathesis) know the error shape.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {"model": ErrorOut, "description": "Request body over the size limit."},
    422: {"model": ErrorOut, "description": "Invalid request; `field` names the culprit."},
    503: {"model": ErrorOut, "description": "Saturated: retry after `Retry-After` seconds."},
}


def solver_of(request: Request) -> Solver:
    return request.app.state.solver  # type: ignore[no-any-return]


SolverDep = Annotated[Solver, Depends(solver_of)]


def price(request: EvaluateRequest) -> EstimateOut:
    estimate = evaluate(request.job(), request.layout, request.profile, request.assumptions)
    return estimate_out(estimate)


@router.post("/v1/evaluate", response_model=EstimateOut, tags=["plan"], responses=ERROR_RESPONSES)
async def evaluate_layout(request: EvaluateRequest, solver: SolverDep) -> EstimateOut:
    """Price one layout: memory per device by part, pipeline bubble, MFU step by step."""
    return await solver.run("evaluate", request, partial(price, request))


@router.get("/v1/presets", response_model=PresetsOut, tags=["plan"])
def list_presets() -> PresetsOut:
    """The model and GPU presets a request may name, with their specs and sources."""
    return PresetsOut(models=model_presets(), gpus=gpu_presets())


@router.get("/healthz", tags=["ops"])
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=ReadyOut, tags=["ops"], responses={503: {"model": ReadyOut}})
def readyz(request: Request, solver: SolverDep) -> ReadyOut | JSONResponse:
    """Readiness: started and not shutting down, with the solver pool's load."""
    ready = request.app.state.ready
    answer = ReadyOut(
        status="ready" if ready else "shutting down",
        solver_admitted=solver.pool.admitted,
        solver_capacity=solver.pool.capacity,
    )
    return answer if ready else JSONResponse(answer.model_dump(), status_code=503)


@router.get("/metrics", response_class=PlainTextResponse, tags=["ops"])
def metrics(request: Request) -> PlainTextResponse:
    """Prometheus metrics: requests, latencies, solver wall time, cache hits, rejections."""
    return PlainTextResponse(request.app.state.metrics.render(), media_type=CONTENT_TYPE)
