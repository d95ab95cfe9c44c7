"""What a calibration answers: each candidate assumption fitted or pinned (and why), each run's
step time before and after, each run predicted by the fit of the others, and the assumptions
file itself (fit.py and procedure.py compute them)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from optimizer.calibration.parameters import GPU_RELATIVE, SCALE_SUFFIX
from optimizer.calibration.reach import applies_to, recorded, regime_of
from optimizer.calibration.runs import MeasuredRun
from optimizer.costmodel import CostAssumptions
from optimizer.costmodel.assumptions import CalibrationProvenance


@dataclass(frozen=True)
class ParameterFit:
    name: str
    default: float | None
    lower: float
    upper: float
    what: str
    value: float | None = None  # fitted, and shrunk towards the default; None when pinned
    pinned: str | None = None  # why, when pinned
    runs_value: float | None = None  # what the runs alone gave, before the shrinkage

    @property
    def fitted(self) -> bool:
        return self.pinned is None

    @property
    def ratio_to_default(self) -> float | None:
        """A fitted share of the runs' GPU's peak over that GPU's default (GPU_RELATIVE):
        what carries to another GPU; None for the others, the pinned, or where the runs'
        GPUs have different defaults."""
        if self.name not in GPU_RELATIVE or self.value is None or not self.default:
            return None
        return self.value / self.default

    @property
    def at_bound(self) -> str | None:
        """'lower' or 'upper' when the fit ended on a bound: the runs ask for more than the
        bounds allow, a sign that the cost model misses something they have."""
        if self.value is None:
            return None
        tolerance = 1e-3 * (self.upper - self.lower)
        if self.value <= self.lower + tolerance:
            return (
                "lower" if self.default is None or self.default > self.lower + tolerance else None
            )
        if self.value >= self.upper - tolerance:
            return (
                "upper" if self.default is None or self.default < self.upper - tolerance else None
            )
        return None


@dataclass(frozen=True)
class Prediction:
    """A run's step time and MFU as a fit predicts them, and how far off the measurement."""

    run: MeasuredRun
    predicted_s: float
    predicted_mfu: float

    @property
    def log_error(self) -> float:
        return math.log(self.predicted_s / self.run.step_time_s)

    @property
    def mfu_error(self) -> float:
        return self.predicted_mfu - self.run.measured_mfu


@dataclass(frozen=True)
class RunFit(Prediction):
    """A run under the fit of all the runs (`predicted_s`: the fitted assumptions)."""

    predicted_before_s: float  # under the runs' own assumptions (the defaults)
    predicted_memory_gb: float

    @property
    def log_error_before(self) -> float:
        return math.log(self.predicted_before_s / self.run.step_time_s)

    @property
    def mfu_error_before(self) -> float:
        """The defaults' MFU miss: an MFU scales as one over the step time."""
        return (
            self.predicted_mfu * self.predicted_s / self.predicted_before_s - self.run.measured_mfu
        )

    @property
    def memory_error(self) -> float | None:
        if self.run.peak_memory_gb is None:
            return None
        return self.predicted_memory_gb / self.run.peak_memory_gb - 1


@dataclass(frozen=True)
class LeftOut(Prediction):
    """One run predicted by the fit of the others."""

    fitted: tuple[str, ...]  # what that fit freed


@dataclass(frozen=True)
class Shrinkage:
    """How far a fitted value moves from its default: `weight` = n / (n + k) of the way the
    runs ask for, n their distinct configurations (parameters.shrink_weight)."""

    configurations: int
    weight: float


@dataclass(frozen=True)
class Calibration:
    parameters: tuple[ParameterFit, ...]
    runs: tuple[RunFit, ...]
    leave_one_out: tuple[LeftOut, ...] | None  # None with a single run, or out of time
    optimizer: dict[str, Any] = field(default_factory=dict)
    leave_one_out_note: str | None = None  # why there is none
    complete: bool = True  # False: the time limit cut a step short (the reasons say which)
    shrinkage: Shrinkage | None = None

    @property
    def fitted(self) -> dict[str, float]:
        return {p.name: p.value for p in self.parameters if p.value is not None}

    @property
    def pinned(self) -> dict[str, str]:
        return {p.name: p.pinned for p in self.parameters if p.pinned is not None}

    @property
    def transfer_notes(self) -> list[str]:
        """For each fitted assumption whose default is the GPU's own figure, how the file
        holds it: as its ratio to the runs' GPU's default."""
        gpus = ", ".join(sorted({r.run.job.cluster.gpu.name for r in self.runs}))
        return [
            f"{p.name} {p.value:.4g} is a share of the {gpus} peak as these runs reached it, "
            f"{p.ratio_to_default:.3g} times its default there ({p.default:.4g}); the file "
            f"holds that ratio as {p.name}{SCALE_SUFFIX}, which multiplies the default a "
            "request within its reach prices (the attention kernel its engine's settings "
            "choose, say)"
            for p in self.parameters
            if p.ratio_to_default is not None
        ]

    def reach(self) -> dict[str, str]:
        """Each fitted assumption's reach in words: the requests it applies to (reach.py);
        elsewhere the default prices them."""
        origin = CalibrationProvenance.model_validate(self.provenance())
        return {name: applies_to(name, origin) for name in sorted(self.fitted)}

    def portable(self, stated: dict[str, Any] | None = None) -> dict[str, float]:
        """The fitted values as a request takes them: an assumption whose default is the
        runs' GPU's own figure as its ratio to that default (`<name>_scale`, times
        any scale the runs' requests `stated`), the others as fitted. Where the runs' GPUs
        have different defaults the fit is of the share itself, and so is the value."""
        stated = stated or {}
        out: dict[str, float] = {}
        for p in self.parameters:
            if p.ratio_to_default is not None:
                scale = p.name + SCALE_SUFFIX
                out[scale] = round(stated.get(scale, 1.0) * p.ratio_to_default, 4)
            elif p.value is not None:
                out[p.name] = round(p.value, 4)
        return out

    @property
    def rms_log_error_before(self) -> float:
        return rms([r.log_error_before for r in self.runs])

    @property
    def rms_log_error(self) -> float:
        return rms([r.log_error for r in self.runs])

    @property
    def loo_rms_log_error(self) -> float | None:
        if self.leave_one_out is None:
            return None
        return rms([r.log_error for r in self.leave_one_out])

    @property
    def loo_mean_abs_mfu_error(self) -> float | None:
        if self.leave_one_out is None:
            return None
        return sum(abs(r.mfu_error) for r in self.leave_one_out) / len(self.leave_one_out)

    @property
    def mean_abs_mfu_error_before(self) -> float:
        """The defaults' mean MFU miss: uncalibrated, a run left out is predicted as any is."""
        return sum(abs(r.mfu_error_before) for r in self.runs) / len(self.runs)

    def assumptions(self) -> dict[str, Any]:
        """The output file: an `assumptions` object any request can take as it stands. The
        fitted values, plus what every run's request states alike (facts of those runs)."""
        common = _common_stated(list(r.run for r in self.runs))
        out = {**common, **self.portable(common), "calibrated_on": self.provenance()}
        CostAssumptions.model_validate(out)  # valid as it stands
        return out

    def provenance(self) -> dict[str, Any]:
        """What the file's values were fitted on: what bounds their reach (reach.py)."""
        return {
            "gpus": sorted({r.run.job.cluster.gpu.name for r in self.runs}),
            "engines": sorted({r.run.engine for r in self.runs}),
            "runs": len(self.runs),
            "fitted": sorted(self.fitted),
            **recorded(regime_of(r.run.job, r.run.request.engine) for r in self.runs),
        }


def rms(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else 0.0


def _common_stated(runs: list[MeasuredRun]) -> dict[str, Any]:
    if not runs:
        return {}
    stated = set.intersection(*(set(r.stated) for r in runs))
    common = {}
    for name in sorted(stated):
        values = {repr(getattr(r.assumptions, name)) for r in runs}
        if len(values) == 1:
            common[name] = getattr(runs[0].assumptions, name)
    return common
