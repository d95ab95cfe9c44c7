"""Thin route functions: validate at the edge, hand the work to the solver pool, shape the answer."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from api.http.metrics import CONTENT_TYPE
from api.http.middleware import SLOT_KEY
from api.http.workers import Slot, Solver
from api.schemas import (
    PLATE_EXAMPLE,
    SEARCH_EXAMPLE,
    STAGES_EXAMPLE,
    ErrorOut,
    EstimateOut,
    EvaluateRequest,
    ExportOut,
    OptimizeOut,
    ParetoOut,
    PresetsOut,
    ReadyOut,
    SearchRequest,
    StagesOut,
    StagesRequest,
    TrialsOut,
    TrialsRequest,
    estimate_out,
    evaluated,
    export_answer,
    optimize_out,
    pareto_out,
    stages_answer,
    trials_out,
)
from models.presets import gpu_presets, model_presets
from optimizer import SolveSettings, StopSignal
from optimizer import searches as search
from optimizer.trials import plan_trials

router = APIRouter()

# Routes whose work queues for the solver pool: Admission reserves their slot before the
# body is parsed (api/http/middleware.py).
POOLED_PATHS = frozenset({"/v1/optimize", "/v1/pareto", "/v1/stages", "/v1/trials"})

# Documented in OpenAPI so clients (and schemathesis) know the error shape.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    408: {"model": ErrorOut, "description": "Request body did not arrive in time."},
    413: {"model": ErrorOut, "description": "Request body over the size limit."},
    422: {"model": ErrorOut, "description": "Invalid request; `field` names the culprit."},
    503: {
        "model": ErrorOut,
        "description": "Saturated or draining: retry after `Retry-After` seconds.",
    },
}


def solver_of(request: Request) -> Solver:
    return request.app.state.solver  # type: ignore[no-any-return]


def slot_of(request: Request) -> Slot | None:
    """The solver slot Admission reserved for this request (none under a bare app)."""
    return request.scope.get("state", {}).get(SLOT_KEY)


SolverDep = Annotated[Solver, Depends(solver_of)]
# The plate's request as the example body that /docs fills in (Swagger UI shows these
# media-type examples; the schemas' own `examples` only appear in the schema view).
PlateEvaluate = Annotated[
    EvaluateRequest,
    Body(
        openapi_examples={
            "plate": {"summary": "Llama 3 405B on 16,384 H100s", "value": PLATE_EXAMPLE}
        }
    ),
]
MEGATRON_EXAMPLE = PLATE_EXAMPLE | {
    "layout": PLATE_EXAMPLE["layout"] | {"zero": 1},
    "engine": "megatron",
}
PlateExport = Annotated[
    EvaluateRequest,
    Body(
        openapi_examples={
            "megatron": {
                "summary": "Megatron-LM flags for the plate's layout at ZeRO-1",
                "value": MEGATRON_EXAMPLE,
            }
        }
    ),
]
PlateSearch = Annotated[
    SearchRequest,
    Body(
        openapi_examples={
            "plate": {"summary": "Llama 3 405B on 16,384 H100s", "value": SEARCH_EXAMPLE}
        }
    ),
]


def price(request: EvaluateRequest, _: StopSignal | None = None) -> EstimateOut:
    return estimate_out(evaluated(request))


def artefact(request: EvaluateRequest, _: StopSignal | None = None) -> ExportOut:
    return export_answer(request)


def best_layout(request: SearchRequest, time_limit_s: float, stop: StopSignal) -> OptimizeOut:
    # One CP-SAT worker per solve: the pool already gives each core its own request.
    budget = SolveSettings(time_limit_s, 1, stop)
    return optimize_out(search.optimize(request.to_request(), budget))


def frontier(request: SearchRequest, time_limit_s: float, stop: StopSignal) -> ParetoOut:
    return pareto_out(search.pareto(request.to_request(), SolveSettings(time_limit_s, 1, stop)))


def planned(request: StagesRequest, time_limit_s: float, stop: StopSignal) -> StagesOut:
    domain = request.to_request()
    return stages_answer(domain, search.stage_plans(domain, SolveSettings(time_limit_s, 1, stop)))


def trial_runs(request: TrialsRequest, time_limit_s: float, stop: StopSignal) -> TrialsOut:
    budget = SolveSettings(time_limit_s, 1, stop)
    return trials_out(plan_trials(request.to_request(), request.k, budget))


def proved(answer: OptimizeOut | ParetoOut | StagesOut | TrialsOut) -> bool:
    """Only proved answers are cached: a timed-out one may improve when the server is idle."""
    if isinstance(answer, TrialsOut):
        return answer.status == "optimal"
    return answer.solver.proved_optimal


@router.post("/v1/evaluate", response_model=EstimateOut, tags=["plan"], responses=ERROR_RESPONSES)
async def evaluate_layout(request: PlateEvaluate, solver: SolverDep) -> EstimateOut:
    """Price one layout: memory per device by part, pipeline bubble, MFU step by step."""
    # Inline: pricing is closed-form (0.2-0.7 ms); queued behind solves in the pool it
    # waited seconds (bench/load.py, docs/performance.md).
    return await solver.run("evaluate", request, partial(price, request), inline=True)


@router.post("/v1/export", response_model=ExportOut, tags=["plan"], responses=ERROR_RESPONSES)
async def export_layout(request: PlateExport, solver: SolverDep) -> ExportOut:
    """The layout in the engine's own input (flags, overrides, a config); 422 naming every
    rule of the engine it breaks when the engine cannot run it."""
    # Inline, like evaluate: checking the rules and writing the artefact take under 1 ms.
    return await solver.run("export", request, partial(artefact, request), inline=True)


@router.post("/v1/optimize", response_model=OptimizeOut, tags=["plan"], responses=ERROR_RESPONSES)
async def optimize_layout(request: PlateSearch, solver: SolverDep, http: Request) -> OptimizeOut:
    """The layout of highest MFU that fits, what was proved of it, and what binds it."""
    time_limit_s = solver.time_limit_for(request.time_limit_s)
    work = partial(best_layout, request, time_limit_s)
    return await solver.run(
        "optimize", request, work, proved, slot=slot_of(http), receive=http.receive
    )


@router.post("/v1/pareto", response_model=ParetoOut, tags=["plan"], responses=ERROR_RESPONSES)
async def pareto_frontier(request: PlateSearch, solver: SolverDep, http: Request) -> ParetoOut:
    """The memory/MFU frontier: non-dominated layouts, memory ascending, MFU ascending."""
    time_limit_s = solver.time_limit_for(request.time_limit_s)
    work = partial(frontier, request, time_limit_s)
    return await solver.run(
        "pareto", request, work, proved, slot=slot_of(http), receive=http.receive
    )


@router.post("/v1/trials", response_model=TrialsOut, tags=["plan"], responses=ERROR_RESPONSES)
async def trial_plan(request: TrialsRequest, solver: SolverDep, http: Request) -> TrialsOut:
    """At most `k` launchable layouts whose measured step times separate the layouts tied
    with the optimum (within its interval), each with its artefact, steps and what it tells."""
    time_limit_s = solver.time_limit_for(request.time_limit_s)
    work = partial(trial_runs, request, time_limit_s)
    return await solver.run(
        "trials", request, work, proved, slot=slot_of(http), receive=http.receive
    )


PlateStages = Annotated[
    StagesRequest,
    Body(
        openapi_examples={
            "plate": {
                "summary": "Llama 3 405B on 16,384 H100s, Megatron-LM",
                "value": STAGES_EXAMPLE,
            }
        }
    ),
]


@router.post("/v1/stages", response_model=StagesOut, tags=["plan"], responses=ERROR_RESPONSES)
async def stage_plan(request: PlateStages, solver: SolverDep, http: Request) -> StagesOut:
    """The layout and stage plan of least step time: each pipeline rank's layers (and, where
    the engine allows, recompute mode) chosen by the solver, with the even split beside it."""
    time_limit_s = solver.time_limit_for(request.time_limit_s)
    work = partial(planned, request, time_limit_s)
    return await solver.run(
        "stages", request, work, proved, slot=slot_of(http), receive=http.receive
    )


# Probes and catalogue reads answer from the event loop (async, no thread): CPU-bound routes
# fill the thread pools, and a liveness probe must not wait behind them.
@router.get("/v1/presets", response_model=PresetsOut, tags=["plan"])
async def list_presets() -> PresetsOut:
    """The model and GPU presets a request may name, with their specs and sources."""
    return PresetsOut(models=model_presets(), gpus=gpu_presets())


@router.get("/healthz", tags=["ops"])
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=ReadyOut, tags=["ops"], responses={503: {"model": ReadyOut}})
async def readyz(request: Request, solver: SolverDep) -> ReadyOut | JSONResponse:
    """Readiness: started, not draining, and (with SOLVE_IN=processes) every solver process
    alive, with the solver pool's load."""
    processes = solver.processes
    alive = None if processes is None else processes.alive
    if not request.app.state.ready:
        status = "draining"
    elif processes is not None and processes.alive < processes.count:
        status = "replacing_solver"  # a process ended; the watcher is starting another
    else:
        status = "ready"
    answer = ReadyOut(
        status=status,
        solver_admitted=solver.pool.admitted,
        solver_running=solver.pool.running,
        solver_capacity=solver.pool.capacity,
        solver_processes_alive=alive,
    )
    return answer if status == "ready" else JSONResponse(answer.model_dump(), status_code=503)


@router.get("/metrics", response_class=PlainTextResponse, tags=["ops"])
async def metrics(request: Request) -> Response:
    """Prometheus metrics: requests, latencies, solver wall time, cache hits, rejections."""
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE)
