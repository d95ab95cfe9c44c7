"""The workshop page at `/`: static files (no CDN), and the one helper the page needs.

The helper, `POST /page/choices`, tells the page which value of each layout control would
form a valid layout with the other controls held where they are, and why the others would
not. It asks the cost model itself (`evaluate`), so the page never re-implements a rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, RootModel

from api.routes import SolverDep, slot_of
from api.schemas import EvaluateRequest
from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout, Schedule
from optimizer.cost_model import evaluate
from optimizer.grid import PLACEMENTS

STATIC_DIR = Path(__file__).parent / "static"
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# Served by name only: nothing outside api/static can be reached through the path.
_ASSETS = {
    path.name: path
    for path in (STATIC_DIR.iterdir() if STATIC_DIR.is_dir() else ())
    if path.suffix in _MEDIA_TYPES
}

MAX_TP_CHOICE = 64
MAX_PP_CHOICE = 128
MAX_CP_CHOICE = 32
MAX_EP_CHOICE = 64
VPP_CHOICES = tuple(range(1, 9))
MICRO_BATCH_CHOICES = (1, 2, 4, 8, 16)
ZERO_CHOICES = (0, 1, 2, 3)
RECOMPUTE_CHOICES = ("none", "selective", "full")

router = APIRouter(include_in_schema=False)
# Pricing every control's values (~100 layouts) is CPU work: it queues for the solver pool.
POOLED_PAGE_PATHS = frozenset({"/page/choices"})


class Choice(BaseModel):
    value: int | str
    valid: bool
    reason: str | None = None


class Choices(RootModel[dict[str, list[Choice]]]):
    """Each control's values, each marked valid or not."""


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def candidate_values(request: EvaluateRequest) -> dict[str, Sequence[int | str]]:
    """What each control offers: degrees that divide the GPU count, and the usual knobs."""
    gpus = request.cluster.gpus
    return {
        "tp": _divisors(gpus, MAX_TP_CHOICE),
        "pp": _divisors(gpus, MAX_PP_CHOICE),
        "cp": _divisors(gpus, MAX_CP_CHOICE),
        "vpp": VPP_CHOICES,
        "micro_batch": MICRO_BATCH_CHOICES,
        "zero": ZERO_CHOICES,
        "recompute": RECOMPUTE_CHOICES,
        "schedule": [schedule.value for schedule in Schedule],
        "ep": _divisors(gpus, MAX_EP_CHOICE),
        "placement": [",".join(order) for order in PLACEMENTS],
    }


def _choice(request: EvaluateRequest, job: TrainingJob, control: str, value: int | str) -> Choice:
    fields: dict[str, Any] = request.layout.model_dump()
    # A placement travels as "tp,cp,pp,dp" (innermost first): one string per option.
    as_field = value.split(",") if control == "placement" and isinstance(value, str) else value
    fields.update({control: as_field, "dp": None})
    try:
        evaluate(job, Layout.model_validate(fields), request.profile, request.assumptions)
    except InvalidSpec as error:
        return Choice(value=value, valid=False, reason=error.message)
    return Choice(value=value, valid=True)


def all_choices(request: EvaluateRequest, _: object = None) -> Choices:
    job = request.job()  # a bad model or cluster is the request's fault: 422 once, not per value
    return Choices(
        {
            control: [_choice(request, job, control, value) for value in values]
            for control, values in candidate_values(request).items()
        }
    )


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
    return _asset_response("index.html")


@router.get("/static/{name}")
def static_asset(name: str) -> FileResponse:
    """The page's scripts and styles, vendored here: the page works offline."""
    return _asset_response(name)


def _asset_response(name: str) -> FileResponse:
    path = _ASSETS.get(name)
    if path is None:
        raise HTTPException(status_code=404, detail=f"no static asset named {name!r}")
    return FileResponse(
        path, media_type=_MEDIA_TYPES[path.suffix], headers={"Cache-Control": "no-cache"}
    )
