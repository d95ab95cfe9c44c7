"""What the benchmarks share: the job they time, a median of runs, and writing a benchmark's
section of docs/performance.md, leaving the other sections alone."""

from __future__ import annotations

import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ortools

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from models.transformer import TransformerSpec

REPORT = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


def h100_job(gpus: int, model: str | TransformerSpec, global_batch: int = 2048) -> TrainingJob:
    """`model` (a preset's name or a spec) on `gpus` H100s, 8 a node, 8,192-token sequences."""
    spec = model_preset(model) if isinstance(model, str) else model
    return TrainingJob(
        model=spec,
        cluster=ClusterSpec(gpus=gpus, gpu=gpu_preset("h100-sxm"), gpus_per_node=8),
        training=TrainingSpec(global_batch=global_batch, seq_len=8192),
    )


def median_s(run: Callable[[], Any], reps: int) -> tuple[float, Any]:
    """The median wall time of `reps` runs of `run`, and its last answer."""
    times, result = [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def machine_line() -> str:
    """When, on what, under which load: absolute times on a shared machine need it."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} "
        f"cores (load average {load}), Python {platform.python_version()}, OR-Tools "
        f"{ortools.__version__}"
    )


def publish(section: str, lines: list[str], write: bool) -> None:
    """Print a benchmark's lines and, when `write`, put them under `section` of the report."""
    print("\n".join(lines))
    if write:
        write_section(section, lines)


def write_section(section: str, lines: list[str]) -> None:
    """Replace the body of `section` (a "## ..." heading) with `lines`."""
    text = REPORT.read_text()
    pattern = re.compile(rf"^{re.escape(section)}\n.*?(?=^## |\Z)", re.S | re.M)
    if not pattern.search(text):
        raise SystemExit(f"{REPORT} has no '{section}' section to fill")
    body = "\n".join(lines)
    REPORT.write_text(pattern.sub(lambda _: f"{section}\n\n{body}\n\n", text, count=1))
