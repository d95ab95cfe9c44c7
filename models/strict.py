"""One validation policy for every spec a request carries: the JSON types the schema
publishes, nothing coerced. `true` is not the number 1, `"16384"` is not a number, NaN and
infinities are not figures. Enums and tuples arrive from JSON as strings and lists, so
their fields relax strictness for that conversion alone (`JsonEnum`, `Field(strict=False)`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, ConfigDict

SPEC_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
# The same for the API's request objects, which are not frozen.
REQUEST_CONFIG = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _integral(value: object) -> object:
    """JSON Schema's integer admits 64.0; strict int would not. Only that form is converted:
    64.5, true and "64" still fail as not integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# An integer field as JSON Schema defines one.
JsonInt = Annotated[int, BeforeValidator(_integral)]
