"""Each job's scaling curve: the best layout's throughput at each (pool, node count) it may
be given, from `optimize` of its request moved there, without explanations, in a short time
limit, cached per (the request but its cluster, GPU type and node size, GPU count) for the
life of the process.

A point whose search did not find a layout (infeasible, unknown, an invalid count) is kept
with its status and note, and left out of the plan's configurations: the answer says so.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property

from models.errors import InvalidSpec
from optimizer.costmodel import Estimate
from optimizer.planning.cluster import Pool
from optimizer.planning.jobs import PlanJob
from optimizer.planning.problem import PlanProblem, PlanSettings
from optimizer.request import Request
from optimizer.search import SolveSettings
from optimizer.searches import optimize

USABLE = ("optimal", "feasible")
# Below this much time an optimize call only pays its set-up: the point is left unpriced.
MIN_POINT_S = 0.02
CACHE_ENTRIES = 16_384
# what one point's search found: status, tokens/s, the best estimate, a note
CurveValue = tuple[str, float, Estimate | None, str]


@dataclass(frozen=True)
class CurvePoint:
    job: int
    pool: int
    nodes: int
    gpus: int
    status: str  # optimize's status, or "invalid", or "not_priced" (no time was left)
    tokens_per_s: float = 0.0  # the whole job's, at its best layout
    estimate: Estimate | None = None
    note: str = ""

    @property
    def usable(self) -> bool:
        return self.status in USABLE and self.tokens_per_s > 0


@dataclass(frozen=True)
class Curves:
    points: tuple[CurvePoint, ...]
    wall_s: float = 0.0
    optimize_calls: int = 0
    cache_hits: int = 0

    def usable(self, job: int) -> tuple[CurvePoint, ...]:
        return tuple(p for p in self.points if p.job == job and p.usable)

    def point(self, job: int, pool: int, nodes: int) -> CurvePoint | None:
        return self._by_key.get((job, pool, nodes))

    @cached_property
    def _by_key(self) -> dict[tuple[int, int, int], CurvePoint]:
        return {(p.job, p.pool, p.nodes): p for p in self.points}

    @property
    def left_out(self) -> tuple[CurvePoint, ...]:
        return tuple(p for p in self.points if not p.usable)

    @property
    def complete(self) -> bool:
        """Every point was settled: a layout, or the proof (or rule) that none exists."""
        return all(p.status not in ("unknown", "not_priced") for p in self.points)


class CurveCache:
    """A bounded, thread-safe LRU map from a point's key to what its search found."""

    def __init__(self, max_entries: int = CACHE_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, CurveValue] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> CurveValue | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: str, value: CurveValue) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


CURVE_CACHE = CurveCache()


def curve_key(request: Request) -> str:
    """Canonical text of everything that prices a job but its cluster: the cache's key."""
    parts = {
        "model": request.job.model.model_dump(mode="json"),
        "training": request.job.training.model_dump(mode="json"),
        "profile": request.profile,
        "assumptions": request.assumptions.model_dump(mode="json"),
        "search": request.space.model_dump(mode="json"),
        # the version and the named settings price a layout as much as the engine does
        "engine": None if request.engine is None else request.engine.spec,
        "engine_settings": None
        if request.engine is None
        else {name: str(value) for name, value in sorted(request.engine.settings_in_force.items())},
    }
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


def price_point(
    job: PlanJob, pool: Pool, nodes: int, time_limit_s: float, settings: PlanSettings
) -> CurveValue:
    """The best layout of `job` on `nodes` nodes of `pool`: status, tokens/s, estimate, note.
    One CP-SAT worker whatever the plan's: the curve must not depend on it."""
    request = replace(job.on_pool(pool, nodes), explain=False)
    try:
        result = optimize(request, SolveSettings(time_limit_s, 1, settings.stop))
    except InvalidSpec as error:
        return "invalid", 0.0, None, error.message
    if result.best is None:
        why = "proved: no layout fits" if result.status == "infeasible" else "no layout found"
        return result.status, 0.0, None, f"{why} in {time_limit_s:g} s"
    tokens_per_s = result.best.tokens_per_s_per_gpu * nodes * pool.gpus_per_node
    note = "" if result.status == "optimal" else "best layout found, not proved best"
    return result.status, tokens_per_s, result.best, note


def _candidates(problem: PlanProblem) -> list[tuple[int, int, int]]:
    """(job, pool, nodes) to price, each job's smaller counts first, so that a short time
    limit still gives every job something."""
    found = []
    for j, job in enumerate(problem.jobs):
        for p, pool in enumerate(problem.pools):
            counts = job.candidate_nodes(pool, problem.running_gpus(job))
            found += [(rank, j, p, n) for rank, n in enumerate(counts)]
    return [(j, p, n) for _, j, p, n in sorted(found)]


def build_curves(
    problem: PlanProblem,
    settings: PlanSettings,
    deadline: float,
    cache: CurveCache = CURVE_CACHE,
) -> Curves:
    """Every candidate point priced (or taken from the cache) until `deadline`
    (a time.perf_counter() value); the rest are `not_priced`."""
    start = time.perf_counter()
    points, calls, hits = [], 0, 0
    for j, p, n in _candidates(problem):
        job, pool = problem.jobs[j], problem.pools[p]
        gpus = n * pool.gpus_per_node
        if job.request is None:
            points.append(_measured_point(job, j, p, n, gpus, pool))
            continue
        key = f"{curve_key(job.request)}|{pool.gpu_key()}|{gpus}"
        found = cache.get(key)
        hits += found is not None
        if found is None:
            left_s = min(settings.curve_time_limit_s, deadline - time.perf_counter())
            if left_s < MIN_POINT_S or settings.stop.stopped:
                found = ("not_priced", 0.0, None, "the time limit ran out before it was priced")
            else:
                found = price_point(job, pool, n, left_s, settings)
                calls += 1
                if found[0] != "unknown":
                    cache.put(key, found)
        status, tokens_per_s, estimate, note = found
        points.append(CurvePoint(j, p, n, gpus, status, tokens_per_s, estimate, note))
    return Curves(tuple(points), time.perf_counter() - start, calls, hits)


def _given_point(j: int, p: int, n: int, gpus: int, value: float, missing: str) -> CurvePoint:
    """A point whose throughput was given, not priced: no layout; `missing` says why a
    point without a figure has none."""
    if value > 0:
        return CurvePoint(j, p, n, gpus, "optimal", value, None, "")
    return CurvePoint(j, p, n, gpus, "infeasible", 0.0, None, missing)


def _measured_point(job: PlanJob, j: int, p: int, n: int, gpus: int, pool: Pool) -> CurvePoint:
    """A point of a job that brought its own throughput: taken as given, no layout."""
    assert job.measured is not None
    value = job.measured.counts(pool.gpu.name).get(gpus, 0.0)
    return _given_point(j, p, n, gpus, value, "not measured on this count")


def given_curves(
    problem: PlanProblem, tokens_per_s: Mapping[tuple[str, str, int], float]
) -> Curves:
    """Curves from a table (job name, pool name, nodes) -> tokens/s, as Sia and Pollux take
    them: for tests, benchmarks and schedulers that measured their own. Missing or zero
    entries are points without a layout."""
    points = []
    for j, p, n in _candidates(problem):
        job, pool = problem.jobs[j], problem.pools[p]
        value = float(tokens_per_s.get((job.name, pool.name, n), 0.0))
        gpus = n * pool.gpus_per_node
        points.append(_given_point(j, p, n, gpus, value, "no throughput given"))
    return Curves(tuple(points))
