"""One study scenario's request, parsed at the edge: the function the studies room is handed
(`optimizer.studies.Parse`), so the room never imports the API's schema.

Module-level on purpose: it travels by reference to worker processes and Dask workers.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from api.errors import detail_from_validation
from api.schemas import EvaluateRequest, SearchRequest, StagesRequest
from models.errors import InvalidSpec
from optimizer import Request
from optimizer.studies import ScenarioError


def scenario_request(compute: str, data: dict[str, Any]) -> Request:
    """The request a scenario computes (`evaluate` takes a layout, searches a `search`,
    `stages` a search and `per_stage_recompute`), parsed by the route's schema, or
    `ScenarioError` naming the field, as the HTTP API would name it."""
    models: dict[str, type[EvaluateRequest | SearchRequest]] = {
        "evaluate": EvaluateRequest,
        "stages": StagesRequest,
    }
    model = models.get(compute, SearchRequest)
    try:
        return model.model_validate(data).to_request()
    except ValidationError as error:
        detail = detail_from_validation(error)
        raise ScenarioError(detail.message, detail.field) from None
    except InvalidSpec as error:
        raise ScenarioError(error.message, error.field) from None
