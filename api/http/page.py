"""The workshop page at `/`, its assets, and the one helper route it needs: `POST
/page/choices` (api/page/choices.py), which prices ~100 layouts and so queues for the solver
pool like every CPU-bound route."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse

from api.http.routes import SolverDep, slot_of
from api.page import Choice, all_choices, asset_response
from api.schemas import EvaluateRequest

router = APIRouter(include_in_schema=False)
POOLED_PAGE_PATHS = frozenset({"/page/choices"})


@router.post("/page/choices")
async def layout_choices(
    request: EvaluateRequest, solver: SolverDep, http: Request
) -> dict[str, list[Choice]]:
    """Each control's values, each marked valid or not with the others held fixed."""
    work = partial(all_choices, request)
    answer = await solver.run("choices", request, work, slot=slot_of(http), receive=http.receive)
    return answer.root


@router.get("/")
def workshop_page() -> FileResponse:
    """The interactive workshop page."""
    return asset_response("index.html")


@router.get("/static/{name}")
def static_asset(name: str) -> FileResponse:
    """The page's scripts and styles, vendored here: the page works offline."""
    return asset_response(name)
