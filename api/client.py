"""A Python client for the HTTP API, on httpx: the server's request and response models.

    with Client("http://127.0.0.1:8000") as client:
        estimate = client.evaluate({"model": "llama3-405b", "cluster": {"gpus": 16384}, ...})

Every failure, the server's 4xx/5xx or no answer at all, raises `LayoutoptError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from api.schemas import (
    CalibrateOut,
    CalibrateRequest,
    EstimateOut,
    EvaluateRequest,
    ExportOut,
    OptimizeOut,
    ParetoOut,
    PlanOut,
    PlanRequestIn,
    PresetsOut,
    ScalingOut,
    ScalingRequest,
    SearchRequest,
    StagesOut,
    StagesRequest,
)

Answer = TypeVar("Answer", bound=BaseModel)
Body = BaseModel | Mapping[str, Any]

CONNECT_TIMEOUT_S = 5.0
# The server caps every solve (SOLVER_TIME_LIMIT_S, 10 s by default); allow for queueing too.
READ_TIMEOUT_S = 60.0
KEEPALIVE_EXPIRY_S = 2.0


class LayoutoptError(Exception):
    """A request the server refused or could not answer, as the server put it."""

    def __init__(
        self,
        status: int | None,
        code: str,
        message: str,
        field: str | None = None,
        retry_after_s: float | None = None,
        request_id: str | None = None,
    ) -> None:
        where = f" (field {field})" if field else ""
        super().__init__(f"{status or 'no answer'} {code}: {message}{where}")
        self.status, self.code, self.message, self.field = status, code, message, field
        self.retry_after_s = retry_after_s
        self.request_id = request_id


def _body(request: Body) -> Any:
    if isinstance(request, BaseModel):
        return request.model_dump(mode="json")
    return dict(request)


def _retry_after_s(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        return float(value)
    except ValueError:
        return None


def error_from(response: httpx.Response) -> LayoutoptError:
    """The server's `{"error": {code, message, field}}`, or what can be said without it."""
    try:
        detail = response.json()["error"]
        code, message, field = str(detail["code"]), str(detail["message"]), detail.get("field")
    except (ValueError, KeyError, TypeError):
        code, message, field = "http_error", response.text[:500] or response.reason_phrase, None
    return LayoutoptError(
        response.status_code,
        code,
        message,
        field,
        retry_after_s=_retry_after_s(response),
        request_id=response.headers.get("X-Request-ID"),
    )


class Client:
    """One connection pool to one server; use it as a context manager or call `close()`."""

    def __init__(
        self,
        base_url: str,
        read_timeout_s: float = READ_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        timeout = httpx.Timeout(read_timeout_s, connect=CONNECT_TIMEOUT_S)
        # Retire idle connections before the server's 5 s keep-alive closes them mid-request.
        limits = httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S)
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout, limits=limits, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(
        self, method: str, path: str, answer: type[Answer], body: Body | None = None
    ) -> Answer:
        try:
            response = self._http.request(method, path, json=None if body is None else _body(body))
        except httpx.HTTPError as error:
            raise LayoutoptError(None, "unreachable", f"{type(error).__name__}: {error}") from error
        if response.is_error:
            raise error_from(response)
        try:
            return answer.model_validate(response.json())
        except (ValueError, ValidationError) as error:
            raise LayoutoptError(
                response.status_code, "bad_answer", f"unexpected answer from server: {error}"
            ) from error

    def evaluate(self, request: EvaluateRequest | Mapping[str, Any]) -> EstimateOut:
        """Price one layout (`POST /v1/evaluate`)."""
        return self._call("POST", "/v1/evaluate", EstimateOut, request)

    def export(self, request: EvaluateRequest | Mapping[str, Any]) -> ExportOut:
        """The layout in the request's engine's own input (`POST /v1/export`); a layout the
        engine cannot run raises `LayoutoptError` (422, field `engine`) naming its rules."""
        return self._call("POST", "/v1/export", ExportOut, request)

    def optimize(self, request: SearchRequest | Mapping[str, Any]) -> OptimizeOut:
        """The best layout, its proof status and what binds it (`POST /v1/optimize`)."""
        return self._call("POST", "/v1/optimize", OptimizeOut, request)

    def pareto(self, request: SearchRequest | Mapping[str, Any]) -> ParetoOut:
        """The memory/MFU frontier (`POST /v1/pareto`)."""
        return self._call("POST", "/v1/pareto", ParetoOut, request)

    def stages(self, request: StagesRequest | Mapping[str, Any]) -> StagesOut:
        """The best layout with each pipeline rank's layers (and recompute mode where the
        engine allows) chosen, and what was proved (`POST /v1/stages`)."""
        return self._call("POST", "/v1/stages", StagesOut, request)

    def scaling(self, request: ScalingRequest | Mapping[str, Any]) -> ScalingOut:
        """The best layout and throughput at each GPU count (`POST /v1/scaling`)."""
        return self._call("POST", "/v1/scaling", ScalingOut, request)

    def study(self, spec: Mapping[str, Any] | BaseModel) -> Iterator[dict[str, Any]]:
        """Each scenario's row as the server finishes it (`POST /v1/studies`, NDJSON). The
        request goes out when iteration starts; leaving the loop early closes the
        connection, and the server stops the rest of the study."""
        try:
            with self._http.stream("POST", "/v1/studies", json=_body(spec)) as response:
                if response.is_error:
                    response.read()
                    raise error_from(response)
                for line in response.iter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.HTTPError as error:
            raise LayoutoptError(None, "unreachable", f"{type(error).__name__}: {error}") from error

    def calibrate(self, request: CalibrateRequest | Mapping[str, Any]) -> CalibrateOut:
        """Fitted assumptions, residuals and leave-one-out error for measured runs
        (`POST /v1/calibrate`); `answer.assumptions` is any request's `assumptions`."""
        return self._call("POST", "/v1/calibrate", CalibrateOut, request)

    def plan(self, request: PlanRequestIn | Mapping[str, Any]) -> PlanOut:
        """Many jobs on one cluster: each job's pool, GPUs, nodes and layout (`POST /v1/plan`)."""
        return self._call("POST", "/v1/plan", PlanOut, request)

    def presets(self) -> PresetsOut:
        """The model and GPU presets (`GET /v1/presets`)."""
        return self._call("GET", "/v1/presets", PresetsOut)
