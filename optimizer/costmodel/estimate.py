"""What pricing one layout yields: memory by part, bubble, the MFU waterfall, and warnings."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.artefact import Artefact
from models.layout import Layout, Schedule


@dataclass(frozen=True)
class MemoryBytes:
    """Memory per device by part, in bytes (the worst device's where devices differ): the
    tensors, what PyTorch's allocator reserves beyond them (`fragmentation`) and the
    runtime's own memory outside the allocator (`runtime`: CUDA context, NCCL buffers)."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    capacity: float
    fragmentation: float = 0.0
    runtime: float = 0.0

    @property
    def tensors(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def allocator(self) -> float:
        """What PyTorch's caching allocator reserves at the peak: what its memory statistics
        (max_memory_reserved; max_memory_allocated without fragmentation) report."""
        return self.tensors + self.fragmentation

    @property
    def total(self) -> float:
        return self.allocator + self.runtime


@dataclass(frozen=True)
class MfuStep:
    """The utilisation estimate after one more effect has been charged."""

    name: str
    mfu: float


@dataclass(frozen=True)
class Interval:
    """The range the measured figures are expected in, at `coverage`, from the validation
    residuals of the estimate's regime (optimizer.uncertainty); `basis` says which."""

    step_time_s: tuple[float, float]
    mfu: tuple[float, float]
    memory_gb: tuple[float, float] | None  # None: no row of a like regime reports memory
    coverage: float
    basis: str


@dataclass(frozen=True)
class Estimate:
    profile: str
    layout: Layout  # resolved: dp is set
    micro_batches: int
    memory: MemoryBytes
    bubble: float
    mfu_steps: tuple[MfuStep, ...]
    step_time_s: float
    tokens_per_s_per_gpu: float
    times_s: dict[str, float] = field(default_factory=dict)  # per-layer and per-step components
    warnings: tuple[str, ...] = ()
    # Hardware FLOPs (model FLOPs plus recomputation) over peak, where the profile reports it.
    hardware_flops_utilization: float | None = None
    # Under a low precision (fp8, mxfp8, nvfp4: `mfu_fp8_peak_format`), the model FLOPs over
    # that format's dense peak (MFU stays over bf16's).
    mfu_fp8_peak: float | None = None
    mfu_fp8_peak_format: str | None = None
    # The engine's verdict on the layout (optimizer.engines.judged): its input, or why it
    # refuses the layout; neither when no engine was asked.
    export: Artefact | None = None
    export_error: str | None = None
    # How sure the figures are (set beside the verdict); None where no rows bear on it.
    interval: Interval | None = None

    @property
    def mfu(self) -> float:
        return self.mfu_steps[-1].mfu

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.memory.capacity

    @property
    def fits_interval(self) -> bool | None:
        """Whether the upper end of the memory interval is within the capacity too (the
        searches' default rule, optimizer.memory_fit); None without a memory interval."""
        if self.interval is None or self.interval.memory_gb is None:
            return None
        return self.fits and self.interval.memory_gb[1] * 1e9 <= self.memory.capacity

    def summary(self) -> str:
        """The layout in words, as explanations quote it (schedule and ep when not default)."""
        lay = self.layout
        extras = "" if lay.schedule == Schedule.ONE_F_ONE_B else f", schedule {lay.schedule.value}"
        extras += f", ep {lay.ep}" if lay.ep > 1 else ""
        return (
            f"tp {lay.tp}, pp {lay.pp}, cp {lay.cp}, dp {lay.data_parallel_size}, vpp {lay.vpp}, "
            f"micro-batch {lay.micro_batch}, ZeRO-{lay.zero}, recompute {lay.recompute.value}"
            f"{extras}"
        )
