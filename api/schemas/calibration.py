"""Calibration's request and answer (`POST /v1/calibrate`, `layoutopt calibrate`): measured
runs in, fitted assumptions out, with the fit's residuals and leave-one-out error beside them.

Each run is `{"request": <an evaluate request with its layout and engine>, "measured":
{"step_time_s" | "tokens_per_s_per_gpu" | "samples_per_s" | "mfu" | "hfu": ..., "peak_memory_gb":
...}}`, one line of RUNS.jsonl; or, instead of `measured`, `"log": {"text": <the run's training
log>, "format": "megatron" | "nemo" | "torchtitan" | "deepspeed" (detected when absent)}`, read
into the same figures (optimizer/calibration/logs.py). The answer's `assumptions` is an `assumptions` object any request takes as
it stands (the file `layoutopt calibrate --out` writes); nothing refers to a calibration file
by name.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from api.schemas.answers import FRACTION_DECIMALS
from api.schemas.requests import PLATE_EXAMPLE, EvaluateRequest
from models.errors import InvalidSpec
from models.strict import REQUEST_CONFIG
from optimizer import ProfileName
from optimizer.calibration import (
    FORMATS,
    MAX_LOG_BYTES,
    MAX_RUNS,
    MEASURES,
    SHRINK_RUNS,
    Calibration,
    LogReading,
    MeasuredRun,
    check_repeats,
    known_format,
    measured_run,
    run_from_log,
)
from optimizer.engines import DEFAULT_ENGINE, EngineName

# Bounds that keep every measurement's step time finite (a step time of 1e-300 s is a typo).
StepTime = Annotated[float, Field(ge=1e-6, le=1e9)]
Throughput = Annotated[float, Field(ge=1e-6, le=1e12)]


class CalibrationRunRequest(EvaluateRequest):
    """An evaluate request as a measured run gives it: with the engine it ran on. Calibration
    prices under profile `standard` unless the request names another."""

    engine: EngineName = Field(
        DEFAULT_ENGINE,
        description=f"The engine the run used (carried with the run and reported); default "
        f"{DEFAULT_ENGINE}, as every route.",
    )
    profile: ProfileName = Field("standard", description="Cost-model profile of the fit.")


class MeasuredIn(BaseModel):
    """What was measured: exactly one of a step time, a throughput or a utilisation, and
    optionally the peak memory per GPU."""

    model_config = REQUEST_CONFIG

    step_time_s: StepTime | None = Field(None, description="Seconds per optimiser step.")
    tokens_per_s_per_gpu: Throughput | None = Field(None, description="Tokens per second per GPU.")
    samples_per_s: Throughput | None = Field(
        None,
        description="Samples (sequences) per second of all GPUs together, as DeepSpeed prints "
        "it: the global batch over it is the step time.",
    )
    mfu: float | None = Field(
        None, ge=1e-6, le=1, description="Model FLOPs utilisation, by the profile's FLOP count."
    )
    hfu: float | None = Field(
        None, ge=1e-6, le=1, description="Hardware FLOPs utilisation (recomputation counted)."
    )
    peak_memory_gb: float | None = Field(
        None,
        gt=0,
        le=100_000,
        description="Peak memory per GPU, GB, as PyTorch's allocator reports it "
        "(torch.cuda.max_memory_allocated, or max_memory_reserved when fragmentation is "
        "assumed): compared with the tensors and fragmentation, not fitted.",
    )

    @model_validator(mode="after")
    def _exactly_one_measure(self) -> MeasuredIn:
        given = [name for name in MEASURES if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                f"measured needs exactly one of {', '.join(MEASURES)}; got "
                + (", ".join(given) if given else "none")
            )
        return self

    @property
    def measure(self) -> tuple[str, float]:
        name = next(name for name in MEASURES if getattr(self, name) is not None)
        return name, float(getattr(self, name))


# A log's format: one of FORMATS, published as an enum.
LogFormat = Annotated[
    str, AfterValidator(known_format), Field(json_schema_extra={"enum": list(FORMATS)})
]


class LogIn(BaseModel):
    """A run's training log: read into its steady-state figure and peak memory."""

    model_config = REQUEST_CONFIG

    text: str = Field(
        max_length=MAX_LOG_BYTES,
        description="The log's text: the run's standard output, whole or the lines of its steady "
        "steps (the first steps are dropped as warm-up).",
    )
    format: LogFormat | None = Field(
        None,
        description=f"The engine that printed it, one of {', '.join(FORMATS)}; detected "
        "from its lines when absent.",
    )


class CalibrationRunIn(BaseModel):
    model_config = REQUEST_CONFIG

    request: CalibrationRunRequest
    measured: MeasuredIn | None = Field(None, description="What was measured (or give `log`).")
    log: LogIn | None = Field(None, description="The run's training log (or give `measured`).")
    name: str | None = Field(None, max_length=200, description="A label for the report.")

    @model_validator(mode="after")
    def _measured_or_log(self) -> CalibrationRunIn:
        if (self.measured is None) == (self.log is None):
            raise ValueError("a run needs exactly one of measured and log")
        return self

    def to_domain(self, index: int) -> MeasuredRun:
        """The run as the fit takes it; a measurement that cannot have been measured, or a log
        that holds none, is refused naming the run's position (`runs.2.measured.step_time_s`,
        `runs.2.log`)."""
        try:
            return self._measured_run(index)
        except InvalidSpec as error:
            if error.field is None or not error.field.startswith(("measured.", "log")):
                raise
            raise InvalidSpec(
                f"runs.{index}.{error.field}: {error.message}", f"runs.{error.field}"
            ) from None

    def _measured_run(self, index: int) -> MeasuredRun:
        name, request = self.name or f"run {index + 1}", self.request.to_request()
        if self.log is not None:
            return run_from_log(name, request, self.log.text, self.log.format)
        assert self.measured is not None  # _measured_or_log
        measure, value = self.measured.measure
        return measured_run(
            name=name,
            request=request,
            measure=measure,
            value=value,
            peak_memory_gb=self.measured.peak_memory_gb,
        )


CALIBRATE_EXAMPLE: dict[str, Any] = {
    "runs": [
        {
            "name": "8 nodes",
            "request": {
                **PLATE_EXAMPLE,
                "cluster": {"gpus": 64},
                "model": "llama3-8b",
                "training": {"global_batch": 128, "seq_len": 8192},
                "layout": {"tp": 1, "pp": 1, "cp": 2, "zero": 1},
                "profile": "standard",
                "engine": "nemo",
            },  # fmt: skip
            "measured": {"step_time_s": 13.08},
        }
    ]
}


class CalibrateRequest(BaseModel):
    """Measured runs, one to MAX_RUNS, to fit the cost model's assumptions to."""

    model_config = REQUEST_CONFIG | ConfigDict(json_schema_extra={"examples": [CALIBRATE_EXAMPLE]})

    runs: list[CalibrationRunIn] = Field(min_length=1, max_length=MAX_RUNS)
    leave_one_out: bool = Field(
        True, description="Also predict each run from the fit of the others."
    )

    @model_validator(mode="after")
    def _one_profile(self) -> CalibrateRequest:
        profiles = sorted({run.request.profile for run in self.runs})
        if len(profiles) > 1:
            raise ValueError(
                f"every run must name the same profile (the fit is of one cost model): got {profiles}"
            )
        return self

    def measured_runs(self) -> list[MeasuredRun]:
        """The runs as the fit takes them, each possible on its GPU and repeats in accord."""
        runs = [run.to_domain(i) for i, run in enumerate(self.runs)]
        check_repeats(runs)
        return runs


# --- the answer ----------------------------------------------------------------------------


def _r(value: float | None, digits: int = FRACTION_DECIMALS) -> float | None:
    return None if value is None else round(value, digits)


class ParameterOut(BaseModel):
    name: str
    status: Literal["fitted", "pinned"]
    value: float | None  # the fitted value, or the default it stays at
    default: float | None
    lower: float
    upper: float
    what: str
    reason: str | None = None  # why pinned
    runs_value: float | None = Field(
        None,
        description="What the runs alone gave, before the shrinkage towards the default "
        "(fit.shrinkage): `value` keeps `shrinkage.weight` of its move from `default`.",
    )
    at_bound: Literal["lower", "upper"] | None = Field(
        None,
        description="A fitted value on a bound its default is not on: the runs ask for more "
        "than the bounds allow, a sign the cost model misses something they have.",
    )
    applies_to: str | None = Field(
        None,
        description="For a fitted value, the requests it applies to (calibration's reach: the "
        "runs' engine versions, GPUs, precisions, dense or MoE, and for the attention "
        "efficiency their sequence lengths); a request outside them is priced with the "
        "default instead, and told so.",
    )


class LogReadingOut(BaseModel):
    """How a run's training log was read (optimizer/calibration/logs.py)."""

    format: str
    measure: str  # what the log prints: step_time_s, tokens_per_s_per_gpu or samples_per_s
    value: float  # its median over the steady steps
    steps_read: int
    steps_used: list[int]
    warmup_dropped: int
    interval: int = Field(description="Steps each line reports the mean of.")
    peak_memory_gb: float | None
    memory_kind: Literal["allocated", "reserved"] | None
    summary: str


def log_reading_out(reading: LogReading | None) -> LogReadingOut | None:
    if reading is None:
        return None
    return LogReadingOut(
        format=reading.format,
        measure=reading.measure,
        value=round(reading.value, 6),
        steps_read=reading.steps_read,
        steps_used=list(reading.steps_used),
        warmup_dropped=reading.warmup_dropped,
        interval=reading.interval,
        peak_memory_gb=_r(reading.peak_memory_gb, 3),
        memory_kind=reading.memory_kind,  # type: ignore[arg-type]
        summary=reading.summary,
    )


class RunFitOut(BaseModel):
    name: str
    engine: str
    measured: str  # which measurement
    measured_value: float
    measured_step_time_s: float
    measured_mfu: float
    predicted_step_time_s_before: float
    predicted_step_time_s: float
    predicted_mfu: float
    log_error_before: float
    log_error: float
    peak_memory_gb: float | None = None
    predicted_memory_gb: float | None = None
    memory_error: float | None = None
    log: LogReadingOut | None = Field(None, description="How the run's training log was read.")


class LeftOutOut(BaseModel):
    name: str
    predicted_step_time_s: float
    predicted_mfu: float
    log_error: float
    mfu_error: float
    fitted: list[str]
    log_error_uncalibrated: float = Field(
        description="The run's log error under the defaults, which no run moves."
    )


class LeaveOneOutOut(BaseModel):
    """Each run predicted by the calibration of the others, beside the uncalibrated model's
    error on it: where the calibrated error is not the lower, nothing fitted is kept."""

    runs: list[LeftOutOut]
    rms_log_error: float
    mean_abs_mfu_error: float
    rms_log_error_uncalibrated: float
    mean_abs_mfu_error_uncalibrated: float


class ShrinkageOut(BaseModel):
    configurations: int = Field(description="Distinct configurations among the runs: n.")
    k: float = Field(description="The runs at which a fit and the default weigh alike.")
    weight: float = Field(
        description="n / (n + k): the share of its move from the default a fitted value keeps."
    )


class FitOut(BaseModel):
    profile: str
    parameters: list[ParameterOut]
    runs: list[RunFitOut]
    rms_log_error_before: float
    rms_log_error: float
    leave_one_out: LeaveOneOutOut | None
    leave_one_out_note: str | None = None
    shrinkage: ShrinkageOut | None = None
    optimizer: dict[str, Any]
    notes: list[str]
    complete: bool = Field(
        True,
        description="false: the time limit (which bounds the whole call) cut a step short: "
        "the parameters it left unexamined, unscored or not converged are pinned and say so, "
        "`optimizer.success` is false for a fit cut short, and `leave_one_out_note` counts "
        "the refits done.",
    )


class CalibrateOut(BaseModel):
    """`assumptions`: what any request's `assumptions` may be, as it stands; `fit`: how well
    it fits and predicts the runs, and what was pinned and why."""

    assumptions: dict[str, Any]
    fit: FitOut


NOTES = [
    "Step times are fitted by least squares of their logarithms (the RMS log error), within "
    "each assumption's bounds, pulled lightly towards the defaults; each fitted value then "
    "keeps n / (n + k) of its move from its default (`shrinkage`), n the runs' distinct "
    "configurations.",
    "A fitted value is kept only where it predicts a run left out better than the defaults "
    "do; with leave_one_out, the whole fit is dropped where the runs predicted by the fit of "
    "the others miss more than the defaults miss them.",
    "Peak memory is compared, not fitted: no fitted assumption changes memory.",
    "A fitted value applies only to requests that share the runs' engine version, GPU, "
    "precision and dense or MoE model (the attention efficiency also their range of sequence "
    "lengths): each parameter's `applies_to`; elsewhere the default prices the request, and "
    "its answer says so.",
    "The assumptions hold for the profile they were fitted under; use them with it.",
]


def _parameters_out(result: Calibration) -> list[ParameterOut]:
    reach = result.reach()
    return [
        ParameterOut(
            name=p.name,
            status="fitted" if p.fitted else "pinned",
            value=_r(p.value if p.value is not None else p.default),
            default=_r(p.default),
            lower=p.lower,
            upper=p.upper,
            what=p.what,
            reason=p.pinned,
            at_bound=p.at_bound,  # type: ignore[arg-type]
            runs_value=_r(p.runs_value),
            applies_to=reach.get(p.name),
        )
        for p in result.parameters
    ]


def _runs_out(result: Calibration) -> list[RunFitOut]:
    return [
        RunFitOut(
            name=r.run.name,
            engine=r.run.engine,
            measured=r.run.measure,
            measured_value=r.run.value,
            measured_step_time_s=round(r.run.step_time_s, 6),
            measured_mfu=round(r.run.measured_mfu, FRACTION_DECIMALS),
            predicted_step_time_s_before=round(r.predicted_before_s, 6),
            predicted_step_time_s=round(r.predicted_s, 6),
            predicted_mfu=round(r.predicted_mfu, FRACTION_DECIMALS),
            log_error_before=round(r.log_error_before, FRACTION_DECIMALS),
            log_error=round(r.log_error, FRACTION_DECIMALS),
            peak_memory_gb=_r(r.run.peak_memory_gb, 3),
            predicted_memory_gb=None
            if r.run.peak_memory_gb is None
            else round(r.predicted_memory_gb, 2),
            memory_error=_r(r.memory_error),
            log=log_reading_out(r.run.log),
        )
        for r in result.runs
    ]


def _leave_one_out(result: Calibration) -> LeaveOneOutOut | None:
    if result.leave_one_out is None:
        return None
    return LeaveOneOutOut(
        runs=[
            LeftOutOut(
                name=r.run.name,
                predicted_step_time_s=round(r.predicted_s, 6),
                predicted_mfu=round(r.predicted_mfu, FRACTION_DECIMALS),
                log_error=round(r.log_error, FRACTION_DECIMALS),
                mfu_error=round(r.mfu_error, FRACTION_DECIMALS),
                fitted=list(r.fitted),
                log_error_uncalibrated=round(fit.log_error_before, FRACTION_DECIMALS),
            )
            for r, fit in zip(result.leave_one_out, result.runs, strict=True)
        ],
        rms_log_error=round(result.loo_rms_log_error or 0.0, FRACTION_DECIMALS),
        mean_abs_mfu_error=round(result.loo_mean_abs_mfu_error or 0.0, FRACTION_DECIMALS),
        rms_log_error_uncalibrated=round(result.rms_log_error_before, FRACTION_DECIMALS),
        mean_abs_mfu_error_uncalibrated=round(result.mean_abs_mfu_error_before, FRACTION_DECIMALS),
    )


def _shrinkage(result: Calibration) -> ShrinkageOut | None:
    if result.shrinkage is None:
        return None
    return ShrinkageOut(
        configurations=result.shrinkage.configurations,
        k=round(SHRINK_RUNS, 3),
        weight=round(result.shrinkage.weight, FRACTION_DECIMALS),
    )


def calibrate_out(result: Calibration) -> CalibrateOut:
    return CalibrateOut(
        assumptions=result.assumptions(),
        fit=FitOut(
            profile=result.runs[0].run.profile,
            parameters=_parameters_out(result),
            runs=_runs_out(result),
            rms_log_error_before=round(result.rms_log_error_before, FRACTION_DECIMALS),
            rms_log_error=round(result.rms_log_error, FRACTION_DECIMALS),
            leave_one_out=_leave_one_out(result),
            leave_one_out_note=result.leave_one_out_note,
            shrinkage=_shrinkage(result),
            optimizer=result.optimizer,
            notes=NOTES + result.transfer_notes,
            complete=result.complete,
        ),
    )
