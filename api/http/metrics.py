"""The service's Prometheus metrics, on prometheus_client: one registry per app (so tests
start from zero), counters and histograms with fixed label sets, gauges read at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Seconds: a cached answer (~1 ms) through a solve that hits a 30 s time limit.
LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# The methods of RFC 9110 section 9 and PATCH (RFC 5789) are labelled by name; any other token a
# client invents is one label value, so clients cannot grow the metrics without bound.
STANDARD_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
OTHER_METHOD = "other"


def method_label(method: str) -> str:
    return method if method in STANDARD_METHODS else OTHER_METHOD


class Metrics:
    """The service's metrics and the registry that renders them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "layoutopt_http_requests",
            "HTTP requests answered, by method (other for a non-standard one), route template and "
            "status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "layoutopt_http_request_duration_seconds",
            "Time from request to response, by method and route template.",
            ("method", "route"),
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.solver_seconds = Histogram(
            "layoutopt_solver_wall_seconds",
            "Wall time of the work (cache misses only): pricing inline, solves in the pool.",
            ("operation",),
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.cache_hits = self._counter("layoutopt_cache_hits", "Answers served from the cache.")
        self.cache_misses = self._counter("layoutopt_cache_misses", "Answers computed afresh.")
        self.rejections = Counter(
            "layoutopt_rejections",
            "Requests refused or dropped before their answer: saturated, draining, in_flight, "
            "body_buffer (503), body_timeout (408), body_too_large (413), ambiguous_framing "
            "(400), client_gone.",
            ("reason",),
            registry=self.registry,
        )
        self.connections_closed = Counter(
            "layoutopt_http_connections_closed",
            "Connections the server closed unasked: header_timeout (no whole request head in "
            "time), connection_limit (closed to stay within the connection limit).",
            ("reason",),
            registry=self.registry,
        )

    def _counter(self, name: str, help_text: str) -> Counter:
        return Counter(name, help_text, ("operation",), registry=self.registry)

    def add_gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        Gauge(name, help_text, registry=self.registry).set_function(read)

    def render(self) -> bytes:
        return generate_latest(self.registry)
