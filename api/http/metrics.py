"""Prometheus metrics in the text exposition format (version 0.0.4), written by hand.

Four metric kinds are all the service needs, so no client library: counters and histograms
with a fixed label set each, and gauges read from a callback at scrape time.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: a cached answer (~1 ms) through a solve that hits a 30 s time limit.
LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

Labels = tuple[str, ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_text(names: Labels, values: Labels, extra: str = "") -> str:
    pairs = [f'{name}="{_escape(value)}"' for name, value in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class Counter:
    kind = "counter"

    def __init__(self, name: str, help_text: str, label_names: Labels = ()) -> None:
        self.name, self.help_text, self.label_names = name, help_text, label_names
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def samples(self) -> Iterable[str]:
        with self._lock:
            items = sorted(self._values.items())
        for labels, value in items:
            yield f"{self.name}{_label_text(self.label_names, labels)} {_number(value)}"


class Histogram:
    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Labels = (),
        buckets: tuple[float, ...] = LATENCY_BUCKETS_S,
    ) -> None:
        self.name, self.help_text, self.label_names = name, help_text, label_names
        self.buckets = buckets
        # per label set: one count per bucket (not cumulative) plus the overflow, and the sum
        self._counts: dict[Labels, list[int]] = {}
        self._sums: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def observe(self, value: float, *labels: str) -> None:
        slot = bisect_left(self.buckets, value)
        with self._lock:
            counts = self._counts.setdefault(labels, [0] * (len(self.buckets) + 1))
            counts[slot] += 1
            self._sums[labels] = self._sums.get(labels, 0.0) + value

    def count(self, *labels: str) -> int:
        with self._lock:
            return sum(self._counts.get(labels, ()))

    def samples(self) -> Iterable[str]:
        with self._lock:
            items = sorted((labels, list(counts)) for labels, counts in self._counts.items())
            sums = dict(self._sums)
        for labels, counts in items:
            cumulative = 0
            for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
                cumulative += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                label_text = _label_text(self.label_names, labels, f'le="{le}"')
                yield f"{self.name}_bucket{label_text} {cumulative}"
            label_text = _label_text(self.label_names, labels)
            yield f"{self.name}_sum{label_text} {_number(sums[labels])}"
            yield f"{self.name}_count{label_text} {cumulative}"


class Gauge:
    kind = "gauge"

    def __init__(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self.name, self.help_text, self._read = name, help_text, read

    def samples(self) -> Iterable[str]:
        yield f"{self.name} {_number(self._read())}"


Metric = Counter | Histogram | Gauge


class Metrics:
    """The service's metrics; one instance per app, so tests start from zero."""

    def __init__(self) -> None:
        self.requests = Counter(
            "layoutopt_http_requests_total",
            "HTTP requests answered, by method, route template and status.",
            ("method", "route", "status"),
        )
        self.request_seconds = Histogram(
            "layoutopt_http_request_duration_seconds",
            "Time from request to response, by method and route template.",
            ("method", "route"),
        )
        self.solver_seconds = Histogram(
            "layoutopt_solver_wall_seconds",
            "Wall time of the work (cache misses only): pricing inline, solves in the pool.",
            ("operation",),
        )
        self.cache_hits = Counter(
            "layoutopt_cache_hits_total", "Answers served from the cache.", ("operation",)
        )
        self.cache_misses = Counter(
            "layoutopt_cache_misses_total", "Answers computed afresh.", ("operation",)
        )
        self.rejections = Counter(
            "layoutopt_rejections_total",
            "Requests refused before any work: saturated, in_flight (503), body_too_large (413).",
            ("reason",),
        )
        self._metrics: list[Metric] = [
            self.requests,
            self.request_seconds,
            self.solver_seconds,
            self.cache_hits,
            self.cache_misses,
            self.rejections,
        ]

    def add_gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self._metrics.append(Gauge(name, help_text, read))

    def render(self) -> str:
        lines: list[str] = []
        for metric in self._metrics:
            lines.append(f"# HELP {metric.name} {metric.help_text}")
            lines.append(f"# TYPE {metric.name} {metric.kind}")
            lines.extend(metric.samples())
        return "\n".join(lines) + "\n"
