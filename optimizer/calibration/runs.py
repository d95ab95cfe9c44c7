"""A measured run: a job, the layout it ran, and what was measured, as one step time.

Every measurement becomes the step time the fit works on. A step time is taken as measured;
tokens per second per GPU is the step's tokens over it, samples (sequences) per second of all
GPUs together the global batch over it (DeepSpeed's figure); an MFU or HFU is turned through the
profile's own FLOP count of that very step (model FLOPs, or with recomputation), which does not
depend on any assumption the fit moves, so `mfu * step time` is fixed for the job and layout.

A measurement is refused (InvalidSpec naming the run and its measure) when it cannot have been
measured: an MFU above what the GPU's peak at the run's precision allows, or repeats of one
configuration further apart than repeats differ (`MAX_REPEAT_SPREAD`). A fit goes through
whatever it is given, so a unit slip (ms for s) would otherwise move every fitted assumption.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout
from optimizer.calibration.logs import LogReading, read_log
from optimizer.costmodel import CostAssumptions, Estimate, evaluate
from optimizer.costmodel.standard.precision import format_peak_flop_s
from optimizer.engines import Engine, engine_assumptions

if TYPE_CHECKING:  # a run holds the request it ran; the request reads calibration's reach
    from optimizer.request import Request

MEASURES = ("step_time_s", "tokens_per_s_per_gpu", "samples_per_s", "mfu", "hfu")
# Repeats of one configuration differ by a few percent (a slow node, warm-up left in the
# mean); runs of one request further apart than this factor are of different setups or in
# another unit, and a fit through both is a fit through neither.
MAX_REPEAT_SPREAD = 2.0


@dataclass(frozen=True)
class MeasuredRun:
    name: str
    # what ran: the job, its layout, the engine it ran on, the profile of the fit; the
    # assumptions it sets are facts of the run, pinned for it
    request: Request
    measure: str  # one of MEASURES: what was measured
    value: float  # as measured, in the measure's unit
    step_time_s: float  # the measurement as a step time (what the fit works on)
    # the run's assumptions as its engine runs it (optimizer.engines: its gradient sync,
    # kernels, overlaps), as evaluate and optimize price a request naming that engine
    priced: CostAssumptions
    peak_memory_gb: float | None = None
    log: LogReading | None = None  # the training log the measurement was read from

    @property
    def job(self) -> TrainingJob:
        return self.request.job

    @property
    def layout(self) -> Layout:
        return ran_layout(self.request)

    @property
    def profile(self) -> str:
        return self.request.profile

    @property
    def assumptions(self) -> CostAssumptions:
        return self.request.assumptions

    @property
    def engine(self) -> str:
        return ran_on(self.request).name

    @property
    def stated(self) -> frozenset[str]:
        """The assumptions the run's request sets: facts of that run, never fitted."""
        return frozenset(self.assumptions.model_fields_set)

    def estimate(self, values: dict[str, float] | None = None) -> Estimate:
        """The run priced with `values` laid over its assumptions (not over those it states)."""
        update = {k: v for k, v in (values or {}).items() if k not in self.stated}
        return evaluate(self.job, self.layout, self.profile, self.priced.model_copy(update=update))

    @property
    def measured_mfu(self) -> float:
        """The measurement as an MFU by the profile's model FLOPs."""
        est = self.estimate()
        return est.mfu * est.step_time_s / self.step_time_s


def ran_layout(request: Request) -> Layout:
    """The layout a run's request ran (a measured run always names one)."""
    if request.layout is None:
        raise InvalidSpec("a measured run names the layout it ran", "layout")
    return request.layout


def ran_on(request: Request) -> Engine:
    """The engine a run's request ran on (a measured run always names one: `generic` for
    the engine-agnostic model)."""
    if request.engine is None:
        raise InvalidSpec("a measured run names the engine it ran on", "engine")
    return request.engine


def measured_run(
    name: str,
    request: Request,
    measure: str,
    value: float,
    peak_memory_gb: float | None = None,
    precision: str | None = None,
) -> MeasuredRun:
    """A run whose measurement is turned into a step time (see the module's note); its
    `precision`, where the training spec cannot say it (fp16), is how its engine reduced."""
    if measure not in MEASURES:
        raise InvalidSpec(f"{name}: measured {measure!r} is none of {', '.join(MEASURES)}")
    if not value > 0:
        raise InvalidSpec(f"{name}: measured {measure} must be positive, got {value}")
    job, layout, profile = request.job, ran_layout(request), request.profile
    priced = engine_assumptions(
        ran_on(request), request.assumptions, precision or job.training.precision
    )
    est = evaluate(job, layout, profile, priced)
    if measure == "step_time_s":
        step = value
    elif measure == "tokens_per_s_per_gpu":
        step = job.training.tokens_per_step / (value * job.cluster.gpus)
    elif measure == "samples_per_s":
        step = job.training.global_batch / value
    elif measure == "mfu":
        step = est.step_time_s * est.mfu / value
    else:
        hfu = est.hardware_flops_utilization
        if hfu is None:
            raise InvalidSpec(f"{name}: profile {profile} reports no HFU to compare with")
        step = est.step_time_s * hfu / value
    if not (math.isfinite(step) and step > 0):
        raise InvalidSpec(f"{name}: measured {measure} {value} gives no finite step time")
    check_within_peak(name, measure, value, est.mfu * est.step_time_s / step, job, precision)
    return MeasuredRun(
        name=name,
        request=request,
        measure=measure,
        value=float(value),
        step_time_s=float(step),
        peak_memory_gb=peak_memory_gb,
        priced=priced,
    )


def run_from_log(name: str, request: Request, text: str, format_: str | None = None) -> MeasuredRun:
    """The run a training log measured: its steady-state figure and peak memory
    (optimizer.calibration.logs) under the request it ran."""
    reading = read_log(text, format_)
    run = measured_run(name, request, reading.measure, reading.value, reading.peak_memory_gb)
    return replace(run, log=reading)


def peak_mfu(job: TrainingJob, precision: str | None = None) -> float:
    """The most MFU (over the bf16 dense peak, as every MFU here is) a run at its precision
    can reach: its format's dense peak over bf16's (1 in bf16 and fp16, and where the GPU
    names no peak in the format)."""
    gpu = job.cluster.gpu
    peak = format_peak_flop_s(gpu, precision or job.training.precision)
    return (peak or gpu.peak_flop_s) / gpu.peak_flop_s


def check_within_peak(
    name: str, measure: str, value: float, mfu: float, job: TrainingJob, precision: str | None
) -> None:
    """InvalidSpec when the measurement means more model FLOPs a second than the GPU's peak
    at the run's precision delivers."""
    ceiling = peak_mfu(job, precision)
    if mfu > ceiling:
        raise InvalidSpec(
            f"{name}: measured {measure} {value:g} means an MFU of {mfu:.1%}, above the "
            f"{ceiling:.0%} of the bf16 dense peak that {job.cluster.gpu.name} reaches at most in "
            f"{precision or job.training.precision}: check the unit and the run's request",
            f"measured.{measure}",
        )


def check_repeats(runs: Sequence[MeasuredRun]) -> None:
    """InvalidSpec naming the first run whose step time is more than MAX_REPEAT_SPREAD from
    that of an earlier run of one configuration (job, layout, profile, assumptions, engine),
    beside the earlier run furthest from it."""
    seen: dict[str, list[int]] = {}
    for index, run in enumerate(runs):
        earlier = seen.setdefault(configuration(run), [])
        spreads = {other: _spread(run, runs[other]) for other in earlier}
        other = max(spreads, key=spreads.__getitem__, default=None)
        if other is not None and spreads[other] > MAX_REPEAT_SPREAD:
            raise InvalidSpec(
                f"runs.{index}.measured.{run.measure}: {run.name} measured a step of "
                f"{run.step_time_s:.4g} s and {runs[other].name}, of the same request, "
                f"{runs[other].step_time_s:.4g} s: {spreads[other]:.3g}x apart, where repeats "
                f"of one setup differ by at most {MAX_REPEAT_SPREAD:g}x; check the units, or "
                "whether both ran the same setup",
                f"runs.measured.{run.measure}",
            )
        earlier.append(index)


def _spread(run: MeasuredRun, other: MeasuredRun) -> float:
    steps_s = (run.step_time_s, other.step_time_s)
    return max(steps_s) / min(steps_s)


def configuration(run: MeasuredRun) -> str:
    """What a run ran (job, layout, assumptions, profile, engine): equal for repeats."""
    parts = (run.job, run.layout, run.assumptions)
    return "|".join([*(part.model_dump_json() for part in parts), run.profile, run.engine])
