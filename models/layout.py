"""The parallel layout: one small validated value object that the rest of the code asks.

Degrees multiply to the GPU count (`tp * pp * cp * dp = gpus`); `dp` is derived from the
others and the cluster, so a layout is resolved against a job before it is priced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, Strict, field_validator

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.strict import SPEC_CONFIG, JsonInt

Dimension = Literal["tp", "cp", "pp", "dp"]
DIMENSIONS: tuple[Dimension, ...] = ("tp", "cp", "pp", "dp")
# Tensor innermost (NVLink), data outermost (communicates least often): the plate's rule.
DEFAULT_PLACEMENT: tuple[Dimension, ...] = ("tp", "cp", "pp", "dp")
MAX_DEGREE = 10_000_000


class Recompute(StrEnum):
    """Activation recomputation, ordered from cheapest in FLOPs to cheapest in memory."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class Schedule(StrEnum):
    """Pipeline schedule. `1f1b` is interleaved when vpp > 1 (Narayanan et al. SC21)."""

    ONE_F_ONE_B = "1f1b"
    ZERO_BUBBLE = "zero-bubble"  # ZB-H1 (Qi et al. 2024): 1F1B's memory, a third of its bubble
    DUALPIPE = "dualpipe"  # DeepSeek-V3: two directions, parameters twice, p + 1 in flight


# Enums arrive from JSON as their strings: the one conversion strict specs allow them.
RecomputeMode = Annotated[Recompute, Strict(False)]
ScheduleName = Annotated[Schedule, Strict(False)]


class Layout(BaseModel):
    """Parallel degrees and the per-step knobs that go with them."""

    model_config = SPEC_CONFIG

    tp: JsonInt = Field(1, gt=0, le=MAX_DEGREE, description="Tensor-parallel degree.")
    pp: JsonInt = Field(1, gt=0, le=MAX_DEGREE, description="Pipeline-parallel degree.")
    cp: JsonInt = Field(1, gt=0, le=MAX_DEGREE, description="Context-parallel degree.")
    dp: JsonInt | None = Field(
        None, gt=0, le=MAX_DEGREE, description="Data-parallel degree; derived when omitted."
    )
    vpp: JsonInt = Field(1, gt=0, le=1024, description="Interleaved chunks per pipeline device.")
    micro_batch: JsonInt = Field(1, gt=0, le=1_000_000, description="Sequences per micro-batch.")
    zero: JsonInt = Field(
        0, ge=0, le=3, description="ZeRO stage: 1 shards optimiser, 2 +grads, 3 +weights."
    )
    recompute: RecomputeMode = Recompute.NONE
    schedule: ScheduleName = Schedule.ONE_F_ONE_B
    ep: JsonInt = Field(
        1, gt=0, le=MAX_DEGREE, description="Expert-parallel degree, carved from dp * cp (MoE)."
    )
    placement: tuple[Dimension, ...] = Field(
        DEFAULT_PLACEMENT,
        strict=False,  # a JSON list
        min_length=4,
        max_length=4,
        description="Dimensions from the innermost (fastest links) outward, each once.",
    )

    @field_validator("placement")
    @classmethod
    def _placement_is_a_permutation(cls, placement: tuple[str, ...]) -> tuple[str, ...]:
        if sorted(placement) != sorted(DIMENSIONS):
            raise ValueError(
                f"placement must order each of {list(DIMENSIONS)} once, got {list(placement)}"
            )
        return placement

    @property
    def model_parallel_size(self) -> int:
        return self.tp * self.pp * self.cp

    @property
    def pp_enabled(self) -> bool:
        return self.pp > 1

    @property
    def data_parallel_size(self) -> int:
        """dp, which a resolved layout always carries."""
        if self.dp is None:
            raise InvalidSpec(
                "layout is not resolved against a cluster yet (dp unknown)", "layout.dp"
            )
        return self.dp

    def micro_batches(self, global_batch: int) -> int:
        """Micro-batches per replica per step, `m = global_batch / (dp * micro_batch)`."""
        return global_batch // (self.data_parallel_size * self.micro_batch)

    def group_span(self, dim: Dimension) -> int:
        """GPUs spanned by one `dim` group: its degree times those of the dimensions inside it."""
        return int(group_span(self.placement, dim, self.degree))

    def degree(self, dim: Dimension) -> int:
        return {"tp": self.tp, "pp": self.pp, "cp": self.cp, "dp": self.data_parallel_size}[dim]


def group_span(
    placement: Sequence[Dimension], dim: Dimension, degree: Callable[[Dimension], Any]
) -> Any:
    """GPUs spanned by one `dim` group under `placement` (innermost first): the product of the
    degrees of `dim` and of the dimensions placed inside it. `degree` may return ints or
    numpy arrays (a whole grid of layouts at once)."""
    inner = placement[: list(placement).index(dim) + 1]
    span = degree(inner[0])
    for other in inner[1:]:
        span = span * degree(other)
    return span


# The choices a layout makes besides the order of its groups (placement), in field order:
# the CLI's layout flags and validation's list of what two layouts do differently.
LAYOUT_CHOICES = tuple(name for name in Layout.model_fields if name != "placement")


def chunks_hold_layers(num_layers: Any, pp: Any, vpp: Any) -> Any:
    """Whether pp * vpp pipeline chunks can each hold a layer: no more chunks than layers, or
    exactly two more with pp > 1, the embedding and the loss each taking a chunk's slot
    (Megatron-Core's --account-for-embedding-in-pipeline-split and
    --account-for-loss-in-pipeline-split: transformer_config.py l.2371-2414 @d98e8a6;
    Megatron-Bridge's GB200 recipes run Llama 3.1 405B's 126 layers on 16 x 8 chunks so).
    Numbers or equally shaped arrays."""
    chunks = pp * vpp
    return (chunks <= num_layers) | ((pp > 1) & (chunks == num_layers + 2))


def resolve_layout(layout: Layout, job: TrainingJob) -> Layout:
    """Derive dp and check the layout against the job; every message names the numbers."""
    model, gpus, batch = job.model, job.cluster.gpus, job.training.global_batch
    tp, pp, cp = layout.tp, layout.pp, layout.cp
    product = f"tp({tp}) * pp({pp}) * cp({cp}) = {layout.model_parallel_size}"
    if gpus % layout.model_parallel_size:
        raise InvalidSpec(f"{product} does not divide gpus({gpus})", "layout")
    dp = gpus // layout.model_parallel_size
    if layout.dp is not None and layout.dp != dp:
        raise InvalidSpec(
            f"dp({layout.dp}) disagrees with gpus({gpus}) / ({product}) = {dp}", "layout.dp"
        )
    if model.num_attention_heads % tp:
        raise InvalidSpec(
            f"tp({tp}) does not divide num_attention_heads({model.num_attention_heads})",
            "layout.tp",
        )
    if job.training.seq_len % cp:
        raise InvalidSpec(f"cp({cp}) does not divide seq_len({job.training.seq_len})", "layout.cp")
    if pp > model.num_layers:
        raise InvalidSpec(f"pp({pp}) exceeds num_layers({model.num_layers})", "layout.pp")
    if layout.vpp > 1 and pp == 1:
        raise InvalidSpec(
            f"vpp({layout.vpp}) interleaves pipeline stages and needs pp > 1", "layout.vpp"
        )
    if not chunks_hold_layers(model.num_layers, pp, layout.vpp):
        raise InvalidSpec(
            f"pp({pp}) * vpp({layout.vpp}) = {pp * layout.vpp} chunks exceed num_layers({model.num_layers}):"
            " each chunk needs at least one layer (or the embedding or loss: num_layers + 2 chunks)",
            "layout.vpp",
        )
    if batch % (dp * layout.micro_batch):
        raise InvalidSpec(
            f"global_batch {batch} is not divisible by dp({dp}) * micro_batch({layout.micro_batch})",
            "training.global_batch",
        )
    _check_schedule_and_experts(layout, job, dp)
    return layout.model_copy(update={"dp": dp})


def _check_schedule_and_experts(layout: Layout, job: TrainingJob, dp: int) -> None:
    model = job.model
    if layout.schedule != Schedule.ONE_F_ONE_B and layout.vpp > 1:
        raise InvalidSpec(
            f"schedule {layout.schedule.value} is priced without interleaving; vpp({layout.vpp}) needs 1f1b",
            "layout.schedule",
        )
    if layout.schedule == Schedule.DUALPIPE and layout.pp % 2:
        raise InvalidSpec(
            f"dualpipe pairs pipeline stages from both ends: pp({layout.pp}) must be even",
            "layout.schedule",
        )
    if layout.ep == 1:
        return
    if not model.is_moe:
        raise InvalidSpec(f"ep({layout.ep}) needs a mixture-of-experts model", "layout.ep")
    if (dp * layout.cp) % layout.ep:
        raise InvalidSpec(
            f"ep({layout.ep}) must divide dp({dp}) * cp({layout.cp}) = {dp * layout.cp}",
            "layout.ep",
        )
    if model.num_experts % layout.ep:
        raise InvalidSpec(
            f"ep({layout.ep}) does not divide num_experts({model.num_experts})", "layout.ep"
        )
