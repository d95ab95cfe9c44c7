"""Training logs read into a measurement: the steady-state step time, or the throughput an
engine prints instead, and the peak memory where the log prints one.

One short reader per engine, each a pure function of the log's lines:

- Megatron-LM (and Megatron-Bridge, GPT-NeoX and Megatron-DeepSpeed, which print its lines):
  `iteration N/ M | ... | elapsed time per iteration (ms): X |`, the mean over the log
  interval; memory from `[Rank R] (after N iterations) memory (MB) | allocated: A | max
  allocated: B`, MB of 2**20 bytes (megatron/training/utils.py, report_memory).
- NeMo 2 and NeMo 1 (Lightning's progress line): `train_step_timing in s: X` (or `=X`) beside
  `global_step`; memory from `max_memory_allocated` in bytes, else `peak_memory_usage`,
  which is torch.cuda.max_memory_reserved (nemo/lightning/pytorch/strategies/
  megatron_strategy.py, training_step).
- torchtitan: `step: N  loss: ...  memory: XGiB(Y%)  tps: T`, T tokens per second per device
  over the log interval and X the interval's max_memory_reserved in GiB (torchtitan/
  components/metrics.py, log).
- DeepSpeed: the throughput timer's `CurrSamplesPerSec=S` (`SamplesPerSec=S` before 0.8) with
  `MaxMemAllocated=XGB`, X in GiB (deepspeed/utils/timer.py, ThroughputTimer.stop), or the
  pipeline engine's `samples/sec: S`: samples of the global batch a second, so the step time
  is the global batch over it (the run's request gives the batch).

A step reported by several lines (one per rank) counts once, at its slowest: a step ends when
its slowest rank does. The measurement is the median over the steady steps: a line whose
interval reaches back into the first WARMUP_STEPS steps of the run is dropped as warm-up.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from models.errors import InvalidSpec

FORMATS = ("megatron", "nemo", "torchtitan", "deepspeed")
# A log is refused, before a line is read, past these: a month of per-step lines of any of
# the four engines is a few hundred MB only in the worst case, and a calibration needs the
# few dozen steady steps of a trial run, not a whole training's stdout.
MAX_LOG_BYTES = 64 * 2**20
MAX_LOG_LINES = 2**20
# Longer lines (a progress bar without line breaks, a dumped tensor) are not step lines, and
# the readers' patterns stay linear on what they do read.
MAX_LINE_CHARS = 16_384
# Steps of a run's start that run slower than its steady state: the first holds compilation
# (torch.compile, CUDA graphs), the caching allocator's growth and the lazily created
# communicators of each parallel group, and the next few the allocator settling and the
# timers' own start (DeepSpeed's throughput timer skips its first 2 steps, ThroughputTimer's
# start_step; torchtitan shortens its collective time-out only after step 1, "assuming lazy
# init and compilation are finished"). Ten leaves margin at a cost of ten steps of a trial.
WARMUP_STEPS = 10
GIB_GB = 2**30 / 1e9  # GiB in GB (1e9 bytes, the unit of every memory figure here)
MIB_GB = 2**20 / 1e9

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # torchtitan colours its log line


@dataclass(frozen=True)
class StepLine:
    line: int  # where it is in the log, from 1
    step: int  # the step it reports (the last of its log interval)
    value: float  # in the reading's measure


@dataclass(frozen=True)
class EngineLines:
    """What one engine's reader found in a log."""

    measure: str  # step_time_s, tokens_per_s_per_gpu or samples_per_s
    steps: tuple[StepLine, ...]
    peak_memory_gb: float | None = None  # the largest the log prints
    memory_kind: str | None = None  # what the engine prints: "allocated" or "reserved"


@dataclass(frozen=True)
class LogReading:
    """A log read: the median of its steady steps in `measure`, and its peak memory."""

    format: str
    measure: str
    value: float
    steps_read: int  # distinct steps the log reports
    steps_used: tuple[int, ...]  # the steady ones the median is over
    warmup_dropped: int
    interval: int  # steps a line reports the mean of (the least gap between reported steps)
    peak_memory_gb: float | None
    memory_kind: str | None

    @property
    def summary(self) -> str:
        first, last = self.steps_used[0], self.steps_used[-1]
        span = f"step {first}" if first == last else f"steps {first}-{last}"
        memory = (
            "no memory figure"
            if self.peak_memory_gb is None
            else f"peak memory {self.peak_memory_gb:.2f} GB (max {self.memory_kind})"
        )
        return (
            f"{self.format} log: {self.measure} {self.value:.6g}, the median of "
            f"{len(self.steps_used)} steady ({span}) of the {self.steps_read} steps it "
            f"reports; {self.warmup_dropped} dropped as warm-up (a line whose "
            f"{self.interval}-step interval reaches into the first {WARMUP_STEPS} steps: "
            f"compilation, allocator growth, communicator set-up); {memory}"
        )


def log_error(message: str) -> InvalidSpec:
    return InvalidSpec(message, "log")


def number(token: str, line: int, what: str) -> float:
    """A positive finite number as the log prints it (thousands separated by commas), or
    InvalidSpec naming the line."""
    try:
        value = float(token.replace(",", ""))
    except ValueError:
        raise log_error(f"line {line}: {what} {token!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise log_error(f"line {line}: {what} {token!r} is not a positive finite number")
    return value


def _search(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.search(text)
    return None if found is None else next(g for g in found.groups() if g is not None)


def _step(patterns: Sequence[re.Pattern[str]], text: str, line: int, what: str) -> int:
    for pattern in patterns:
        if (found := _search(pattern, text)) is not None:
            return int(float(found))  # NeMo 1 prints global_step=99.00
    raise log_error(f"line {line}: a {what} without the step it belongs to")


# --- one reader per engine ------------------------------------------------------------------

_MEGATRON_TIME = re.compile(r"elapsed time per iteration \(ms\):\s*([^|\s]*)")
_MEGATRON_STEP = (re.compile(r"iteration\s+(\d+)\s*/"),)
_MEGATRON_MEMORY = re.compile(r"iterations\)? memory \(MB\) \|.*?max allocated:\s*([^|\s]*)")


def megatron(lines: Sequence[str]) -> EngineLines:
    steps, peaks = [], []
    for number_, text in enumerate(lines, start=1):
        if (token := _search(_MEGATRON_TIME, text)) is not None:
            step = _step(_MEGATRON_STEP, text, number_, "step time")
            ms = number(token, number_, "elapsed time per iteration (ms)")
            steps.append(StepLine(number_, step, ms / 1000))
        if (token := _search(_MEGATRON_MEMORY, text)) is not None:
            peaks.append(number(token, number_, "max allocated (MB)") * MIB_GB)
    return EngineLines("step_time_s", tuple(steps), max(peaks, default=None), "allocated")


_NEMO_TIME = re.compile(r"train_step_timing in s[:=]\s*([^\s|,\]]*)")
_NEMO_STEP = (re.compile(r"global_step[:=]\s*([0-9.]+)"), re.compile(r"iteration (\d+)/"))
_NEMO_ALLOCATED = re.compile(r"max_memory_allocated[:=]\s*([^\s|,\]]*)")
_NEMO_RESERVED = re.compile(r"peak_memory_usage[:=]\s*([^\s|,\]]*)")


def nemo(lines: Sequence[str]) -> EngineLines:
    steps: list[StepLine] = []
    allocated: list[float] = []
    reserved: list[float] = []
    for number_, text in enumerate(lines, start=1):
        if (token := _search(_NEMO_TIME, text)) is None:
            continue
        step = _step(_NEMO_STEP, text, number_, "train_step_timing")
        steps.append(StepLine(number_, step, number(token, number_, "train_step_timing in s")))
        for peaks, pattern in ((allocated, _NEMO_ALLOCATED), (reserved, _NEMO_RESERVED)):
            if (token := _search(pattern, text)) is not None:
                peaks.append(number(token, number_, "peak memory (bytes)") / 1e9)
    if allocated:  # what the tensors held, where the log prints both
        return EngineLines("step_time_s", tuple(steps), max(allocated), "allocated")
    return EngineLines("step_time_s", tuple(steps), max(reserved, default=None), "reserved")


_TITAN_TPS = re.compile(r"step:\s*\d+\s.*?tps:\s*([^\s]*)")
_TITAN_STEP = (re.compile(r"step:\s*(\d+)\s"),)
_TITAN_MEMORY = re.compile(r"memory:\s*([^\s(]*?)GiB")


def torchtitan(lines: Sequence[str]) -> EngineLines:
    steps, peaks = [], []
    for number_, text in enumerate(lines, start=1):
        if (token := _search(_TITAN_TPS, text)) is None:
            continue
        step = _step(_TITAN_STEP, text, number_, "tps")
        steps.append(StepLine(number_, step, number(token, number_, "tps")))
        if (token := _search(_TITAN_MEMORY, text)) is not None:
            peaks.append(number(token, number_, "memory (GiB)") * GIB_GB)
    return EngineLines("tokens_per_s_per_gpu", tuple(steps), max(peaks, default=None), "reserved")


_DEEPSPEED_RATE = re.compile(
    r"(?:CurrSamplesPerSec|[\s,]SamplesPerSec)=([^,\s]*)|samples/sec:\s*([^\s|]*)"
)
_DEEPSPEED_STEP = (
    re.compile(r"global_step=(\d+)"),
    re.compile(r"\b\d+/(\d+), "),  # before 0.8: epoch/step, then the rates
    re.compile(r"iteration\s+(\d+)\s*/"),
    re.compile(r"steps:\s*(\d+)"),  # the pipeline engine
)
_DEEPSPEED_MEMORY = re.compile(r"MaxMemAllocated=([^,\s]*?)GB")


def deepspeed(lines: Sequence[str]) -> EngineLines:
    steps, peaks = [], []
    for number_, text in enumerate(lines, start=1):
        if (token := _search(_DEEPSPEED_RATE, text)) is None:
            continue
        step = _step(_DEEPSPEED_STEP, text, number_, "sample rate")
        steps.append(StepLine(number_, step, number(token, number_, "samples per second")))
        if (token := _search(_DEEPSPEED_MEMORY, text)) is not None:
            peaks.append(number(token, number_, "MaxMemAllocated (GiB)") * GIB_GB)
    return EngineLines("samples_per_s", tuple(steps), max(peaks, default=None), "allocated")


READERS: dict[str, Callable[[Sequence[str]], EngineLines]] = {
    "megatron": megatron,
    "nemo": nemo,
    "torchtitan": torchtitan,
    "deepspeed": deepspeed,
}
LOOKED_FOR = {
    "megatron": "'iteration N/ M | ... | elapsed time per iteration (ms): X'",
    "nemo": "'train_step_timing in s: X' beside 'global_step'",
    "torchtitan": "'step: N ... tps: T'",
    "deepspeed": "'CurrSamplesPerSec=S' (or 'SamplesPerSec=S', 'samples/sec: S')",
}


def known_format(name: str) -> str:
    """`name` if a reader reads it (a validator: the error lists the formats)."""
    if name not in READERS:
        raise log_error(f"log format {name!r} is none of {', '.join(FORMATS)}")
    return name


# --- steady state ---------------------------------------------------------------------------


def one_per_step(found: EngineLines) -> list[StepLine]:
    """Each step once, at the slowest of the lines reporting it, in step order."""
    slower = (lambda a, b: a > b) if found.measure == "step_time_s" else (lambda a, b: a < b)
    by_step: dict[int, StepLine] = {}
    for line in found.steps:
        kept = by_step.get(line.step)
        if kept is None or slower(line.value, kept.value):
            by_step[line.step] = line
    return [by_step[step] for step in sorted(by_step)]


def log_interval(steps: Sequence[StepLine]) -> int:
    """Steps a line reports the mean of: the least gap between reported steps (1 where the
    log reports a single step: NeMo and DeepSpeed time each step)."""
    gaps = [b.step - a.step for a, b in zip(steps, steps[1:], strict=False)]
    return min(gaps, default=1)


def steady_median(found: EngineLines, format_: str) -> LogReading:
    """The median over the steps whose log interval lies past the first WARMUP_STEPS."""
    steps = one_per_step(found)
    interval = log_interval(steps)
    steady = [s for s in steps if s.step - interval + 1 > WARMUP_STEPS]
    if not steady:
        reported = ", ".join(str(s.step) for s in steps[:8]) + (", ..." if len(steps) > 8 else "")
        raise log_error(
            f"line {steps[-1].line}: every step the log reports ({reported}) falls within the "
            f"first {WARMUP_STEPS} of the run (or a line's {interval}-step mean reaches into "
            "them), which run slower than its steady state (compilation, allocator growth, "
            f"communicator set-up): log at least {WARMUP_STEPS + interval} steps"
        )
    return LogReading(
        format=format_,
        measure=found.measure,
        value=statistics.median(s.value for s in steady),
        steps_read=len(steps),
        steps_used=tuple(s.step for s in steady),
        warmup_dropped=len(steps) - len(steady),
        interval=interval,
        peak_memory_gb=found.peak_memory_gb,
        memory_kind=found.memory_kind if found.peak_memory_gb is not None else None,
    )


# --- the whole log --------------------------------------------------------------------------


def log_lines(text: str) -> list[str]:
    """The log's lines, colour codes removed; refused past MAX_LOG_BYTES or MAX_LOG_LINES
    before any is read."""
    if len(text) > MAX_LOG_BYTES:
        raise log_error(f"the log holds {len(text):,} characters, over {MAX_LOG_BYTES:,}")
    lines = text.splitlines()
    if len(lines) > MAX_LOG_LINES:
        raise log_error(
            f"the log holds {len(lines):,} lines, over {MAX_LOG_LINES:,}: "
            "give the lines of the steady steps"
        )
    if "\x1b" in text:
        lines = [_ANSI.sub("", line) for line in lines]
    return [line if len(line) <= MAX_LINE_CHARS else "" for line in lines]


def read_log(text: str, format_: str | None = None) -> LogReading:
    """The log's steady-state measurement under `format_`, or under the first of FORMATS
    whose step lines it holds (Megatron-LM first: GPT-NeoX and Megatron-DeepSpeed print
    both its step time and a sample rate, and the step time needs no batch size)."""
    lines = log_lines(text)
    if format_ is not None:
        found = READERS[known_format(format_)](lines)
        if not found.steps:
            raise log_error(f"no {format_} step lines: looked for {LOOKED_FOR[format_]}")
        return steady_median(found, format_)
    for name, reader in READERS.items():
        if (found := reader(lines)).steps:
            return steady_median(found, name)
    raise log_error(
        f"no step lines in {len(lines):,} lines: looked for "
        + "; ".join(f"{name}'s {LOOKED_FOR[name]}" for name in FORMATS)
    )
