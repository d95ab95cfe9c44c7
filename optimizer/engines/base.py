"""What a training engine is, as data: the knobs it offers (and what it calls them), the
rules a layout must satisfy to run on it, how it runs what it offers where that changes the
price, and the artefact it reads.

Every fact carries the source it was read from (repository, file, lines, commit or release);
facts that could not be verified say UNVERIFIED in their source instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from models.artefact import Artefact
from models.job import TrainingJob
from models.layout import Dimension, Layout, Recompute, Schedule
from models.text import one_line
from optimizer.costmodel import LayoutGrid

if TYPE_CHECKING:
    from .settings import EngineSetting, SettingValue
    from .versions import EngineVersion

ZERO_STAGES = (0, 1, 2, 3)

# When gradients (or parameters) cross the data-parallel group.
Timing = Literal["per_step", "per_micro_batch"]
Gather = Literal["none", "per_step", "per_micro_batch"]
Collective = Literal["all-reduce", "reduce-scatter"]
OverlapName = Literal["grad_reduce", "param_gather", "tp_comm", "p2p"]


@dataclass(frozen=True)
class Feature:
    """One of the project's knob values as an engine has it: whether it runs it, the
    engine's own term for it (flag, field, class), and where that was read."""

    offered: bool
    engine_term: str
    source: str


def offered(engine_term: str, source: str) -> Feature:
    return Feature(True, engine_term, source)


def absent(source: str) -> Feature:
    """A value the engine does not run; `source` says where its absence was read."""
    return Feature(False, "", source)


@dataclass(frozen=True)
class Offers:
    """Every knob value of `models.layout.Layout`, offered or not, each with its source."""

    schedules: Mapping[Schedule, Feature]  # at vpp 1
    interleaving: Feature  # 1f1b with vpp > 1
    zero: Mapping[int, Feature]  # ZeRO stages 0-3 as the engine's sharding modes
    recompute: Mapping[Recompute, Feature]
    tensor_parallel: Feature
    context_parallel: Feature
    expert_parallel: Feature
    sequence_parallel: Feature  # norms' activations split by tp (not a Layout knob: exported)
    uneven_stages: Feature  # layers that do not split evenly over pp * vpp chunks
    # Engine features a Layout cannot express (DualPipeV, GPipe, Ulysses, ...): recorded so
    # that nobody maps them by accident.
    unmapped: tuple[Feature, ...] = ()

    def __post_init__(self) -> None:
        missing = (
            [s.value for s in Schedule if s not in self.schedules]
            + [f"zero {z}" for z in ZERO_STAGES if z not in self.zero]
            + [r.value for r in Recompute if r not in self.recompute]
        )
        if missing:
            raise ValueError(f"offers must say offered or absent for every value: {missing}")


# A rule's vectorised test: the rows of a grid of resolved layouts that satisfy it.
Check = Callable[[TrainingJob, LayoutGrid], np.ndarray]
# The numbers behind a violation of one layout, e.g. "8192 % 6 != 0".
Detail = Callable[[TrainingJob, Layout], str]


@dataclass(frozen=True)
class EngineRule:
    """A validity rule. `description` reads as a sentence naming the engine ("Megatron-LM
    requires ..."); `check` works on a grid of any length, one row included."""

    name: str
    description: str
    source: str
    check: Check
    detail: Detail


@dataclass(frozen=True)
class GradientSync:
    """How one ZeRO stage's gradients (and parameters) cross the data-parallel group."""

    zero: int
    timing: Timing  # without pipeline parallelism
    timing_with_pp: Timing
    collective: Collective
    reduce_bytes_per_value: int  # precision of the gradient reduction on the wire
    param_gather: Gather  # all-gather of (updated or sharded) parameters, without pp
    param_gather_with_pp: Gather
    source: str
    # with fp16 training, where the engine reduces in another precision than under bf16
    fp16_reduce_bytes_per_value: int | None = None

    def reduce_bytes_for(self, precision: str) -> int:
        if precision == "fp16" and self.fp16_reduce_bytes_per_value is not None:
            return self.fp16_reduce_bytes_per_value
        return self.reduce_bytes_per_value

    def timing_at(self, pp: int) -> Timing:
        return self.timing_with_pp if pp > 1 else self.timing

    def param_gather_at(self, pp: int) -> Gather:
        return self.param_gather_with_pp if pp > 1 else self.param_gather


def sync(
    zero: int,
    timing: Timing,
    collective: Collective,
    reduce_bytes_per_value: int,
    param_gather: Gather,
    source: str,
    timing_with_pp: Timing | None = None,
    param_gather_with_pp: Gather | None = None,
    fp16_reduce_bytes_per_value: int | None = None,
) -> GradientSync:
    """A GradientSync whose pipeline-parallel behaviour is the same unless given."""
    return GradientSync(
        zero=zero,
        timing=timing,
        timing_with_pp=timing if timing_with_pp is None else timing_with_pp,
        collective=collective,
        reduce_bytes_per_value=reduce_bytes_per_value,
        param_gather=param_gather,
        param_gather_with_pp=param_gather if param_gather_with_pp is None else param_gather_with_pp,
        source=source,
        fp16_reduce_bytes_per_value=fp16_reduce_bytes_per_value,
    )


@dataclass(frozen=True)
class Overlap:
    """A communication/computation overlap: the engine's default and what the export sets."""

    name: OverlapName
    default_on: bool
    exported_on: bool
    when: str  # the condition under which it can be on at all, in words
    source: str


@dataclass(frozen=True)
class CpExchange:
    """How the engine's context parallelism moves K and V: an all-gather before attention,
    or ring attention's point-to-point steps, which it may overlap with attention."""

    kind: Literal["all_gather", "p2p"]
    overlaps_attention: bool
    source: str


# The cost model's default: Llama 3's exposed all-gather (arXiv 2407.21783 section 3.3.2).
ALL_GATHER_CP = CpExchange("all_gather", False, "Llama 3 (arXiv 2407.21783), section 3.3.2")


@dataclass(frozen=True)
class EngineRuntime:
    """How the engine runs what it offers where that changes the price (read by the cost
    model through optimizer.engines.pricing): gradient synchronisation per ZeRO stage, the
    overlaps, and the context-parallel exchange."""

    gradient_sync: tuple[GradientSync, ...]
    overlaps: tuple[Overlap, ...]
    cp_exchange: CpExchange = ALL_GATHER_CP
    # what one ZeRO-3 all-gather covers: a layer (FSDP's per-block wrapping) or a submodule
    zero3_gather_unit: Literal["layer", "module"] = "layer"
    # which matmuls the engine's selective recompute replays: none (Korthikanti's attention
    # core) or every second one of a layer's forward (op-level selective checkpointing)
    selective_recompute_matmuls: Literal["none", "every_second"] = "none"
    # bytes per vocabulary logit the loss holds at its peak, where the engine's loss code
    # sets it (None: the profile's fp32 default)
    logits_bytes_per_value: float | None = None
    # HBM bytes the engine's loss kernels move per logit (None: the profile's default,
    # Megatron-Core's unfused cross entropy)
    loss_bytes_per_logit: float | None = None
    # whether rotary, the MLP activation and the attention output's copy run as eager ops
    # (a model in plain PyTorch without torch.compile) rather than fused kernels
    eager_pointwise: bool = False
    # whether a GEMM's input is kept for backward as its FP8 cast (Transformer Engine) or in
    # bf16 (torchao's Float8Linear), under precision fp8
    fp8_saved_inputs: bool = True
    # the share of a micro-batch's compute its per-micro-batch parameter gathers and gradient
    # reduce-scatters can hide under, where the engine's prefetch sets it (None: the profile's)
    zero3_overlap_fraction: float | None = None
    # whether a ZeRO-3 rank keeps its parameter shard in fp32 and steps it as the optimiser's
    # master (FSDP2's MixedPrecisionPolicy) instead of a bf16 shard beside an fp32 master
    zero3_fp32_shards: bool = False
    # whether, under precision fp8, the layers' weights are kept only as their FP8 casts
    # (Megatron-Core's fp8_param) rather than bf16 weights with FP8 copies beside them
    fp8_params: bool = False
    # which submodules its selective recompute checkpoints, in Megatron-Core's names (None:
    # the profile's own selective mode)
    selective_recompute_modules: tuple[str, ...] | None = None
    # whether its MoE combine keeps each expert copy's output to weight it by its routing
    # probability (False: the experts' activation applies the probabilities)
    moe_combine_saves_expert_outputs: bool = True
    # HBM bytes its optimiser step moves per parameter of the shard (None: the profile's
    # default, Megatron-Core's FusedAdam step), and whether it zeroes a gradient buffer each
    # step rather than freeing the gradients
    optimizer_step_bytes_per_param: float | None = None
    gradient_buffer_zeroed: bool = True
    # whether its ZeRO-3 gathers again in a replayed forward, and the reuse distance within
    # which it keeps a gathered parameter (None: it releases each after use)
    zero3_recompute_regathers: bool = False
    zero3_reuse_distance_params: float | None = None
    # per ZeRO stage 0, 1, 2: HBM bytes per parameter its optimiser adds each micro-batch
    # outside the GEMMs under bf16 with pp (None: none; DeepSpeed's BF16_Optimizer)
    bf16_pipelined_accumulation_bytes: tuple[float, float, float] | None = None
    # whether, under the interleaved schedule, its per-step gradient sync and parameter
    # gather run chunk by chunk beside the backward and forward (the dp_sync_per_chunk
    # assumption; Megatron-Core's DDP with --overlap-grad-reduce)
    dp_sync_per_chunk: bool = False

    def sync_for(self, zero: int) -> GradientSync | None:
        """The stage's synchronisation; None for a stage the engine does not offer."""
        return next((s for s in self.gradient_sync if s.zero == zero), None)

    def overlap(self, name: OverlapName) -> Overlap:
        return next(o for o in self.overlaps if o.name == name)


def model_named(job: TrainingJob) -> str:
    """The job's model name as an artefact's comment carries it. It is request text (or a
    Hugging Face config's own `_name_or_path`), so it is made one printable line whatever
    built the spec: it never starts a shell command or an override of its own. JSON
    artefacts write request text through json.dumps, which escapes it."""
    return one_line(job.model.name)


# (job, layout) -> artefact; the Megatron-Core engines also take a stage plan's rank_layers
Exporter = Callable[..., Artefact]


@dataclass(frozen=True)
class Engine:
    """One training engine at the version read; `get_engine` gives it at the version a
    request names, with that version's settings and the request's own in force."""

    name: str  # the request's `engine` value, without a version
    label: str  # for people: "Megatron-LM"
    version: str  # what was read: repository and commit, or the release
    offers: Offers
    rules: tuple[EngineRule, ...]
    runtime: EngineRuntime
    exporter: Exporter
    # The orders in which the engine lays the parallel groups on ranks, innermost first (a
    # Layout's `placement`): the searches under it choose among these; empty: any order.
    rank_orders: tuple[tuple[Dimension, ...], ...] = ()
    # the named settings a request may state (optimizer.engines.settings)
    settings: tuple[EngineSetting, ...] = ()
    # the versions a request may name, oldest first: the bare name is the last
    versions: tuple[EngineVersion, ...] = ()
    # how a release with no profile of its own is placed among them (versions.version_named):
    # by date, numbered releases dated here ((major, minor) -> "YYYY-MM"); None: by number
    release_months: Mapping[tuple[int, ...], str] | None = None
    # the version and settings in force (set by get_engine; runtime is already theirs)
    release: EngineVersion | None = None
    settings_in_force: Mapping[str, SettingValue] = field(default_factory=dict)

    def rule(self, name: str) -> EngineRule:
        return next(r for r in self.rules if r.name == name)

    @property
    def spec(self) -> str:
        """The engine as a request names it, with its version: `megatron@core_r0.14`."""
        return self.name if self.release is None else f"{self.name}@{self.release.name}"
