"""What the page's controls may take: for each layout control, which values would form a valid
layout with the other controls held where they are, and why the others would not. It asks
the cost model itself (`evaluate`), so the page never re-implements a rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, RootModel

from api.schemas import EvaluateRequest
from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout, Schedule
from optimizer import PLACEMENTS, evaluate

MAX_TP_CHOICE = 64
MAX_PP_CHOICE = 128
MAX_CP_CHOICE = 32
MAX_EP_CHOICE = 64
VPP_CHOICES = tuple(range(1, 9))
MICRO_BATCH_CHOICES = (1, 2, 4, 8, 16)
ZERO_CHOICES = (0, 1, 2, 3)
RECOMPUTE_CHOICES = ("none", "selective", "full")


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
