"""Builds the FastAPI app; routes live in api/http/routes.py, error shapes in api/errors.py.

Errors map to HTTP here and only here. The last resort, an exception nothing else
handles, is caught by `RequestContext` (api/http/middleware.py): a JSON 500 with the request
id, the trace only in the log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from api import __version__, errors
from api.http import openapi
from api.http.calibrate import POOLED_CALIBRATE_PATHS
from api.http.calibrate import router as calibrate_router
from api.http.metrics import Metrics
from api.http.middleware import (
    Admission,
    BodyReader,
    InFlightLimit,
    RequestContext,
    error_response,
    saturated_response,
)
from api.http.page import POOLED_PAGE_PATHS
from api.http.page import router as page_router
from api.http.plan import POOLED_PLAN_PATHS
from api.http.plan import router as plan_router
from api.http.processes import WorkerDied
from api.http.routes import POOLED_PATHS, router
from api.http.settings import Settings
from api.http.studies import STUDY_POOLED_PATHS, install_studies
from api.http.workers import Saturated, Solver
from models.errors import InvalidSpec
from optimizer.calibration import CalibrationUnavailable


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        return error_response(errors.detail_from_validation(list(error.errors())), 422)

    @app.exception_handler(ValidationError)
    async def _invalid_in_domain(_: Request, error: ValidationError) -> JSONResponse:
        return error_response(errors.detail_from_validation(error), 422)

    @app.exception_handler(InvalidSpec)
    async def _invalid_spec(_: Request, error: InvalidSpec) -> JSONResponse:
        return error_response(errors.detail_from_domain(error), 422)

    @app.exception_handler(CalibrationUnavailable)
    async def _not_installed(_: Request, error: CalibrationUnavailable) -> JSONResponse:
        return error_response(errors.not_installed(str(error)), 501)

    @app.exception_handler(WorkerDied)
    async def _worker_died(_: Request, error: WorkerDied) -> JSONResponse:
        app.state.metrics.rejections.labels("solver_lost").inc()
        headers = {"Retry-After": str(app.state.settings.retry_after_s)}
        return error_response(errors.solver_lost(str(error)), 503, headers)

    @app.exception_handler(Saturated)
    async def _saturated(_: Request, error: Saturated) -> JSONResponse:
        return saturated_response(error)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, error: HTTPException) -> JSONResponse:
        if error.status_code == 400:  # a body FastAPI could not decode (nested too deep)
            return error_response(errors.undecodable_body(), 422)
        detail = errors.detail_from_http_status(error.status_code, str(error.detail))
        return error_response(detail, error.status_code, error.headers)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.ready = True
    app.state.solver.pool.draining = False  # an app started again (tests) serves again
    processes = app.state.solver.processes
    if processes is not None:
        processes.start()
    yield
    drain(app)
    if processes is not None:
        processes.close()


def drain(app: FastAPI) -> int:
    """Readiness fails first so a load balancer stops sending; work still queued is refused
    (503 + Retry-After) and new work too; running solves go on. Returns how many queued
    requests were refused. `api.http.serve` calls it on SIGTERM, the lifespan again at the end."""
    app.state.ready = False
    return app.state.solver.pool.drain()  # type: ignore[no-any-return]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    metrics = Metrics()
    # /docs and /redoc from the package's own copies of Swagger UI and ReDoc, not a CDN:
    # the service works without a network, and so do its docs.
    app = FastAPIOffline(
        title="layoutopt",
        version=__version__,
        description="Parallelism layouts for transformer training: cost model, optimiser, explanations.",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.solver = Solver(settings, metrics)
    app.state.ready = True
    app.include_router(router)
    app.include_router(calibrate_router)
    app.include_router(page_router)
    install_studies(app)
    app.include_router(plan_router)
    openapi.install(app)
    add_error_handlers(app)
    # Starlette runs the last added outermost: RequestContext, BodyReader, Admission,
    # InFlightLimit, then the routes.
    app.add_middleware(
        InFlightLimit,
        max_in_flight=settings.max_in_flight,
        retry_after_s=settings.retry_after_s,
        metrics=metrics,
    )
    app.add_middleware(
        Admission,
        pool=app.state.solver.pool,
        pooled_paths=POOLED_PATHS
        | POOLED_CALIBRATE_PATHS
        | POOLED_PAGE_PATHS
        | STUDY_POOLED_PATHS
        | POOLED_PLAN_PATHS,
        metrics=metrics,
    )
    app.add_middleware(
        BodyReader,
        max_bytes=settings.max_body_bytes,
        timeout_s=settings.body_timeout_s,
        max_buffered_bytes=settings.max_body_buffer_bytes,
        retry_after_s=settings.retry_after_s,
        metrics=metrics,
    )
    app.add_middleware(RequestContext, metrics=metrics, retry_after_s=settings.retry_after_s)
    return app


app = create_app()
