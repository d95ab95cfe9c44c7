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

import numpy as np

from models.hardware import ClusterSpec, GpuSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from optimizer.costmodel import CostAssumptions, Estimate, evaluate
from optimizer.search import SearchSpace, enumerator, resolve_space

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
    search: SearchSpace  # the engine's constraints at the time, for the ranking check

    @property
    def degrees(self) -> tuple[int, int, int, int]:
        tp, pp, cp = self.layout.tp, self.layout.pp, self.layout.cp
        return tp, pp, cp, self.job.cluster.gpus // (tp * pp * cp)


@dataclass(frozen=True)
class Comparison:
    run: PublishedRun
    estimate: Estimate
    rank: int | None = None  # of the published degrees among the search's, 1 = best
    degrees_best_mfu: float | None = None  # the published degrees at their best knobs
    optimum_mfu: float | None = None  # the search's best layout under the run's constraints

    @property
    def behind_best(self) -> float | None:
        """How far the published degrees' best layout falls short of the optimum's MFU."""
        if self.degrees_best_mfu is None or self.optimum_mfu is None:
            return None
        return 1 - self.degrees_best_mfu / self.optimum_mfu

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

    @property
    def ranked(self) -> bool:
        return any(row.rank is not None for row in self.rows)

    @property
    def top_rank_misses(self) -> tuple[str, ...]:
        return tuple(
            row.run.name for row in self.rows if self.ranked and (row.rank or 10**9) > TOP_RANKS
        )


def _model(entry: str | dict[str, Any]) -> TransformerSpec:
    return model_preset(entry) if isinstance(entry, str) else TransformerSpec.model_validate(entry)


def _gpu(entry: str | dict[str, Any]) -> GpuSpec:
    """A preset, or a full spec for a cluster whose links differ from the preset's."""
    return gpu_preset(entry) if isinstance(entry, str) else GpuSpec.model_validate(entry)


def _run(entry: dict[str, Any]) -> PublishedRun:
    cluster = ClusterSpec(
        gpus=entry["gpus"],
        gpu=_gpu(entry["gpu"]),
        gpus_per_node=entry.get("gpus_per_node", 8),
        nvlink_domain=entry.get("nvlink_domain"),
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
        search=SearchSpace.model_validate(entry.get("search", {})),
    )


@cache
def published_runs() -> tuple[PublishedRun, ...]:
    text = resources.files("models").joinpath("presets/published_runs.json").read_text()
    return tuple(_run(entry) for entry in json.loads(text)["runs"])


# The target of issue 6 for the ranking: each published layout among the optimiser's best 5.
TOP_RANKS = 5


def validate(
    profile: str = VALIDATION_PROFILE,
    overrides: dict[str, Any] | None = None,
    with_ranks: bool = True,
) -> ValidationReport:
    """Price every published layout; `overrides` changes assumptions for all rows alike.
    With ranks, also place each published (tp, pp, cp, dp) in the optimiser's ranking."""
    if overrides is None:
        return _default_report(profile, with_ranks)
    return _report(profile, overrides, with_ranks)


@cache
def _default_report(profile: str, with_ranks: bool) -> ValidationReport:
    """Pure in its arguments (the data file is read once), so computed once per process."""
    return _report(profile, None, with_ranks)


def _report(profile: str, overrides: dict[str, Any] | None, with_ranks: bool) -> ValidationReport:
    rows = []
    for run in published_runs():
        assumptions = run.assumptions.model_copy(update=overrides or {})
        estimate = evaluate(run.job, run.layout, profile, assumptions)
        comparison = Comparison(run, estimate)
        if with_ranks:
            run_for_rank = run if not overrides else _with_assumptions(run, assumptions)
            ranked = ranked_degrees(run_for_rank, profile)
            if run.degrees in ranked:
                comparison = Comparison(
                    run,
                    estimate,
                    rank=list(ranked).index(run.degrees) + 1,
                    degrees_best_mfu=ranked[run.degrees],
                    optimum_mfu=next(iter(ranked.values())),
                )
        rows.append(comparison)
    return ValidationReport(profile, tuple(rows))


def _with_assumptions(run: PublishedRun, assumptions: CostAssumptions) -> PublishedRun:
    from dataclasses import replace

    return replace(run, assumptions=assumptions)


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
                "-" if row.rank is None and not report.ranked else _rank_text(row.rank),
                "-" if row.behind_best is None else f"{100 * row.behind_best:.1f}%",
            ]
        )
    return table


TABLE_HEADER = [
    "run",
    "layout",
    "metric",
    "reported",
    "predicted",
    "error (points)",
    "fits",
    "rank",
    "behind best",
]


def _rank_text(rank: int | None) -> str:
    if rank is None:
        return "not found"
    return str(rank) if rank <= TOP_RANKS else f"{rank} (miss)"


def summary_line(report: ValidationReport) -> str:
    verdict = "meets" if report.meets_target else "MISSES"
    line = (
        f"profile {report.profile}: {len(report.rows)} runs, mean absolute error "
        f"{100 * report.mean_abs_error:.2f} points, max {100 * report.max_abs_error:.2f} points "
        f"({verdict} the {100 * MEAN_ABS_ERROR_TARGET:.0f}-point target)"
    )
    if report.ranked:
        inside = len(report.rows) - len(report.top_rank_misses)
        line += (
            f"; {inside} of {len(report.rows)} published layouts in the optimiser's top {TOP_RANKS}"
        )
    return line


def ranked_degrees(
    run: PublishedRun, profile: str = VALIDATION_PROFILE
) -> dict[tuple[int, ...], float]:
    """Distinct (tp, pp, cp, dp) best first with the MFU of each one's best layout, under the
    run's constraints: the exhaustive enumerator's ranking (MFU, then memory and tie-breaks)."""
    problem = resolve_space(run.job, run.search, profile)
    space = enumerator.price_space(problem, run.assumptions)
    feasible = np.flatnonzero(enumerator.feasible(problem, space, frozenset()))
    rows = enumerator.tie_break_order(space, feasible)
    grid = space.grid
    ranked: dict[tuple[int, ...], float] = {}
    for row in rows:
        degrees = tuple(int(getattr(grid, d)[row]) for d in ("tp", "pp", "cp", "dp"))
        ranked.setdefault(degrees, float(space.mfu[row]))
    return ranked
