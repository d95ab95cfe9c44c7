"""A scaling curve: one job's best layout and throughput at each of several GPU counts, the
table GPU-cluster schedulers consume (Sia's goodput per configuration, Pollux's throughput
model). Each point carries its own honest status; a count the job cannot use (a degree that
divides nothing) is a point with its error, not the end of the curve.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from models.errors import InvalidSpec
from models.job import TrainingJob
from optimizer.costmodel import CostAssumptions
from optimizer.results import OptimizeResult
from optimizer.search import SearchSpace, StopSignal
from optimizer.searches import optimize
from optimizer.studies.spec import StudyError

MAX_SCALING_POINTS = 64


@dataclass(frozen=True)
class ScalingPoint:
    gpus: int
    nodes: int
    result: OptimizeResult | None  # None: the count could not be searched (see error)
    error: str | None = None
    wall_s: float = 0.0

    @property
    def status(self) -> str:
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
    job: TrainingJob,
    gpu_counts: list[int],
    space: SearchSpace | None = None,
    profile: str = "standard",
    assumptions: CostAssumptions | None = None,
    time_limit_s: float = 10.0,
    workers: int = 1,
    explain: bool = False,
    stop: StopSignal | None = None,
    engine: str | None = None,
) -> list[ScalingPoint]:
    """The best layout at each count, `time_limit_s` and `workers` CP-SAT workers each."""
    points = []
    for gpus in gpu_counts:
        cluster = job.cluster.model_copy(update={"gpus": gpus})
        at_count = job.model_copy(update={"cluster": cluster})
        nodes = math.ceil(gpus / cluster.gpus_per_node)
        start = time.perf_counter()
        try:
            result = optimize(
                at_count, space, profile, assumptions, time_limit_s, workers, explain, stop, engine
            )
        except InvalidSpec as error:
            points.append(ScalingPoint(gpus, nodes, None, error.message))
            continue
        points.append(ScalingPoint(gpus, nodes, result, wall_s=time.perf_counter() - start))
    return points


def proved(points: list[ScalingPoint]) -> bool:
    """Every point proved (optimal or infeasible) or refused: the curve will not improve
    with more time, so it may be cached."""
    return all(point.status in ("optimal", "infeasible", "error") for point in points)
