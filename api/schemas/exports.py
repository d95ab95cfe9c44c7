"""What the request's engine says of an answer's layout: each of its rules the layout breaks
(as warnings, the estimate's figures untouched) and the artefact that runs the layout on it
or the refusal. The domain works both out (optimizer.engines.judged, on every route's
estimates); these only put them in the answers' shape, which HTTP, CLI and client share."""

from __future__ import annotations

from models.errors import InvalidSpec

from .answers import ExportOut, export_out
from .requests import EvaluateRequest, evaluated


def export_answer(request: EvaluateRequest) -> ExportOut:
    """The request's layout in its engine's input, or InvalidSpec (field `engine`) listing
    every rule of the engine the layout breaks."""
    estimate = evaluated(request)
    if estimate.export is None:
        raise InvalidSpec(estimate.export_error or "no engine was asked", "engine")
    return export_out(estimate.export)
