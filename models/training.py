"""The training step being laid out."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from models.strict import SPEC_CONFIG, JsonInt


class TrainingSpec(BaseModel):
    """One optimiser step: `global_batch` sequences of `seq_len` tokens."""

    model_config = SPEC_CONFIG

    global_batch: JsonInt = Field(2048, gt=0, le=100_000_000, description="Sequences per step.")
    seq_len: JsonInt = Field(8192, gt=0, le=100_000_000, description="Tokens per sequence.")
    precision: Literal["bf16", "fp8"] = Field(
        "bf16",
        description="What the transformer layers' GEMMs run in: bf16, or fp8 (Transformer "
        "Engine's, at the GPU's FP8 dense peak; attention and the output head stay bf16). "
        "Profile standard only; MFU stays against the bf16 dense peak.",
    )

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len
