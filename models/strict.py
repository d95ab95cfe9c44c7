"""One validation policy for every spec a request carries: the JSON types the schema
publishes, nothing coerced. `true` is not the number 1, `"16384"` is not a number, NaN and
infinities are not figures. Enums and tuples arrive from JSON as strings and lists, so
their fields relax strictness for that conversion alone (`JsonEnum`, `Field(strict=False)`).
"""

from __future__ import annotations

from pydantic import ConfigDict

SPEC_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
# The same for the API's request objects, which are not frozen.
REQUEST_CONFIG = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
