"""`POST /v1/calibrate`: measured runs (or their training logs) in, fitted assumptions out
(api/schemas/calibration.py).

CPU-bound (a least-squares fit, and one more per run for the leave-one-out error), so it
queues for the solver pool like the searches: its path is pooled (Admission reserves a slot
before the body is parsed) and a client that goes away stops the fit.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Body, Request

from api.http.routes import ERROR_RESPONSES, SolverDep, slot_of
from api.schemas import (
    CALIBRATE_EXAMPLE,
    CalibrateOut,
    CalibrateRequest,
    calibrate_out,
)
from optimizer.calibration import calibrate
from optimizer.search import StopSignal

router = APIRouter()

POOLED_CALIBRATE_PATHS = frozenset({"/v1/calibrate"})

CalibrateBody = Annotated[
    CalibrateRequest,
    Body(openapi_examples={"one run": {"summary": "One measured run", "value": CALIBRATE_EXAMPLE}}),
]


def fit(request: CalibrateRequest, time_limit_s: float, stop: StopSignal) -> CalibrateOut:
    """The fit, and the leave-one-out refits, within the server's time limit."""
    deadline = time.perf_counter() + time_limit_s
    result = calibrate(
        request.measured_runs(),
        leave_one_out=request.leave_one_out,
        stop=lambda: stop.stopped,
        deadline=deadline,
    )
    return calibrate_out(result)


@router.post(
    "/v1/calibrate",
    response_model=CalibrateOut,
    tags=["plan"],
    responses={
        **ERROR_RESPONSES,
        501: {"description": "The server was installed without the calibration extra (scipy)."},
    },
)
async def calibrate_runs(request: CalibrateBody, solver: SolverDep, http: Request) -> CalibrateOut:
    """Fit efficiencies and overlaps to measured runs, typed in or read from their training
    logs: the assumptions, residuals and leave-one-out error beside the uncalibrated one, with
    what the runs could not identify, or would not predict better, pinned and why."""
    work = partial(fit, request, solver.time_limit_for(None))
    return await solver.run(
        "calibrate", request, work, complete, slot=slot_of(http), receive=http.receive
    )


def complete(answer: CalibrateOut) -> bool:
    """Only whole answers are cached: a step cut short by the time limit may finish later."""
    return answer.fit.complete
