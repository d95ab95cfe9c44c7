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
    precision: Literal["bf16", "fp8", "mxfp8", "nvfp4"] = Field(
        "bf16",
        description="What the transformer layers' GEMMs run in, under Transformer Engine's "
        "recipe of that name: bf16; fp8 (per-tensor scaling, at the GPU's FP8 dense peak); "
        "mxfp8 (FP8 with an E8M0 scale per 32 values, at its MXFP8 peak: Blackwell, CDNA4); "
        "nvfp4 (FP4 E2M1 with an E4M3 scale per 16 values and an FP32 scale per tensor, at "
        "its NVFP4 peak: Blackwell). Attention and the output head stay bf16; a GPU without "
        "the format's peak refuses it. Profile standard only; MFU stays against the bf16 "
        "dense peak.",
    )

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len
