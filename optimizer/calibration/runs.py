"""A measured run: a job, the layout it ran, and what was measured, as one step time.

Every measurement becomes the step time the fit works on. A step time is taken as measured;
tokens per second per GPU is the step's tokens over it; an MFU or HFU is turned through the
profile's own FLOP count of that very step (model FLOPs, or with recomputation), which does not
depend on any assumption the fit moves, so `mfu * step time` is fixed for the job and layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout
from optimizer.costmodel import CostAssumptions, Estimate, evaluate
from optimizer.engines import engine_assumptions, get_engine

MEASURES = ("step_time_s", "tokens_per_s_per_gpu", "mfu", "hfu")


@dataclass(frozen=True)
class MeasuredRun:
    name: str
    job: TrainingJob
    layout: Layout
    profile: str
    assumptions: CostAssumptions  # the run's own; the fields it sets are pinned for it
    engine: str
    measure: str  # one of MEASURES: what was measured
    value: float  # as measured, in the measure's unit
    step_time_s: float  # the measurement as a step time (what the fit works on)
    # the run's assumptions as its engine runs it (optimizer.engines: its gradient sync,
    # kernels, overlaps), as evaluate and optimize price a request naming that engine
    priced: CostAssumptions
    peak_memory_gb: float | None = None

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


def measured_run(
    name: str,
    job: TrainingJob,
    layout: Layout,
    profile: str,
    assumptions: CostAssumptions,
    engine: str,
    measure: str,
    value: float,
    peak_memory_gb: float | None = None,
    precision: str | None = None,
) -> MeasuredRun:
    """A run whose measurement is turned into a step time (see the module's note)."""
    if measure not in MEASURES:
        raise InvalidSpec(f"{name}: measured {measure!r} is none of {', '.join(MEASURES)}")
    if not value > 0:
        raise InvalidSpec(f"{name}: measured {measure} must be positive, got {value}")
    priced = engine_assumptions(
        get_engine(engine), assumptions, precision or job.training.precision
    )
    est = evaluate(job, layout, profile, priced)
    if measure == "step_time_s":
        step = value
    elif measure == "tokens_per_s_per_gpu":
        step = job.training.tokens_per_step / (value * job.cluster.gpus)
    elif measure == "mfu":
        step = est.step_time_s * est.mfu / value
    else:
        hfu = est.hardware_flops_utilization
        if hfu is None:
            raise InvalidSpec(f"{name}: profile {profile} reports no HFU to compare with")
        step = est.step_time_s * hfu / value
    if not (math.isfinite(step) and step > 0):
        raise InvalidSpec(f"{name}: measured {measure} {value} gives no finite step time")
    return MeasuredRun(
        name=name,
        job=job,
        layout=layout,
        profile=profile,
        assumptions=assumptions,
        engine=engine,
        measure=measure,
        value=float(value),
        step_time_s=float(step),
        peak_memory_gb=peak_memory_gb,
        priced=priced,
    )
