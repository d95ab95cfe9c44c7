"""POST /v1/trials and `layoutopt trials`: a search request and how many runs, answered with
the runs that best separate the layouts tied with its optimum (optimizer.trials)."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel, Field

from api.schemas.answers import EstimateOut, ExportOut, LayoutOut, estimate_out
from api.schemas.requests import SearchRequest
from models.strict import JsonInt
from optimizer.request import Request
from optimizer.trials import DEFAULT_TRIALS, MAX_TRIALS, TrialPlan


class TrialsRequest(SearchRequest):
    # a JSON integer may be written 3.0 (JSON Schema counts it an integer): as every count
    k: JsonInt = Field(
        DEFAULT_TRIALS,
        ge=1,
        le=MAX_TRIALS,
        description="At most this many trial runs, the optimum first.",
    )

    def to_request(self) -> Request:
        return replace(super().to_request(), explain=False)


class TrialOut(BaseModel):
    name: str
    layout: LayoutOut
    steps: int = Field(description="Steps to run: the first 10 warm up, the rest are measured.")
    export: ExportOut | None = Field(None, description="The engine's input that runs it.")
    why: str = Field(description="What its measured step time will tell.")
    mechanism: str | None = Field(
        None, description="The effect it tests against the optimum; null for the optimum."
    )
    estimate: EstimateOut


class TrialsOut(BaseModel):
    status: str = Field(description="The optimum's status, as optimize answers it.")
    tied: int = Field(
        description="Layouts whose MFU lies within the optimum's interval, the optimum included."
    )
    trials: list[TrialOut]
    warnings: list[str]


def trials_out(plan: TrialPlan) -> TrialsOut:
    trials = []
    for trial in plan.trials:
        estimate = estimate_out(trial.estimate)
        trials.append(
            TrialOut(
                name=trial.name,
                layout=estimate.layout,
                steps=trial.steps,
                export=estimate.export,
                why=trial.why,
                mechanism=trial.mechanism,
                estimate=estimate,
            )
        )
    return TrialsOut(
        status=plan.status, tied=plan.tied, trials=trials, warnings=list(plan.warnings)
    )
