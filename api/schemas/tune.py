"""`layoutopt tune`'s answers (optimizer.tuning): the optimum before and after calibrating on
the trials' logs, and what changed; or, while logs are missing, which trials still have to run."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from api.schemas.answers import EstimateOut, OptimizeOut, Status, estimate_out, optimize_out
from api.schemas.calibration import FitOut
from optimizer.tuning import LogState, Retune


class TuneOut(BaseModel):
    status: Status = Field(description="The search's under the calibrated assumptions.")
    before: EstimateOut = Field(description="The optimum by the defaults, priced by them.")
    before_calibrated: EstimateOut = Field(
        description="The same layout priced under the calibrated assumptions."
    )
    after: OptimizeOut = Field(description="The search under the calibrated assumptions.")
    changes: list[str] = Field(description="What changed, in words.")
    assumptions: dict[str, Any] = Field(
        description="The calibrated assumptions (the folder's assumptions.json)."
    )
    calibration: FitOut = Field(description="The fit: what was fitted, what pinned and why.")
    request: dict[str, Any] = Field(
        description="The tuned request with the calibrated assumptions: optimize, export or "
        "plan with it from now on (the folder's calibrated-request.json)."
    )
    trials: list[str] = Field(description="The trials whose logs the calibration read.")


def tune_out(
    retuned: Retune,
    assumptions: dict[str, Any],
    fit: FitOut,
    request: dict[str, Any],
    trials: list[str],
) -> TuneOut:
    return TuneOut(
        status=retuned.after.status,
        before=estimate_out(retuned.before),
        before_calibrated=estimate_out(retuned.before_calibrated),
        after=optimize_out(retuned.after),
        changes=list(retuned.changes),
        assumptions=assumptions,
        calibration=fit,
        request=request,
        trials=trials,
    )


class MissingLogOut(BaseModel):
    trial: str
    folder: str = Field(description="Where the trial's artefact is and its log is expected.")
    why: str = Field(description="What was found: no log yet, or the step it has reached.")


class TuneWaitingOut(BaseModel):
    """What `layoutopt tune` answers while trial logs are missing (exit status 5)."""

    waiting_for: list[MissingLogOut]


def waiting_out(missing: list[tuple[LogState, str]]) -> TuneWaitingOut:
    return TuneWaitingOut(
        waiting_for=[
            MissingLogOut(trial=state.trial, folder=folder, why=state.why)
            for state, folder in missing
        ]
    )
