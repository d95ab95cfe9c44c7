"""`POST /v1/studies`: a study's rows streamed as NDJSON as each scenario finishes; and
`POST /v1/scaling`: one job's best layout at each GPU count, cached.

A study goes through the same admission as any solve: its slot is reserved before the body
is parsed, and its scenarios run one after another in the server's solver pool on that one
slot, so a study never holds more than one solve's share however many scenarios it has. A
client that disconnects has the running scenario stopped and nothing more submitted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from functools import partial
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from prometheus_client import Counter
from starlette.types import Receive, Scope, Send

from api.http.middleware import error_response
from api.http.routes import ERROR_RESPONSES, SolverDep, slot_of
from api.http.workers import Slot, Solver
from api.scenarios import scenario_request
from api.schemas import ErrorDetail, ScalingOut, ScalingRequest, scaling_out
from optimizer.search import SolveSettings, StopSignal
from optimizer.studies import (
    Row,
    RunSettings,
    Scenario,
    StudyError,
    StudySpec,
    check_count,
    check_values,
    error_row,
    expand,
    proved,
    run_scenario,
    run_settings,
    scaling_curve,
)

router = APIRouter()
# Admission reserves their slot before the body is parsed (api/http/middleware.py).
STUDY_POOLED_PATHS = frozenset({"/v1/studies", "/v1/scaling"})
NDJSON = "application/x-ndjson"
logger = logging.getLogger("layoutopt.http")

STUDY_EXAMPLE: dict[str, Any] = {
    "base": {
        "model": "llama3-8b",
        "cluster": {"gpus": 64, "gpu": "h100-sxm"},
        "training": {"global_batch": 512, "seq_len": 4096},
        "explain": False,
        "time_limit_s": 5,
    },
    "grid": {"cluster.gpus": [64, 128]},
    "compute": "optimize",
    "train_tokens": 1e12,
}
STUDY_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    200: {
        "description": "One JSON object a line, one line per scenario, as each finishes: the "
        "scenario's key and overrides, its status (optimal, feasible, infeasible, unknown, "
        "evaluated, or error with its message), layout, MFU, memory by part (GB), throughput, "
        "days and GPU-hours to train.",
        "content": {NDJSON: {"schema": {"type": "string"}}},
    },
}


def install_studies(app: FastAPI) -> None:
    """The routes, their errors, and a counter of scenarios by outcome (per app)."""
    app.include_router(router)
    app.state.study_scenarios = Counter(
        "layoutopt_study_scenarios",
        "Study scenarios by outcome: solved (a row sent), cancelled (client gone: stopped or "
        "never started), refused (server draining).",
        ("outcome",),
        registry=app.state.metrics.registry,
    )
    app.add_exception_handler(StudyError, _study_error)  # type: ignore[arg-type]


async def _study_error(_: Request, error: StudyError) -> JSONResponse:
    # A rule the schema cannot state (a count, a base request that does not parse): the
    # spec's fault, named by its field.
    detail = ErrorDetail(code="invalid_spec", message=error.message, field=error.field)
    return error_response(detail, 422)


def prepare(spec: StudySpec, _: StopSignal | None = None) -> list[Scenario]:
    """The spec checked value by value and expanded (CPU work: in the pool, off the loop)."""
    check_values(spec, scenario_request)
    return expand(spec)


@router.post(
    "/v1/studies",
    tags=["studies"],
    response_class=StreamingResponse,
    responses=STUDY_RESPONSES,
    openapi_extra={"requestBody": {"content": {"application/json": {"example": STUDY_EXAMPLE}}}},
)
async def run_study(spec: StudySpec, solver: SolverDep, http: Request) -> StreamingResponse:
    """A batch of what-if scenarios: one NDJSON row per scenario, streamed as each finishes."""
    check_count(spec, http.app.state.settings.max_study_scenarios)
    slot = slot_of(http)
    future = solver.pool.submit(prepare, spec, slot=slot)
    try:
        scenarios = await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if future.cancelled():  # dropped from the queue by a drain
            raise solver.pool.saturated() from None
        raise
    settings = run_settings(spec, scenario_request, max_time_limit_s=solver.time_limit_s)
    return StudyStream(scenarios, settings, solver, slot, http.app.state.study_scenarios)


class StudyStream(StreamingResponse):
    """Rows sent as their scenarios finish, each solved in the pool on the request's slot;
    a disconnect stops the running scenario and submits no more."""

    def __init__(
        self,
        scenarios: list[Scenario],
        settings: RunSettings,
        solver: Solver,
        slot: Slot | None,
        outcomes: Counter,
    ) -> None:
        super().__init__(iter(()), media_type=NDJSON)
        self.scenarios, self.settings, self.solver = scenarios, settings, solver
        self.slot, self.outcomes = slot, outcomes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone = asyncio.ensure_future(_disconnected(receive))
        sent = 0
        try:
            for position, scenario in enumerate(self.scenarios):
                row = await self._solve(scenario, gone)
                if row is None:  # the client went away: stop here
                    self.outcomes.labels("cancelled").inc(len(self.scenarios) - position)
                    self.solver.metrics.rejections.labels("client_gone").inc()
                    return
                await send({"type": "http.response.body", "body": _line(row), "more_body": True})
                sent += 1
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the connection broke while sending
            self.outcomes.labels("cancelled").inc(len(self.scenarios) - sent)
        finally:
            gone.cancel()
            logger.info(
                "study",
                extra={
                    "scenarios": len(self.scenarios),
                    "rows_sent": sent,
                    "wall_s": round(time.perf_counter() - start, 3),
                },
            )

    async def _solve(self, scenario: Scenario, gone: asyncio.Future[None]) -> Row | None:
        """The scenario's row, or None once the client is gone (its solve stopped)."""
        if gone.done():
            return None
        stop = StopSignal()
        work = partial(run_scenario, scenario, self.settings, stop)
        future = self.solver.pool.submit(work, slot=self.slot)
        answer: asyncio.Future[Row] = asyncio.wrap_future(future)
        waiting: list[asyncio.Future[Any]] = [answer, gone]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            stop.stop()
            future.cancel()  # never starts if still queued; a running solve stops at once
            return None
        if future.cancelled():  # dropped by a drain: the row says so, the stream goes on
            self.outcomes.labels("refused").inc()
            return error_row(scenario, self.settings, "the server is shutting down: resubmit it")
        self.outcomes.labels("solved").inc()
        return answer.result()


def _line(row: Row) -> bytes:
    return (json.dumps(row) + "\n").encode()


async def _disconnected(receive: Receive) -> None:
    """Returns once the client has disconnected (the body is read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def curve(request: ScalingRequest, time_limit_s: float, stop: StopSignal) -> ScalingOut:
    start = time.perf_counter()
    budget = SolveSettings(time_limit_s, 1, stop)
    points = scaling_curve(request.to_request(), request.counts(), budget)
    return scaling_out(points, proved(points), time.perf_counter() - start)


@router.post("/v1/scaling", response_model=ScalingOut, tags=["studies"], responses=ERROR_RESPONSES)
async def scaling(request: ScalingRequest, solver: SolverDep, http: Request) -> ScalingOut:
    """One job's best layout and throughput at each GPU count: a scheduler's table, cached."""
    request.counts()  # bounded before any work (422 naming the numbers)
    time_limit_s = solver.time_limit_for(request.time_limit_s)
    work = partial(curve, request, time_limit_s)
    return await solver.run(
        "scaling",
        request,
        work,
        lambda answer: answer.complete,
        slot=slot_of(http),
        receive=http.receive,
    )
