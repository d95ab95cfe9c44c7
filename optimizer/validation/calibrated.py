"""The cost model calibrated on a few published rows of each engine, and checked on the rest:
how well a user's handful of measured runs would let it predict their other layouts.

For each engine, its priced rows that report a utilisation or throughput are taken in the data
file's order (a stable order: the first N calibrate, the others are held out). The fit is
`layoutopt calibrate`'s own (optimizer.calibration.calibrate, its leave-one-out refits and its
check against the defaults included): the rows' reported figures as step times, the
assumptions their sources state kept as stated. Each held-out row is then priced with the
assumptions file it writes laid over its own, held to the calibration's reach as a user's
request is, and its error compared with the defaults'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from optimizer.calibration import Calibration, MeasuredRun, calibrate, measured_run
from optimizer.costmodel import CostAssumptions
from optimizer.validation.published import PublishedRun, published_runs
from optimizer.validation.report import VALIDATION_PROFILE, Comparison, compare
from optimizer.validation.tables import points_text


def measured(run: PublishedRun, profile: str = VALIDATION_PROFILE) -> MeasuredRun:
    """A published row as a measured run: its reported figure as the calibration reads it."""
    if run.metric is None or run.reported is None:
        raise ValueError(f"{run.name} reports no utilisation or throughput")
    measure, value = run.metric, run.reported
    if measure == "model_tflops_per_gpu":  # the source's FLOPs over the bf16 peak, as an MFU
        measure, value = "mfu", value / run.job.cluster.gpu.peak_tflops
    return measured_run(
        name=run.name,
        request=run.request(profile),
        measure=measure,
        value=value,
        peak_memory_gb=run.reported_memory_gb,
        precision=run.precision,  # fp16 rows' engines reduce as their code did
    )


def first(rows: list[PublishedRun], n: int) -> list[PublishedRun]:
    """The first n rows in the data file's order."""
    return rows[:n]


def spread(rows: list[PublishedRun], n: int) -> list[PublishedRun]:
    """n rows evenly spaced over the data file's order (its first and last among them), so
    that the calibration spans the group's sources rather than its first paper."""
    if n >= len(rows):
        return list(rows)
    if n == 1:
        return rows[:1]
    picks = sorted({round(i * (len(rows) - 1) / (n - 1)) for i in range(n)})
    return [rows[i] for i in picks]


SELECTIONS: dict[str, Callable[[list[PublishedRun], int], list[PublishedRun]]] = {
    "first": first,
    "spread": spread,
}


@dataclass(frozen=True)
class EngineCalibration:
    engine: str  # the group: an engine, or an engine on one GPU type
    calibration_rows: tuple[PublishedRun, ...]
    held_out_before: tuple[Comparison, ...]  # the held-out rows under the defaults
    held_out_after: tuple[Comparison, ...]  # and under the fitted assumptions
    calibration: Calibration | None  # None when the engine has too few rows
    # for each held-out row, whether a fitted value applies to it (calibration's reach)
    within_reach: tuple[bool, ...] = ()

    @property
    def reached_errors(self) -> tuple[float | None, float | None]:
        """(mean absolute error under the defaults, calibrated) of the held-out rows a
        fitted value applies to; None where none does."""
        pairs = zip(self.held_out_before, self.held_out_after, self.within_reach, strict=True)
        reached = [(before, after) for before, after, within in pairs if within]
        return _mean_abs(tuple(b for b, _ in reached)), _mean_abs(tuple(a for _, a in reached))

    @property
    def mean_abs_error_before(self) -> float | None:
        return _mean_abs(self.held_out_before)

    @property
    def mean_abs_error_after(self) -> float | None:
        return _mean_abs(self.held_out_after)

    @property
    def max_abs_error_after(self) -> float | None:
        return max((abs(row.error) for row in self.held_out_after), default=None)


def _mean_abs(rows: tuple[Comparison, ...]) -> float | None:
    return sum(abs(row.error) for row in rows) / len(rows) if rows else None


def usable(run: PublishedRun) -> bool:
    """A row the calibration may use: priced, with a utilisation or throughput."""
    return run.group == "priced" and run.metric is not None


# How the rows are grouped for calibration: by engine; by engine and GPU type; or by engine,
# source and GPU type, the nearest the published rows come to one user's own runs (one
# software stack on one cluster).
GROUPINGS: dict[str, Callable[[PublishedRun], str]] = {
    "engine": lambda run: run.engine_name,
    "gpu": lambda run: f"{run.engine_name} on {run.job.cluster.gpu.name}",
    "source": lambda run: f"{run.engine_name}, {run.source_label}, on {run.job.cluster.gpu.name}",
}


def calibrate_group(
    name: str,
    rows: list[PublishedRun],
    n: int,
    profile: str = VALIDATION_PROFILE,
    select: Callable[[list[PublishedRun], int], list[PublishedRun]] = first,
) -> EngineCalibration:
    """Calibrate on `select(rows, n)`, report the other rows under the defaults and under
    the fit."""
    chosen = select(rows, n)
    held = [run for run in rows if run not in chosen]
    before = tuple(compare(run, profile) for run in held)
    if len(chosen) < n or not held:
        return EngineCalibration(name, tuple(chosen), before, (), None)
    result = calibrate([measured(run, profile) for run in chosen])  # as `layoutopt calibrate`
    written = CostAssumptions.model_validate(result.assumptions())  # the file it writes
    fitted = {name: getattr(written, name) for name in written.model_fields_set}
    after = tuple(compare(run, profile, fitted) for run in held)  # held to its reach
    within = tuple(
        bool(result.fitted) and len(run.request(profile, fitted).reach.dropped) < len(result.fitted)
        for run in held
    )
    return EngineCalibration(name, tuple(chosen), before, after, result, within)


@cache  # the same views are asked by `validate --markdown` and its checks
def calibrate_engines(
    n: int,
    profile: str = VALIDATION_PROFILE,
    selection: str = "first",
    grouping: str = "engine",
) -> tuple[EngineCalibration, ...]:
    """Per group of `grouping` (GROUPINGS: engine, engine and GPU type, or engine, source
    and GPU type): calibrate on n of its usable rows chosen by `selection` ("first" or
    "spread"), check on the others. Groups finer than the engine are left out when no row
    is left beyond the n."""
    key = GROUPINGS[grouping]
    groups: dict[str, list[PublishedRun]] = {}
    for run in published_runs():
        if usable(run):
            groups.setdefault(key(run), []).append(run)
    select = SELECTIONS[selection]
    return tuple(
        calibrate_group(name, rows, n, profile, select)
        for name, rows in groups.items()
        if grouping == "engine" or len(rows) > n
    )


def held_out_summary(
    results: tuple[EngineCalibration, ...],
) -> tuple[int, float | None, float | None]:
    """(held-out rows, their mean absolute error under the defaults, calibrated) over the
    groups that were calibrated."""
    done = [r for r in results if r.calibration is not None]
    before = [abs(row.error) for r in done for row in r.held_out_before]
    after = [abs(row.error) for r in done for row in r.held_out_after]
    return len(after), _mean(before), _mean(after)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


CALIBRATION_HEADER = [
    "group",
    "calibrated on",
    "fitted",
    "held-out rows",
    "mean abs error, defaults (points)",
    "mean abs error, calibrated (points)",
    "max, calibrated (points)",
    "within its reach: rows, defaults -> calibrated (points)",
]


def calibration_table(results: tuple[EngineCalibration, ...]) -> list[list[str]]:
    table = []
    for result in results:
        cal = result.calibration
        if cal is None:
            fitted = (
                f"too few rows ({len(result.calibration_rows)} + {len(result.held_out_before)})"
            )
        else:
            fitted = ", ".join(
                f"{p.name} {round(p.value, 4):g}"
                + (f" (at its {p.at_bound} bound)" if p.at_bound else "")
                for p in cal.parameters
                if p.value is not None
            )
        table.append(
            [
                result.engine,
                "; ".join(run.name for run in result.calibration_rows) or "-",
                fitted or "nothing",
                str(len(result.held_out_before)),
                points_text(result.mean_abs_error_before),
                points_text(result.mean_abs_error_after),
                points_text(result.max_abs_error_after),
                _reached_text(result),
            ]
        )
    return table


def _reached_text(result: EngineCalibration) -> str:
    """The held-out rows a fitted value applies to, and their error before and after."""
    if result.calibration is None or not result.calibration.fitted:
        return "-"
    count = sum(result.within_reach)
    if not count:
        return "none"
    before, after = result.reached_errors
    return f"{count}: {points_text(before)} -> {points_text(after)}"
