"""The OpenAPI document, with every numeric bound in JSON Schema's own words.

pydantic writes a bound it cannot push into a plain integer schema (an optional field
whose type carries a validator, such as `JsonInt | None`) as its own `gt`/`le` keywords,
which JSON Schema ignores: clients and schemathesis would then send 0 where the server
wants more. Renamed here, the published schema admits exactly what the server accepts.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

JSON_SCHEMA_BOUNDS = {
    "gt": "exclusiveMinimum",
    "ge": "minimum",
    "lt": "exclusiveMaximum",
    "le": "maximum",
}


def with_json_schema_bounds(node: Any) -> Any:
    """A copy of `node` in which each numeric schema's pydantic bounds are renamed."""
    if isinstance(node, list):
        return [with_json_schema_bounds(item) for item in node]
    if not isinstance(node, dict):
        return node
    numeric = node.get("type") in ("integer", "number")
    return {
        (JSON_SCHEMA_BOUNDS.get(key, key) if numeric else key): with_json_schema_bounds(value)
        for key, value in node.items()
    }


def install(app: FastAPI) -> None:
    """Serve the fixed document at /openapi.json (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = with_json_schema_bounds(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
