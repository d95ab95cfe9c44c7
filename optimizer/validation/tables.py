"""The validation report as text: the rows' table, the summary lines and the breakdowns by
model size, GPU count, GPU type, engine, precision and source (what `layoutopt validate` prints and
docs/validation.md holds)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from models.layout import LAYOUT_CHOICES, Layout
from optimizer.uncertainty import regimes
from optimizer.validation.published import PublishedRun
from optimizer.validation.report import (
    MAX_ABS_ERROR_TARGET,
    MEAN_ABS_ERROR_TARGET,
    MEDIAN_GAP_TARGET,
    TOP_RANKS,
    WIDE_GAP,
    Comparison,
    Figures,
    ValidationReport,
)


def percent_text(value: float) -> str:
    return f"{100 * value:.1f}%"


def points_text(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def layout_text(row: Comparison) -> str:
    return layout_words(row.estimate.layout)


def layout_words(x: Layout) -> str:
    text = f"tp{x.tp} pp{x.pp} cp{x.cp} dp{x.dp} v{x.vpp} b{x.micro_batch} z{x.zero} {x.recompute.value}"
    if x.ep > 1:
        text += f" ep{x.ep}"
    if x.schedule.value != "1f1b":
        text += f" {x.schedule.value}"
    return text


METRIC_LABELS = {
    "mfu": "MFU",
    "hfu": "HFU",
    "tokens_per_s_per_gpu": "MFU (tokens/s)",
    "step_time_s": "MFU (step time)",
    "model_tflops_per_gpu": "MFU (TFLOP/s)",
}

TABLE_HEADER = [
    "run",
    "engine",
    "precision",
    "layout",
    "metric",
    "reported",
    "predicted",
    "error (points)",
    "memory reported",
    "memory predicted",
    "memory error",
    "fits",
    "rank",
    "behind best",
]


def report_table(report: ValidationReport) -> list[list[str]]:
    """Rows of the validation table, one per published run."""
    table = []
    for row in report.rows:
        run = row.run
        utilisation = row.compares_utilisation
        memory = row.compares_memory
        name = run.name if run.group == "priced" else f"{run.name} [{run.group}]"
        table.append(
            [
                name,
                run.engine,
                run.precision,
                layout_text(row),
                METRIC_LABELS[run.metric] if run.metric else "memory",
                percent_text(row.reported) if utilisation else "-",
                percent_text(row.predicted) if utilisation else "-",
                f"{100 * row.error:+.1f}" if utilisation else "-",
                f"{run.reported_memory_gb:.1f} GB" if memory else "-",
                f"{row.predicted_memory_gb:.1f} GB" if memory else "-",
                f"{100 * row.memory_error:+.0f}%" if memory else "-",
                "yes" if row.fits else f"no ({row.predicted_device_gb:.0f} GB)",
                _rank_text(row.rank) if row in report.ranked_rows else "-",
                "-" if row.behind_best is None else f"{100 * row.behind_best:.1f}%",
            ]
        )
    return table


GAP_HEADER = ["run", "behind best", "published degrees at their best", "optimum", "what differs"]


def gap_line(report: ValidationReport) -> str:
    """The gap against issue 15's targets: its median, and the rows over WIDE_GAP."""
    median = report.median_gap
    if median is None:
        return "no row is ranked"
    verdict = "met" if median <= MEDIAN_GAP_TARGET else "**not yet met**"
    return (
        f"Behind best over the {len(report.gaps)} ranked rows: median {percent_text(median)} "
        f"(target at most {percent_text(MEDIAN_GAP_TARGET)}, {verdict}); "
        f"{len(report.wide_gaps)} rows more than {percent_text(WIDE_GAP)} behind, each below "
        "with the layout the optimiser prefers under the same engine's rules and what it changes"
    )


def wide_gap_table(report: ValidationReport) -> list[list[str]]:
    """The rows more than WIDE_GAP behind the optimum: the published degrees' best layout, the
    optimum, and the choices in which they differ."""
    table = []
    for row in report.wide_gaps:
        ours, best = row.degrees_best_layout, row.optimum_layout
        if ours is None or best is None:
            continue
        table.append(
            [
                row.run.name,
                percent_text(row.behind_best or 0.0),
                layout_words(ours),
                layout_words(best),
                layout_changes(ours, best),
            ]
        )
    return table


def layout_changes(before: Layout, after: Layout) -> str:
    """The choices `after` makes otherwise than `before`, as "tp 8 -> 2"."""
    changes = [
        f"{name} {_choice(getattr(before, name))} -> {_choice(getattr(after, name))}"
        for name in LAYOUT_CHOICES
        if getattr(before, name) != getattr(after, name)
    ]
    if before.placement != after.placement:
        changes.append(f"placement {'-'.join(before.placement)} -> {'-'.join(after.placement)}")
    return "; ".join(changes)


def _choice(value: object) -> str:
    return str(getattr(value, "value", value))


def _rank_text(rank: int | None) -> str:
    if rank is None:
        return "not found"
    return str(rank) if rank <= TOP_RANKS else f"{rank} (miss)"


def summary_line(report: ValidationReport) -> str:
    head = report.headline
    verdict = "meets" if report.meets_target else "MISSES"
    max_verdict = "meets" if report.meets_max_target else "MISSES"
    memory = head.memory_mean_abs_error
    line = (
        f"profile {report.profile}: {len(head.rows)} priced runs ({len(head.utilisation)} with "
        f"a utilisation), mean absolute error {100 * report.mean_abs_error:.2f} points "
        f"({verdict} the {100 * MEAN_ABS_ERROR_TARGET:.0f}-point target), max "
        f"{100 * report.max_abs_error:.2f} points ({max_verdict} the "
        f"{100 * MAX_ABS_ERROR_TARGET:.0f}-point target)"
    )
    if memory is not None:
        line += (
            f"; peak memory over {len(head.memory)} runs: mean absolute error "
            f"{100 * memory:.1f}% of the reported"
        )
    if report.ranked:
        ranked = len(report.ranked_rows)
        inside = ranked - len(report.top_rank_misses)
        line += f"; {inside} of {ranked} published layouts in the optimiser's top {TOP_RANKS}"
    return line


def group_line(report: ValidationReport, group: str) -> str:
    """The excluded rows' own figures, beside (not in) the headline means."""
    return figures_line(group, report.group(group))


def precision_line(report: ValidationReport, precision: str) -> str:
    """The figures of the priced rows trained in `precision` (inside the headline means)."""
    rows = tuple(row for row in report.headline.rows if row.run.precision == precision)
    return figures_line(f"{precision}, in the means above", Figures(rows))


def figures_line(label: str, figures: Figures) -> str:
    if not figures.rows:
        return f"{label}: no runs"
    parts = [f"{len(figures.rows)} runs"]
    if figures.utilisation:
        parts.append(
            f"{len(figures.utilisation)} with a utilisation: mean absolute error "
            f"{points_text(figures.mean_abs_error)} points, max "
            f"{points_text(figures.max_abs_error)}"
        )
    if figures.memory:
        parts.append(
            f"{len(figures.memory)} with a peak memory: mean absolute error "
            f"{100 * (figures.memory_mean_abs_error or 0):.1f}%"
        )
    return f"{label}: " + "; ".join(parts)


# --- breakdowns --------------------------------------------------------------------------


def size_bucket(run: PublishedRun) -> str:
    billions = run.job.model.total_params / 1e9
    for bound, label in ((10, "under 10B"), (100, "10-100B"), (500, "100-500B")):
        if billions < bound:
            return label
    return "500B and over"


def gpu_count_bucket(run: PublishedRun) -> str:
    return regimes.gpu_count_bucket(run.job)


def gpu_generation(run: PublishedRun) -> str:
    return regimes.gpu_generation(run.job)


def dense_or_moe(run: PublishedRun) -> str:
    return regimes.dense_or_moe(run.job)


BREAKDOWNS: dict[str, Callable[[PublishedRun], str]] = {
    "model size (total parameters)": size_bucket,
    "GPU count": gpu_count_bucket,
    "GPU type": lambda run: run.job.cluster.gpu.name,
    "engine": lambda run: run.engine_name,
    "precision": lambda run: run.precision,
    "source": lambda run: run.source_label,
}

BREAKDOWN_HEADER = [
    "group",
    "priced runs",
    "with utilisation",
    "mean abs error (points)",
    "max (points)",
    "with memory",
    "memory mean abs error",
    "excluded",
]


def breakdown_table(
    report: ValidationReport, key: Callable[[PublishedRun], str]
) -> list[list[str]]:
    """One line per group of rows: the headline figures over that group's priced rows."""
    table = []
    for name, rows in grouped(report.rows, key).items():
        priced = Figures(tuple(r for r in rows if r.run.group == "priced"))
        memory = priced.memory_mean_abs_error
        others = sum(r.run.group != "priced" for r in rows)
        table.append(
            [
                name,
                str(len(priced.rows)),
                str(len(priced.utilisation)),
                points_text(priced.mean_abs_error),
                points_text(priced.max_abs_error),
                str(len(priced.memory)),
                "-" if memory is None else f"{100 * memory:.1f}%",
                str(others),
            ]
        )
    return table


def grouped(
    rows: Iterable[Comparison], key: Callable[[PublishedRun], str]
) -> dict[str, list[Comparison]]:
    """The rows by `key` of their run, groups in the order their first row comes."""
    groups: dict[str, list[Comparison]] = {}
    for row in rows:
        groups.setdefault(key(row.run), []).append(row)
    return groups


def excluded_rows(report: ValidationReport) -> Iterable[tuple[str, str]]:
    """(name, why) of every row kept out of the headline means."""
    for row in report.rows:
        reason = row.run.exclusion
        if reason is not None:
            yield row.run.name, reason
