"""`layoutopt validate`: the standard profile against published training runs.

Prints predicted vs reported utilisation and peak memory per run, each under its engine,
with the summary, the fp8 and excluded rows' own figures, and breakdowns by model size, GPU
count, GPU type, engine, precision and source, and each source's error with the defaults
chosen by looking at rows chosen without it; `--markdown PATH` also writes it all as a document
(the Makefile's `validate` target writes docs/validation.md). `--calibrate N` calibrates the
cost model on N rows of each engine as `layoutopt calibrate` does and reports the error on that
engine's other rows, the file held to its reach as a request's is.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.cli.common import at_least_one
from api.cli.validation_prose import (
    TemplateMissing,
    calibration_preamble,
    held_out_preamble,
    intervals_preamble,
    markdown_misses,
    markdown_preamble,
)
from api.errors import EXIT_BAD_REQUEST, EXIT_INTERNAL, EXIT_OK
from optimizer import PROFILES
from optimizer.calibration import CalibrationUnavailable
from optimizer.uncertainty import COVERAGE, residuals_json
from optimizer.uncertainty.intervals import MIN_ROWS, MIN_SOURCES
from optimizer.validation import (
    BREAKDOWN_HEADER,
    BREAKDOWNS,
    CALIBRATION_HEADER,
    CHOSEN_DEFAULTS_HEADER,
    GAP_HEADER,
    HELD_OUT_BREAKDOWN_HEADER,
    HELD_OUT_BREAKDOWNS,
    HELD_OUT_HEADER,
    HELD_OUT_MEAN_ABS_ERROR_TARGET,
    MAX_ABS_ERROR_TARGET,
    MEAN_ABS_ERROR_TARGET,
    TABLE_HEADER,
    VALIDATION_PROFILE,
    Comparison,
    EngineCalibration,
    LeaveOneSourceOut,
    ValidationReport,
    breakdown_table,
    calibrate_engines,
    calibration_table,
    chosen_defaults_table,
    excluded_rows,
    gap_line,
    gpu_sources,
    group_line,
    held_out_breakdown_table,
    held_out_headline,
    held_out_summary,
    held_out_table,
    hf_config_sources,
    leave_one_source_out,
    precision_line,
    report_table,
    summary_line,
    validate,
    wide_gap_table,
)
from optimizer.validation.residuals import Coverage, held_out_coverage, validation_residuals

# `make validate` writes docs/validation.md with the calibration on this many rows per engine.
DOCS_CALIBRATE_N = 3
# The figure: calibrated on 3 runs of one engine, that engine's other rows within 2
# points mean.
CALIBRATED_TARGET = 0.02


class RowFigures:
    """One figure of a row, looked up by its name or a part of it that names exactly one row:
    how the known misses' prose quotes the table (`{error[GPT 32B on 384]}`), so a quoted
    figure is always the current one and a renamed row fails the write, not the reader."""

    def __init__(self, report: ValidationReport, figure: Callable[[Comparison], str]) -> None:
        self._rows, self._figure = report.rows, figure

    def __getitem__(self, part: str) -> str:
        matches = [row for row in self._rows if part == row.run.name] or [
            row for row in self._rows if part in row.run.name
        ]
        if len(matches) != 1:
            raise ValueError(f"the known misses quote {part!r}, which names {len(matches)} rows")
        return self._figure(matches[0])


def ordinal(n: int | None) -> str:
    if n is None:
        return "unranked"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def beyond_target_line(report: ValidationReport) -> str:
    """The priced rows over the max-error target, worst first, in one sentence."""
    over = [row for row in report.headline.utilisation if abs(row.error) > MAX_ABS_ERROR_TARGET]
    worst = sorted(over, key=lambda row: -abs(row.error))
    target = f"{100 * MAX_ABS_ERROR_TARGET:.0f}-point target"
    if not worst:
        return f"No priced row is beyond the {target}."
    quoted = "; ".join(f"{row.run.name} ({100 * row.error:+.1f})" for row in worst)
    return f"Priced rows beyond the {target}, worst first: {quoted}."


def over_memory_line(report: ValidationReport) -> str:
    """The published layouts priced over their GPU's memory, though they ran."""
    over = [row.run.name for row in report.rows if not row.fits]
    if not over:
        return "Every published layout fits its GPU's memory as priced."
    return f"Priced over their GPU's memory though they ran: {'; '.join(over)}."


def reflow(markdown: str, width: int = 96) -> str:
    """Paragraphs and list items re-wrapped at `width` once their fields are filled in (a
    list item's lines indented under its text); headings as they stand. Words are never cut,
    so code spans and paths stay whole."""
    wrapper = textwrap.TextWrapper(width, break_long_words=False, break_on_hyphens=False)

    def wrapped(item: str) -> str:
        wrapper.subsequent_indent = "  " if item.startswith("- ") else ""
        return wrapper.fill(" ".join(item.split()))

    blocks = []
    for block in markdown.strip("\n").split("\n\n"):
        if block.startswith("#"):
            blocks.append(block)
            continue
        blocks.append("\n".join(wrapped(item) for item in re.split(r"\n(?=- )", block)))
    return "\n\n".join(blocks) + "\n"


def known_misses(report: ValidationReport) -> str:
    """The known misses' template with every row figure it quotes read from `report`, re-wrapped."""
    return reflow(
        markdown_misses().format(
            error=RowFigures(report, lambda row: f"{100 * row.error:+.1f}"),
            memory=RowFigures(report, lambda row: f"{100 * row.memory_error:+.0f}%"),
            rank=RowFigures(report, lambda row: ordinal(row.rank)),
            beyond_target=beyond_target_line(report),
            over_memory=over_memory_line(report),
        )
    )


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def targets_text(report: ValidationReport) -> str:
    """The issue's targets and where the priced rows stand against them, in words."""
    mean, worst = 100 * report.mean_abs_error, 100 * report.max_abs_error

    def standing(value: float, target: float, met: bool) -> str:
        return f"met ({value:.2f} points)" if met else f"**not yet met** ({value:.2f} points)"

    return (
        f"Targets over the priced rows: mean absolute error at most "
        f"{100 * MEAN_ABS_ERROR_TARGET:.0f} points, "
        f"{standing(mean, MEAN_ABS_ERROR_TARGET, report.meets_target)}; every row within "
        f"{100 * MAX_ABS_ERROR_TARGET:.0f} points, "
        f"{standing(worst, MAX_ABS_ERROR_TARGET, report.meets_max_target)}."
    )


def intervals_markdown(coverage: Coverage) -> str:
    """The intervals section: how they are made and how often they hold out of sample."""
    memory = coverage.memory_share
    memory_words = (
        "no row reports a peak"
        if memory is None
        else f"{coverage.memory_covered} of {coverage.memory_rows} rows ({memory:.0%})"
    )
    return reflow(
        intervals_preamble().format(
            coverage=COVERAGE,
            min_rows=MIN_ROWS,
            min_sources=MIN_SOURCES,
            covered=coverage.utilisation_covered,
            rows=coverage.utilisation_rows,
            share=coverage.utilisation_share,
            memory_words=memory_words,
        )
    )


def held_out_markdown(result: LeaveOneSourceOut) -> str:
    """The leave-one-source-out section: its prose, the chosen defaults, each source held
    out and the breakdowns."""
    mean = result.held_out.mean_abs_error or 0.0
    met = mean <= HELD_OUT_MEAN_ABS_ERROR_TARGET
    preamble = held_out_preamble().format(
        sources=len(result.sources),
        rows=len(result.held_out.rows),
        headline=held_out_headline(result),
        target=100 * HELD_OUT_MEAN_ABS_ERROR_TARGET,
        standing="met" if met else "**not yet met**",
    )
    lines = [
        reflow(preamble),
        "### The defaults chosen by looking at rows",
        "",
        *_markdown_table(CHOSEN_DEFAULTS_HEADER, chosen_defaults_table(result)),
        "",
        "### Each source held out",
        "",
        *_markdown_table(HELD_OUT_HEADER, held_out_table(result)),
    ]
    for title, key in HELD_OUT_BREAKDOWNS.items():
        lines += ["", f"### Held out, by {title}", ""]
        lines += _markdown_table(HELD_OUT_BREAKDOWN_HEADER, held_out_breakdown_table(result, key))
    return "\n".join(lines)


def markdown(report: ValidationReport, extra_sections: list[str] | None = None) -> str:
    held_out = leave_one_source_out(report.profile)
    lines = [markdown_preamble(), f"**{summary_line(report)}.**", ""]
    lines += [f"**{held_out_headline(held_out)}.**", "", targets_text(report), ""]
    lines += [f"- {precision_line(report, 'fp8')}", f"- {group_line(report, 'excluded')}"]
    lines += ["", "## Runs", ""]
    lines += _markdown_table(TABLE_HEADER, report_table(report))
    lines += ["", "## Breakdowns", ""]
    lines.append(
        "Each table groups the rows one way; the errors are over the group's priced rows (the "
        "last column counts its excluded rows, which are not in them)."
    )
    for title, key in BREAKDOWNS.items():
        lines += ["", f"### By {title}", ""]
        lines += _markdown_table(BREAKDOWN_HEADER, breakdown_table(report, key))
    lines += ["", held_out_markdown(held_out)]
    coverage = held_out_coverage(validation_residuals(report.profile))
    lines += ["", intervals_markdown(coverage).rstrip()]
    if report.ranked:
        lines += ["", "## Published layouts far behind the optimum", "", f"{gap_line(report)}.", ""]
        lines += _markdown_table(GAP_HEADER, wide_gap_table(report))
    lines += ["", "## Rows kept out of the means", ""]
    lines += [f"- {name}: {why}" for name, why in excluded_rows(report)]
    for section in extra_sections or []:
        lines += ["", section.rstrip()]
    lines += ["", "## Sources", ""]
    for source in dict.fromkeys(row.run.source for row in report.rows):
        lines.append(f"- {source}")
    configs = hf_config_sources()
    if configs:
        lines += ["", "Model configurations (Hugging Face `config.json` keys) named by rows:", ""]
        lines += [f"- `{name}`: {source}" for name, source in configs.items()]
    lines += ["", "GPUs of published clusters no preset describes, named by rows:", ""]
    lines += [f"- `{name}`: {source}" for name, source in gpu_sources().items()]
    lines += ["", known_misses(report)]
    return "\n".join(lines)


def text_table(header: list[str], rows: list[list[str]]) -> str:
    rows = [header, *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def held_out_text(result: LeaveOneSourceOut) -> str:
    lines = ["leave one source out:", text_table(HELD_OUT_HEADER, held_out_table(result))]
    for title, key in HELD_OUT_BREAKDOWNS.items():
        table = held_out_breakdown_table(result, key)
        lines += ["", f"held out, by {title}:", text_table(HELD_OUT_BREAKDOWN_HEADER, table)]
    return "\n".join(lines)


def text_report(report: ValidationReport) -> str:
    held_out = leave_one_source_out(report.profile)
    lines = [text_table(TABLE_HEADER, report_table(report)), "", summary_line(report)]
    lines.append(held_out_headline(held_out))
    lines.append(beyond_target_line(report))
    lines += [precision_line(report, "fp8"), group_line(report, "excluded")]
    for title, key in BREAKDOWNS.items():
        lines += ["", f"by {title}:", text_table(BREAKDOWN_HEADER, breakdown_table(report, key))]
    lines += ["", held_out_text(held_out)]
    if report.ranked:
        lines += ["", gap_line(report), text_table(GAP_HEADER, wide_gap_table(report))]
    return "\n".join(lines)


CALIBRATION_VIEWS = (
    ("by engine, the first rows in the data file's order", "first", "engine"),
    ("by engine, rows spread evenly over the data file's order", "spread", "engine"),
    ("by engine and GPU type, the first rows (groups with more rows than that)", "first", "gpu"),
    (
        "by engine, source and GPU type, the first rows (groups with more rows than that): "
        "the nearest to one user's own runs",
        "first",
        "source",
    ),
)


def calibration_views(n: int, profile: str) -> list[tuple[str, tuple[EngineCalibration, ...]]]:
    return [
        (title, calibrate_engines(n, profile, selection, grouping))
        for title, selection, grouping in CALIBRATION_VIEWS
    ]


def _calibration_verdict(results: tuple[EngineCalibration, ...]) -> str:
    count, before, after = held_out_summary(results)
    if after is None or before is None:
        return "no group had rows left to check"
    met = [r.engine for r in results if (r.mean_abs_error_after or 1) <= CALIBRATED_TARGET]
    raised = [
        r.engine
        for r in results
        if r.mean_abs_error_after is not None
        and r.mean_abs_error_before is not None
        and round(r.mean_abs_error_after, 4) > round(r.mean_abs_error_before, 4)
    ]
    return (
        f"{count} held-out rows: mean absolute error {100 * before:.2f} points with the "
        f"defaults, {100 * after:.2f} calibrated; within the issue's "
        f"{100 * CALIBRATED_TARGET:.0f}-point mean: {', '.join(met) if met else 'no group'}; "
        f"raised by the calibration: {', '.join(raised) if raised else 'no group'}"
    )


def calibration_markdown(views: list[tuple[str, tuple[EngineCalibration, ...]]], n: int) -> str:
    lines = [calibration_preamble().format(n=n, target=100 * CALIBRATED_TARGET)]
    for title, results in views:
        lines += [f"### {title[0].upper()}{title[1:]}", "", f"{_calibration_verdict(results)}.", ""]
        lines += _markdown_table(CALIBRATION_HEADER, calibration_table(results))
        lines.append("")
    return "\n".join(lines)


def calibration_text(views: list[tuple[str, tuple[EngineCalibration, ...]]]) -> str:
    lines = []
    for title, results in views:
        lines += [
            "",
            f"calibrated {title}:",
            text_table(CALIBRATION_HEADER, calibration_table(results)),
        ]
        lines.append(_calibration_verdict(results))
    return "\n".join(lines)


def run_validate(args: argparse.Namespace) -> int:
    report = validate(args.profile)
    print(text_report(report))
    extra = []
    if args.calibrate:
        try:
            views = calibration_views(args.calibrate, args.profile)
        except CalibrationUnavailable as missing:
            print(f"layoutopt: error: {missing}", file=sys.stderr)
            return EXIT_INTERNAL
        print(calibration_text(views))
        extra.append(views)
    if args.residuals is not None:
        args.residuals.write_text(residuals_json(validation_residuals(args.profile)))
        print(f"wrote {args.residuals}")
    if args.markdown is not None:
        try:
            text = markdown(report, [calibration_markdown(v, args.calibrate) for v in extra])
        except TemplateMissing as missing:
            print(f"layoutopt: error: {missing}", file=sys.stderr)
            return EXIT_BAD_REQUEST
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text)
        print(f"wrote {args.markdown}")
    return EXIT_OK


def register_validate_command(commands: Any) -> None:
    cmd = commands.add_parser(
        "validate",
        help="compare the cost model with published runs (predicted vs reported MFU and memory)",
    )
    cmd.add_argument(
        "--profile",
        default=VALIDATION_PROFILE,
        help=f"cost-model profile: {', '.join(PROFILES)} (default {VALIDATION_PROFILE})",
    )
    cmd.add_argument("--markdown", type=Path, help="also write the report as Markdown here")
    cmd.add_argument(
        "--residuals",
        type=Path,
        help="also write each priced row's miss here, as estimates' intervals read them "
        "(models/presets/residuals.json)",
    )
    cmd.add_argument(
        "--calibrate",
        type=at_least_one("--calibrate"),
        metavar="N",
        help="also calibrate on N rows of each engine and report the error on its other rows",
    )
    cmd.set_defaults(run=run_validate)
