"""Training logs read into a measurement: the steady-state step time, or the throughput an
engine prints instead, and the peak memory where the log prints one.

One reader per engine (`READERS`: the patterns of its step lines and memory figures), read by
one pure function of the log's lines (`read_lines`):

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
from collections.abc import Sequence
from dataclasses import dataclass

from models.errors import InvalidSpec

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
    raise log_error(f"line {line}: {what} printed without the step it belongs to")


# --- one reader per engine ------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """A peak-memory figure a log prints, and what it is."""

    pattern: re.Pattern[str]
    what: str  # its name in an error
    gb: float  # GB a printed unit
    kind: str  # "allocated" or "reserved"


@dataclass(frozen=True)
class Reader:
    """An engine's step lines: the figure each prints, the step it belongs to (the first of
    `steps` found), and its peak memory (the first of `memory` the log prints)."""

    measure: str  # step_time_s, tokens_per_s_per_gpu or samples_per_s
    figure: re.Pattern[str]
    what: str  # the figure's name in an error
    steps: tuple[re.Pattern[str], ...]
    memory: tuple[Memory, ...]
    looked_for: str  # the step line, for a log without one
    unit: float = 1.0  # the measure a printed unit (ms: 1e-3 s)


def read_lines(reader: Reader, lines: Sequence[str]) -> EngineLines:
    """What `reader` finds in the lines: each step line, and the largest peak memory."""
    steps: list[StepLine] = []
    peaks: dict[str, list[float]] = {memory.kind: [] for memory in reader.memory}
    for at, text in enumerate(lines, start=1):
        if (token := _search(reader.figure, text)) is not None:
            step = _step(reader.steps, text, at, reader.what)
            steps.append(StepLine(at, step, number(token, at, reader.what) * reader.unit))
        for memory in reader.memory:
            if (token := _search(memory.pattern, text)) is not None:
                peaks[memory.kind].append(number(token, at, memory.what) * memory.gb)
    for memory in reader.memory:
        if peaks[memory.kind]:
            return EngineLines(reader.measure, tuple(steps), max(peaks[memory.kind]), memory.kind)
    return EngineLines(reader.measure, tuple(steps))


_ITERATION = re.compile(r"iteration\s+(\d+)\s*/")
READERS: dict[str, Reader] = {
    "megatron": Reader(
        "step_time_s",
        re.compile(r"elapsed time per iteration \(ms\):\s*([^|\s]*)"),
        "elapsed time per iteration (ms)",
        (_ITERATION,),
        (
            Memory(
                re.compile(r"iterations\)? memory \(MB\) \|.*?max allocated:\s*([^|\s]*)"),
                "max allocated (MB)",
                MIB_GB,
                "allocated",
            ),
        ),
        "'iteration N/ M | ... | elapsed time per iteration (ms): X'",
        unit=1e-3,
    ),
    "nemo": Reader(
        "step_time_s",
        re.compile(r"train_step_timing in s[:=]\s*([^\s|,\]]*)"),
        "train_step_timing in s",
        (re.compile(r"global_step[:=]\s*([0-9.]+)"), re.compile(r"iteration (\d+)/")),
        (  # what the tensors held, where the log prints both
            Memory(
                re.compile(r"max_memory_allocated[:=]\s*([^\s|,\]]*)"),
                "max_memory_allocated (bytes)",
                1e-9,
                "allocated",
            ),
            Memory(
                re.compile(r"peak_memory_usage[:=]\s*([^\s|,\]]*)"),
                "peak_memory_usage (bytes)",
                1e-9,
                "reserved",
            ),
        ),  # fmt: skip
        "'train_step_timing in s: X' beside 'global_step'",
    ),
    "torchtitan": Reader(
        "tokens_per_s_per_gpu",
        re.compile(r"step:\s*\d+\s.*?tps:\s*([^\s]*)"),
        "tps",
        (re.compile(r"step:\s*(\d+)\s"),),
        (Memory(re.compile(r"memory:\s*([^\s(]*?)GiB"), "memory (GiB)", GIB_GB, "reserved"),),
        "'step: N ... tps: T'",
    ),
    "deepspeed": Reader(
        "samples_per_s",
        re.compile(r"(?:CurrSamplesPerSec|[\s,]SamplesPerSec)=([^,\s]*)|samples/sec:\s*([^\s|]*)"),
        "samples per second",
        (
            re.compile(r"global_step=(\d+)"),
            re.compile(r"\b\d+/(\d+), "),  # before 0.8: epoch/step, then the rates
            _ITERATION,  # GPT-NeoX, Megatron-DeepSpeed
            re.compile(r"steps:\s*(\d+)"),  # the pipeline engine
        ),
        (
            Memory(
                re.compile(r"MaxMemAllocated=([^,\s]*?)GB"),
                "MaxMemAllocated (GiB)",
                GIB_GB,
                "allocated",
            ),
        ),
        "'CurrSamplesPerSec=S' (or 'SamplesPerSec=S', 'samples/sec: S')",
    ),
}


FORMATS = tuple(READERS)  # in the order a log is tried against them


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
        reader = READERS[known_format(format_)]
        if not (found := read_lines(reader, lines)).steps:
            raise log_error(f"no {format_} step lines: looked for {reader.looked_for}")
        return steady_median(found, format_)
    for name, reader in READERS.items():
        if (found := read_lines(reader, lines)).steps:
            return steady_median(found, name)
    raise log_error(
        f"no step lines in {len(lines):,} lines: looked for "
        + "; ".join(f"{name}'s {reader.looked_for}" for name, reader in READERS.items())
    )
