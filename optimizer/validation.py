"""Check a profile against published training runs: predicted vs reported utilisation.

The runs and their citations are data (`models/presets/published_runs.json`); each row
names the metric its source reports (model or hardware FLOPs utilisation), and the profile's
figure of the same kind is compared with it. No per-row calibration: a row may only set an
assumption its source states (e.g. "no overlap of the gradient all-reduce").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from optimizer.assumptions import CostAssumptions
from optimizer.cost_model import evaluate
from optimizer.estimate import Estimate

VALIDATION_PROFILE = "standard"
# The target of issue 6: mean absolute error at most 3 utilisation points.
MEAN_ABS_ERROR_TARGET = 0.03


@dataclass(frozen=True)
class PublishedRun:
    name: str
    source: str
    job: TrainingJob
    layout: Layout
    metric: str  # "mfu" or "hfu"
    reported: float
    assumptions: CostAssumptions
    notes: str


@dataclass(frozen=True)
class Comparison:
    run: PublishedRun
    estimate: Estimate

    @property
    def predicted(self) -> float:
        if self.run.metric == "hfu" and self.estimate.hardware_flops_utilization is not None:
            return self.estimate.hardware_flops_utilization
        return self.estimate.mfu

    @property
    def error(self) -> float:
        return self.predicted - self.run.reported


@dataclass(frozen=True)
class ValidationReport:
    profile: str
    rows: tuple[Comparison, ...]

    @property
    def mean_abs_error(self) -> float:
        return sum(abs(row.error) for row in self.rows) / len(self.rows)

    @property
    def max_abs_error(self) -> float:
        return max(abs(row.error) for row in self.rows)

    @property
    def meets_target(self) -> bool:
        return self.mean_abs_error <= MEAN_ABS_ERROR_TARGET


def _model(entry: str | dict[str, Any]) -> TransformerSpec:
    return model_preset(entry) if isinstance(entry, str) else TransformerSpec.model_validate(entry)


def _run(entry: dict[str, Any]) -> PublishedRun:
    cluster = ClusterSpec(
        gpus=entry["gpus"],
        gpu=gpu_preset(entry["gpu"]),
        gpus_per_node=entry.get("gpus_per_node", 8),
    )
    job = TrainingJob(
        model=_model(entry["model"]),
        cluster=cluster,
        training=TrainingSpec.model_validate(entry["training"]),
    )
    return PublishedRun(
        name=entry["name"],
        source=entry["source"],
        job=job,
        layout=Layout.model_validate(entry["layout"]),
        metric=entry["reported"]["metric"],
        reported=float(entry["reported"]["value"]),
        assumptions=CostAssumptions.model_validate(entry.get("assumptions", {})),
        notes=entry.get("notes", ""),
    )


@cache
def published_runs() -> tuple[PublishedRun, ...]:
    text = resources.files("models").joinpath("presets/published_runs.json").read_text()
    return tuple(_run(entry) for entry in json.loads(text)["runs"])


def validate(
    profile: str = VALIDATION_PROFILE, overrides: dict[str, Any] | None = None
) -> ValidationReport:
    """Price every published layout; `overrides` changes assumptions for all rows alike."""
    rows = []
    for run in published_runs():
        assumptions = run.assumptions.model_copy(update=overrides or {})
        estimate = evaluate(run.job, run.layout, profile, assumptions)
        rows.append(Comparison(run, estimate))
    return ValidationReport(profile, tuple(rows))


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def report_table(report: ValidationReport) -> list[list[str]]:
    """Rows of the validation table: run, layout, metric, reported, predicted, error, fits."""
    table = []
    for row in report.rows:
        x = row.estimate.layout
        layout = f"tp{x.tp} pp{x.pp} cp{x.cp} dp{x.dp} v{x.vpp} b{x.micro_batch} z{x.zero} {x.recompute.value}"
        table.append(
            [
                row.run.name,
                layout,
                row.run.metric.upper(),
                _percent(row.run.reported),
                _percent(row.predicted),
                f"{100 * row.error:+.1f}",
                "yes" if row.estimate.fits else f"no ({row.estimate.memory.total / 1e9:.0f} GB)",
            ]
        )
    return table


TABLE_HEADER = ["run", "layout", "metric", "reported", "predicted", "error (points)", "fits"]


def summary_line(report: ValidationReport) -> str:
    verdict = "meets" if report.meets_target else "MISSES"
    return (
        f"profile {report.profile}: {len(report.rows)} runs, mean absolute error "
        f"{100 * report.mean_abs_error:.2f} points, max {100 * report.max_abs_error:.2f} points "
        f"({verdict} the {100 * MEAN_ABS_ERROR_TARGET:.0f}-point target)"
    )
