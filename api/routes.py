"""Thin route functions: validate at the edge, ask the optimiser, shape the answer."""

from __future__ import annotations

from fastapi import APIRouter

from api.schemas import EstimateOut, EvaluateRequest, estimate_out
from optimizer.cost_model import evaluate

router = APIRouter()


@router.post("/v1/evaluate", response_model=EstimateOut, tags=["plan"])
def evaluate_layout(request: EvaluateRequest) -> EstimateOut:
    """Price one layout: memory per device by part, pipeline bubble, MFU step by step."""
    estimate = evaluate(request.job(), request.layout, request.profile, request.assumptions)
    return estimate_out(estimate)


@router.get("/healthz", tags=["ops"])
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}
