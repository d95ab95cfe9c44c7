"""Service settings, read from the environment (HOST, PORT, WORKERS, ...), one per knob."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from models.errors import InvalidSpec
from optimizer.planning.store import curve_cache


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, gt=0, lt=65536)
    workers: int = Field(
        default_factory=usable_cores,
        gt=0,
        le=256,
        description="Solver threads: solves are CPU-bound, so one per core.",
    )
    solve_in: Literal["threads", "processes"] = Field(
        "threads",
        description="Where solves run: the solver threads themselves, or one worker process "
        "each (more throughput on several cores, as the search's numpy and Python hold the "
        "GIL; about 0.25 GB more memory a worker, docs/deploy.md).",
    )
    queue_depth: int = Field(
        8, ge=0, le=10_000, description="Solves that may wait for a worker before 503."
    )
    solver_time_limit_s: float = Field(
        10.0, gt=0, le=3600, description="Cap on each solve; a request may ask for less."
    )
    cache_size: int = Field(
        1024, ge=0, le=1_000_000, description="Answers kept for identical requests; 0 disables."
    )
    cache_max_bytes: int = Field(
        128 * 2**20,
        ge=0,
        le=2**40,
        description="Memory the cached answers may hold (each counted from its JSON's length); "
        "the least recently used go first, and an answer larger than this is not kept.",
    )
    curve_store: str = Field(
        "",
        description="A folder where plans keep the scaling curves they price, so that a "
        "restart (or another solver process) does not price them again; empty: memory only. "
        "One host's processes may share it; replicas on other hosts may not (docs/deploy.md).",
    )

    @field_validator("curve_store")
    @classmethod
    def _curve_store_opens(cls, value: str) -> str:
        # at start, not at the first plan: a folder that cannot hold curves is refused with
        # the service, naming CURVE_STORE, rather than failing every plan
        if value:
            try:
                curve_cache(value)
            except InvalidSpec as error:
                raise ValueError(error.message) from None
        return value

    max_body_bytes: int = Field(
        1_000_000, gt=0, le=100_000_000, description="Larger request bodies get 413."
    )
    max_in_flight: int = Field(
        256,
        gt=0,
        le=100_000,
        description="Requests with a body served at once; more get 503. Bounds memory "
        "to about max_in_flight * max_body_bytes.",
    )
    retry_after_s: int = Field(
        1,
        gt=0,
        le=3600,
        description="Least Retry-After sent with a 503; a solver queue's expected wait when longer.",
    )
    body_timeout_s: float = Field(
        10.0, gt=0, le=600, description="A request body not whole after this gets 408."
    )
    max_body_buffer_bytes: int = Field(
        64_000_000,
        gt=0,
        le=10_000_000_000,
        description="Bytes of request bodies still arriving that are held at once, all "
        "connections together; a body whose next chunk would pass it gets 503. Counts bytes, "
        "not senders: slow senders holding a few bytes each lock nobody out.",
    )
    max_connections: int = Field(
        1000,
        gt=0,
        le=1_000_000,
        description="Open client connections; beyond it an idle one (between requests or "
        "still sending its request head) is closed to make room, else the new one is. "
        "Lowered at start to what the open-file limit leaves room for.",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="A connection whose request head (request line and headers) is not whole "
        "this long after it opened, or after its previous response, is closed.",
    )
    drain_s: float = Field(
        3.0,
        ge=0,
        le=600,
        description="After SIGTERM: seconds during which /readyz answers 503 and new work is "
        "refused, before the listener closes.",
    )
    shutdown_grace_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        description="After the drain: the most running solves may take to finish; default "
        "solver_time_limit_s + 5.",
    )
    max_study_scenarios: int = Field(
        1000,
        gt=0,
        le=100_000,
        description="Scenarios one POST /v1/studies may hold; more get 422 (run larger studies "
        "with `layoutopt study`, which has no such bound but the spec's own).",
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"

    @property
    def grace_s(self) -> float:
        if self.shutdown_grace_s is not None:
            return self.shutdown_grace_s
        return self.solver_time_limit_s + 5

    @model_validator(mode="after")
    def _one_body_fits_the_buffer(self) -> Settings:
        if self.max_body_buffer_bytes < self.max_body_bytes:
            raise ValueError("max_body_buffer_bytes must be at least max_body_bytes")
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_case(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value
