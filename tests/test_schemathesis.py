"""Property-based run against the app's own OpenAPI schema: whatever the body, never a 5xx,
and every answer matches its documented schema."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance
from schemathesis.config import SchemathesisConfig

from api.http.app import create_app
from api.http.settings import Settings

# Small solver limits keep a generated search request from holding a worker for long.
app = create_app(Settings(solver_time_limit_s=0.5, workers=2, queue_depth=64))
# The coverage phase walks every boundary of every field (~230 requests an operation); its
# requests are mostly valid, where fuzzing's rarely are. Cheap for evaluate, ~40 s for a
# search route: optimize gets it; pareto, which validates and tabulates the same way, gets
# the examples and fuzzing phases only.
config = SchemathesisConfig.from_dict(
    {
        "operations": [
            {"include-path-regex": "^/v1/pareto$", "phases": {"coverage": {"enabled": False}}},
            # each valid calibrate body is one least-squares fit per run and one more: its
            # boundaries (32 runs) are costly to walk, and its parsing is evaluate's
            {"include-path-regex": "^/v1/calibrate$", "phases": {"coverage": {"enabled": False}}},
            # a plan prices each job's scaling curve: ~230 coverage requests would take
            # minutes; it gets the examples and fuzzing phases
            {"include-path-regex": "^/v1/plan$", "phases": {"coverage": {"enabled": False}}},
        ]
    }
)
schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_request_yields_a_server_error(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
