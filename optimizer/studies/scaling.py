"""A scaling curve: one job's best layout and throughput at each of several GPU counts, the
table GPU-cluster schedulers consume (Sia's goodput per configuration, Pollux's throughput
model). Each point carries its own honest status; a count the job cannot use (a degree that
divides nothing) is a point with its error, not the end of the curve; a count the curve's
time limit did not reach is a point with status unknown, never left out.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from models.errors import InvalidSpec
from optimizer.request import Request
from optimizer.results import OptimizeResult
from optimizer.search import SolveSettings
from optimizer.searches import optimize
from optimizer.studies.spec import StudyError

MAX_SCALING_POINTS = 64
# A count whose share of the curve's time is below this is not searched (not reached): an
# optimize call needs about this much to price its first layouts.
MIN_POINT_S = 0.1


@dataclass(frozen=True)
class ScalingPoint:
    gpus: int
    nodes: int
    result: OptimizeResult | None  # None: not searched (see error, or not reached)
    error: str | None = None
    wall_s: float = 0.0
    reached: bool = True  # False: the curve's time ran out (or it was stopped) before it

    @property
    def status(self) -> str:
        if not self.reached:
            return "unknown"  # nothing was tried: nothing proved, infeasibility least of all
        return "error" if self.result is None else self.result.status


def whole_node_counts(
    min_gpus: int, max_gpus: int, gpus_per_node: int, limit: int = MAX_SCALING_POINTS
) -> list[int]:
    """Every whole-node GPU count from `min_gpus` to `max_gpus`, refused past `limit`."""
    if min_gpus > max_gpus:
        raise StudyError(f"min_gpus ({min_gpus}) is above max_gpus ({max_gpus})", "gpu_range")
    first_nodes = math.ceil(min_gpus / gpus_per_node)
    counts = range(first_nodes * gpus_per_node, max_gpus + 1, gpus_per_node)  # counted, not built
    if not counts:
        raise StudyError(
            f"no whole number of {gpus_per_node}-GPU nodes lies from {min_gpus} to {max_gpus} GPUs",
            "gpu_range",
        )
    if len(counts) > limit:
        raise StudyError(
            f"{len(counts)} whole-node counts lie from {min_gpus} to {max_gpus} GPUs "
            f"({gpus_per_node} a node); the limit is {limit}: narrow the range or list the "
            "counts (gpu_counts)",
            "gpu_range",
        )
    return list(counts)


def check_counts(gpu_counts: list[int], limit: int = MAX_SCALING_POINTS) -> list[int]:
    """The distinct counts, ascending, refused past `limit`."""
    counts = sorted(set(gpu_counts))
    if len(counts) > limit:
        raise StudyError(f"{len(counts)} GPU counts asked for; the limit is {limit}", "gpu_counts")
    return counts


def scaling_curve(
    request: Request, gpu_counts: list[int], budget: SolveSettings
) -> list[ScalingPoint]:
    """The best layout of the request's job at each count, on the budget's CP-SAT workers.
    The budget's time limit bounds the whole curve: each count gets an equal share of what
    is left, at least MIN_POINT_S (a count that finishes early leaves its time to the next);
    counts the time or the stop leaves nothing for are points not reached (status unknown),
    never dropped."""
    deadline = time.perf_counter() + budget.time_limit_s
    job, stop = request.job, budget.stop
    points: list[ScalingPoint] = []
    for position, gpus in enumerate(gpu_counts):
        cluster = job.cluster.model_copy(update={"gpus": gpus})
        nodes = math.ceil(gpus / cluster.gpus_per_node)
        left_s = deadline - time.perf_counter()
        share_s = min(max(left_s / (len(gpu_counts) - position), MIN_POINT_S), left_s)
        if share_s < MIN_POINT_S or stop.stopped:
            points.append(ScalingPoint(gpus, nodes, None, reached=False))
            continue
        start = time.perf_counter()
        try:
            result = optimize(request.on(cluster), budget.with_time_limit(share_s))
        except InvalidSpec as error:
            points.append(ScalingPoint(gpus, nodes, None, error.message))
            continue
        points.append(ScalingPoint(gpus, nodes, result, wall_s=time.perf_counter() - start))
    return points


def not_reached_warnings(points: list[ScalingPoint]) -> list[str]:
    """What the curve's answer says when its time ran out before some counts."""
    missed = [point.gpus for point in points if not point.reached]
    if not missed:
        return []
    return [
        f"{len(missed)} of {len(points)} GPU counts were not reached (status unknown): the "
        "time limit, which bounds the whole curve, ran out before them (or the request was "
        "stopped); give fewer counts or more time"
    ]


def proved(points: list[ScalingPoint]) -> bool:
    """Every point proved (optimal or infeasible) or refused: the curve will not improve
    with more time, so it may be cached."""
    return all(point.status in ("optimal", "infeasible", "error") for point in points)
