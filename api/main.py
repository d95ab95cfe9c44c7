"""Builds the FastAPI app; routes live in api/routes.py."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from api.errors import detail_from_domain, detail_from_validation
from api.page import router as page_router
from api.routes import router
from api.schemas import ErrorOut
from models.errors import InvalidSpec


def create_app() -> FastAPI:
    app = FastAPI(
        title="layoutopt",
        version="0.1.0",
        description="Parallelism layouts for transformer training: cost model, optimiser, explanations.",
    )
    app.include_router(router)
    app.include_router(page_router)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        body = ErrorOut(error=detail_from_validation(list(error.errors())))
        return JSONResponse(body.model_dump(), status_code=422)

    @app.exception_handler(InvalidSpec)
    async def _invalid_spec(_: Request, error: InvalidSpec) -> JSONResponse:
        return JSONResponse(ErrorOut(error=detail_from_domain(error)).model_dump(), status_code=422)

    return app


app = create_app()
