"""Calibration's reach: the requests a fitted value applies to, judged from what the
assumptions file records of the runs it was fitted on (`calibrated_on`).

A calibration estimates one group's own miss, the group being what the shrinkage rule
(parameters.py, GROUP_LOG_ERROR) takes it to be: one software stack on one cluster. So every
fitted value holds only where the request shares the runs' regime:

- the engine at its version (its kernels, overlaps and schedules are that release's code);
- the GPU type (a share of that GPU's peak and of its links);
- the precision (FP8 steps run other GEMM kernels and move other bytes than BF16 ones);
- dense or MoE: the fit frees its assumptions in a fixed order, the first absorbing whatever
  the runs' steps miss, and a MoE step has mechanisms a dense one lacks (routing, the
  experts' grouped GEMMs and all-to-all), so a value fitted on one kind stands for misses the
  other does not have.

An efficiency the cost model varies over a dimension by a measured table it borrows is also
held to the range of that dimension the runs spanned (`Parameter.reach`, `RANGES`): the runs
fix its level only there, the table's shape beyond it is not theirs. The matmul kernels' rate
follows the GEMMs' shapes (gemm_throughput.json), read as the model's hidden size; fused
attention's follows the sequence length (attention_table.py): a value fitted at 4,096 tokens
is not one at 32,768. The network efficiency and the overlaps need no more: they scale
traffic the cost model counts from the layout, and price only what the runs that identified
them also had (collectives across NVLink domains, tp > 1, ZeRO-3, cp > 1, ep > 1), changing
nothing where a request has none of it.

Outside its reach a fitted value is dropped from the request's assumptions, so the default
(or the engine's own figure) prices it, and the request is told which and why (`notes`).
Every route takes a request's assumptions through here (optimizer.request.Request.reach).
A file written before a dimension was recorded is judged on what it records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from models.job import TrainingJob
from optimizer.calibration.parameters import PARAMETERS, SCALE_SUFFIX
from optimizer.costmodel import CostAssumptions
from optimizer.costmodel.assumptions import CalibrationProvenance
from optimizer.engines import Engine

# The engine of a request that names none, as calibration names it (a run names one).
NO_ENGINE = "generic"


@dataclass(frozen=True)
class Regime:
    """What a run or a request is, in the terms a fitted value's reach is judged by."""

    engine: str  # at its version: "megatron@core_r0.20.0"
    gpu: str
    precision: str
    architecture: str  # "dense" or "moe"
    seq_len: int
    hidden_size: int


def regime_of(job: TrainingJob, engine: Engine | None) -> Regime:
    """The regime of a job run under `engine` (a request's, or a measured run's)."""
    return Regime(
        engine=NO_ENGINE if engine is None else engine.spec,
        gpu=job.cluster.gpu.name,
        precision=job.training.precision,
        architecture="moe" if job.model.is_moe else "dense",
        seq_len=job.training.seq_len,
        hidden_size=job.model.hidden_size,
    )


def recorded(regimes: Iterable[Regime]) -> dict[str, list[str] | list[int]]:
    """The provenance fields the runs' regimes fill (beside `gpus` and `engines`)."""
    regimes = list(regimes)
    return {
        "engine_versions": sorted({r.engine for r in regimes}),
        "precisions": sorted({r.precision for r in regimes}),
        "architectures": sorted({r.architecture for r in regimes}),
        "seq_lens": sorted({r.seq_len for r in regimes}),
        "hidden_sizes": sorted({r.hidden_size for r in regimes}),
    }


def _mechanism(name: str) -> tuple[str, ...]:
    """The dimensions beyond the regime's that the assumption's mechanism is held to."""
    return next((p.reach for p in PARAMETERS if p.name == name), ())


@dataclass(frozen=True)
class Range:
    """A dimension a mechanism's efficiency varies over: the provenance field recording the
    runs' values, and how it reads."""

    recorded: str  # the CalibrationProvenance field
    what: str  # "sequences", "hidden sizes"
    unit: str  # "tokens", ""


RANGES = {
    "seq_len": Range("seq_lens", "sequences", " tokens"),
    "hidden_size": Range("hidden_sizes", "hidden sizes", ""),
}


def differences(name: str, origin: CalibrationProvenance, regime: Regime) -> list[str]:
    """How a request of `regime` lies outside the reach of fitted assumption `name`; empty
    where the value applies."""
    out = []
    if origin.engine_versions is not None:
        if regime.engine not in origin.engine_versions:
            out.append(f"it runs {regime.engine}, not {_either(origin.engine_versions)}")
    elif regime.engine.partition("@")[0] not in origin.engines:
        out.append(f"it runs {regime.engine}, not {_either(origin.engines)}")
    if regime.gpu not in origin.gpus:
        out.append(f"it is on {regime.gpu}, not {_either(origin.gpus)}")
    if origin.precisions is not None and regime.precision not in origin.precisions:
        out.append(f"it trains in {regime.precision}, not {_either(origin.precisions)}")
    if origin.architectures is not None and regime.architecture not in origin.architectures:
        out.append(f"its model is {regime.architecture}, not {_either(origin.architectures)}")
    for dimension, values in _ranges(name, origin):
        value, shape = getattr(regime, dimension), RANGES[dimension]
        if not min(values) <= value <= max(values):
            out.append(
                f"its {shape.what[:-1]} is {value:,}{shape.unit}, the runs' {_span(values, shape)}"
            )
    return out


def applies_to(name: str, origin: CalibrationProvenance) -> str:
    """The requests fitted assumption `name` applies to, in words."""
    engines = origin.engine_versions or origin.engines
    parts = [f"under {_either(engines)}", f"on {_either(origin.gpus)}"]
    if origin.precisions is not None:
        parts.append(f"in {_either(origin.precisions)}")
    if origin.architectures is not None:
        parts.append(f"{_either(origin.architectures)} models")
    for dimension, values in _ranges(name, origin):
        parts.append(f"{RANGES[dimension].what} of {_span(values, RANGES[dimension])}")
    return "requests " + ", ".join(parts)


def _ranges(name: str, origin: CalibrationProvenance) -> list[tuple[str, list[int]]]:
    """The ranged dimensions `name` is held to, each with the runs' values (where recorded)."""
    held = [(d, getattr(origin, RANGES[d].recorded)) for d in _mechanism(name)]
    return [(d, values) for d, values in held if values]


@dataclass(frozen=True)
class Reach:
    """A request's assumptions with each fitted value outside its reach dropped, and why."""

    assumptions: CostAssumptions
    notes: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()  # the fitted assumptions that do not apply


def within_reach(assumptions: CostAssumptions, job: TrainingJob, engine: Engine | None) -> Reach:
    """`assumptions` as they price a request of `job` under `engine`: a calibration's fitted
    values only where the request lies within their reach."""
    origin = assumptions.calibrated_on
    if origin is None or not origin.fitted:
        return Reach(assumptions)
    regime = regime_of(job, engine)
    notes, dropped = [], []
    for name in origin.fitted:
        why = differences(name, origin, regime)
        if why:
            dropped.append(name)
            notes.append(
                f"{name}, calibrated on {_runs(origin.runs)}, applies to "
                f"{applies_to(name, origin)}; this request lies outside that ({'; '.join(why)}), "
                "so its default prices it (calibration's reach, docs/usage.md)"
            )
    if not dropped:
        return Reach(assumptions)
    fields = {n for name in dropped for n in (name, name + SCALE_SUFFIX)}
    kept = {n: getattr(assumptions, n) for n in assumptions.model_fields_set if n not in fields}
    return Reach(CostAssumptions.model_validate(kept), tuple(notes), tuple(dropped))


def _either(values: Iterable[str]) -> str:
    values = list(values)
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


def _span(values: list[int], shape: Range) -> str:
    low, high = min(values), max(values)
    return f"{low:,}{shape.unit}" if low == high else f"{low:,} to {high:,}{shape.unit}"


def _runs(runs: int) -> str:
    return f"{runs} measured run{'s' if runs != 1 else ''}"
