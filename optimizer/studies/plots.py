"""The standard pictures of a study, as PNG and SVG, each titled and labelled to stand alone:

- `scaling`: MFU and tokens/s per GPU against GPU count, a line per model and GPU type;
- `days_to_train`: days to train `train_tokens` against GPU count;
- `memory_by_part`: memory per GPU by part at each GPU count, one small panel per series;
- `frontiers`: the memory/MFU frontiers overlaid (pareto studies).

A line is a series: model and GPU type, plus any other axis the study varies while the
lines stay few; over the axes left, each point is the best MFU (the subtitle says so).
Drawn on matplotlib `Figure`s (no pyplot state, the Agg renderer for PNG): safe in any
process, with no display.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optimizer.studies.rows import Row

MAX_SERIES = 10
MAX_PANELS = 12
MAX_FRONTIERS = 12
SOLVED = frozenset({"optimal", "feasible", "evaluated"})
PARTS = ("weights", "gradients", "optimizer", "activations")
FORMATS = ("png", "svg")
SERIES_BASE = ("model_name", "gpu_name")
DPI = 120


def plot_study(rows: Sequence[Row], out_dir: Path, source: str = "study") -> list[Path]:
    """Every picture the rows allow, written into `out_dir`; the files written."""
    solved = [row for row in rows if row.get("status") in SOLVED and row.get("mfu") is not None]
    out_dir.mkdir(parents=True, exist_ok=True)
    if not solved:
        return []
    axes, best_over = series_axes(rows)
    chosen = best_points(solved, axes)
    footer = f"{source}: {status_counts(rows)}" + (
        f"; each point the best MFU over {', '.join(best_over)}" if best_over else ""
    )
    written = _save(_scaling_figure(chosen, footer), out_dir / "scaling")
    written += _save(_days_figure(chosen, footer), out_dir / "days_to_train")
    written += _save(_memory_figure(chosen, footer), out_dir / "memory_by_part")
    framed = [row for row in solved if row.get("frontier")]
    if framed:
        written += _save(_frontier_figure(framed, footer), out_dir / "frontiers")
    return written


def status_counts(rows: Sequence[Row]) -> str:
    counts = Counter(str(row.get("status")) for row in rows)
    return ", ".join(f"{n} {status}" for status, n in counts.most_common())


def _varying(rows: Sequence[Row], column: str) -> int:
    return len({json.dumps(row.get(column), sort_keys=True) for row in rows})


def series_axes(rows: Sequence[Row]) -> tuple[list[str], list[str]]:
    """Columns that name a line (model, GPU type, then other varied overrides while lines
    stay few) and the varied ones left over, over which the best point is taken."""
    axes = list(SERIES_BASE)
    others = [
        name
        for name in _override_columns(rows)
        if name not in ("model", "cluster.gpu", "cluster.gpus") and _varying(rows, name) > 1
    ]
    best_over: list[str] = []
    for name in others:
        lines = _varying(rows, name) * len({tuple(row.get(a) for a in axes) for row in rows})
        (axes if lines <= MAX_SERIES else best_over).append(name)
    return axes, best_over


def _override_columns(rows: Sequence[Row]) -> list[str]:
    # override columns sit between "index" and "compute" in every row
    names = list(rows[0])
    return names[names.index("index") + 1 : names.index("compute")]


def best_points(rows: Sequence[Row], axes: list[str]) -> dict[str, list[Row]]:
    """Per series label, one row per GPU count (the best MFU there), GPU count ascending."""
    best: dict[tuple[str, int], Row] = {}
    for row in rows:
        label = series_label(row, axes)
        slot = (label, int(row["gpus"]))
        if slot not in best or row["mfu"] > best[slot]["mfu"]:
            best[slot] = row
    series: dict[str, list[Row]] = {}
    for (label, _), row in sorted(best.items(), key=lambda item: (item[0][0], item[0][1])):
        series.setdefault(label, []).append(row)
    return series


def series_label(row: Row, axes: list[str]) -> str:
    parts = [str(row.get(axes[0])), f"on {row.get(axes[1])}"]
    parts += [f"{name.rsplit('.', 1)[-1]} {row.get(name)}" for name in axes[2:]]
    return ", ".join(parts)


def _figure(width_in: float, height_in: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")


def _gpu_axis(axis: Any, series: dict[str, list[Row]]) -> None:
    """A log axis of GPU counts, ticked at the study's own counts (64, not 2^6)."""
    counts = sorted({int(row["gpus"]) for rows in series.values() for row in rows})
    axis.set_xscale("log", base=2)
    axis.set_xticks(
        counts, [f"{count:,}" for count in counts], rotation=45 if len(counts) > 8 else 0
    )
    axis.minorticks_off()
    axis.grid(True, alpha=0.3)
    axis.set_xlabel("GPUs (log scale)")


def _scaling_figure(series: dict[str, list[Row]], footer: str) -> Any:
    figure = _figure(12, 5)
    mfu_axis, rate_axis = figure.subplots(1, 2)
    for label, rows in series.items():
        gpus = [row["gpus"] for row in rows]
        mfu_axis.plot(gpus, [100 * row["mfu"] for row in rows], marker="o", label=label)
        rate_axis.plot(gpus, [row["tokens_per_s_per_gpu"] for row in rows], marker="o", label=label)
    mfu_axis.set_ylabel("MFU of the best layout (%)")
    mfu_axis.set_title("Model FLOPs utilisation")
    rate_axis.set_ylabel("tokens/s per GPU")
    rate_axis.set_title("Throughput per GPU")
    for axis in (mfu_axis, rate_axis):
        _gpu_axis(axis, series)
        axis.set_ylim(bottom=0)
    mfu_axis.legend(fontsize="small")
    figure.suptitle("Best layout's MFU and throughput against GPU count")
    figure.supxlabel(footer, fontsize="small")
    return figure


def _days_figure(series: dict[str, list[Row]], footer: str) -> Any:
    figure = _figure(8, 5)
    axis = figure.subplots()
    for label, rows in series.items():
        timed = [row for row in rows if row.get("days_to_train") is not None]
        axis.plot(
            [r["gpus"] for r in timed], [r["days_to_train"] for r in timed], marker="o", label=label
        )
    _gpu_axis(axis, series)
    axis.set_yscale("log")
    axis.set_ylabel("days to train (log scale)")
    axis.legend(fontsize="small")
    tokens = next((r for rows in series.values() for r in rows), {})
    figure.suptitle("Days to train against GPU count, at the best layout's throughput")
    figure.supxlabel(footer + _tokens_note(tokens), fontsize="small")
    return figure


def _tokens_note(row: Row) -> str:
    tokens_per_s, days = row.get("tokens_per_s"), row.get("days_to_train")
    if not tokens_per_s or not days:
        return ""
    return f"; {tokens_per_s * days * 86_400:.3g} tokens to train"


def _memory_figure(series: dict[str, list[Row]], footer: str) -> Any:
    labels = list(series)[:MAX_PANELS]
    columns = min(3, len(labels))
    rows_n = -(-len(labels) // columns)
    figure = _figure(4.2 * columns, 3.4 * rows_n + 0.6)
    panels = figure.subplots(rows_n, columns, squeeze=False)
    for panel, label in zip(panels.flat, labels, strict=False):
        _memory_panel(panel, label, series[label])
    for panel in list(panels.flat)[len(labels) :]:
        panel.set_visible(False)
    handles, names = panels.flat[0].get_legend_handles_labels()
    figure.legend(handles, names, loc="outside right upper", fontsize="small")
    shown = "" if len(series) <= MAX_PANELS else f" (first {MAX_PANELS} of {len(series)} series)"
    figure.suptitle(f"Memory per GPU by part at the best layout{shown}")
    figure.supxlabel("GPUs; " + footer, fontsize="small")
    figure.supylabel("GB per GPU")
    return figure


def _memory_panel(panel: Any, label: str, rows: list[Row]) -> None:
    positions = range(len(rows))
    bottom = [0.0] * len(rows)
    for part in PARTS:
        heights = [row.get(f"memory_{part}_gb") or 0.0 for row in rows]
        panel.bar(positions, heights, bottom=bottom, label=part)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    capacity = [row.get("memory_capacity_gb") or 0.0 for row in rows]
    panel.plot(positions, capacity, color="black", linestyle="--", label="capacity")
    panel.set_xticks(list(positions), [str(row["gpus"]) for row in rows], fontsize="small")
    panel.set_title(label, fontsize="small")
    panel.grid(True, axis="y", alpha=0.3)


def _frontier_figure(rows: list[Row], footer: str) -> Any:
    figure = _figure(8, 5.5)
    axis = figure.subplots()
    for row in rows[:MAX_FRONTIERS]:
        points = json.loads(row["frontier"])
        memory_gb, mfu = [p[0] for p in points], [100 * p[1] for p in points]
        label = f"{row['model_name']} on {row['gpus']} {row['gpu_name']}"
        axis.step(memory_gb, mfu, where="post", marker=".", label=f"{label} (seq {row['seq_len']})")
    axis.set_xlabel("memory per GPU (GB)")
    axis.set_ylabel("MFU (%)")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize="x-small")
    shown = "" if len(rows) <= MAX_FRONTIERS else f" (first {MAX_FRONTIERS} of {len(rows)})"
    figure.suptitle(f"Memory/MFU frontiers: layouts no other beats on both{shown}")
    figure.supxlabel(footer, fontsize="small")
    return figure


def _save(figure: Any, stem: Path) -> list[Path]:
    paths = [stem.with_suffix(f".{kind}") for kind in FORMATS]
    for path in paths:
        figure.savefig(path)
    return paths
