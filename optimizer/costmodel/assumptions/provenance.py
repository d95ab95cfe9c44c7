"""Where a set of assumptions came from: not priced, read to hold a calibration's fitted values
to the requests they were fitted for (optimizer/calibration/reach.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from models.strict import SPEC_CONFIG, JsonInt


class CalibrationProvenance(BaseModel):
    """The runs a calibrated assumptions file was fitted to, as `layoutopt calibrate` writes
    them beside the fitted values."""

    model_config = SPEC_CONFIG

    gpus: list[str] = Field(
        min_length=1, max_length=1000, description="The runs' GPU presets or names."
    )
    engines: list[str] = Field(
        min_length=1, max_length=1000, description="The engines the runs named."
    )
    # a JSON integer may be written 167.0 (JSON Schema counts it an integer): as every count
    runs: JsonInt = Field(ge=1, le=1_000_000, description="How many measured runs.")
    fitted: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="The assumptions the fit freed (the rest stated).",
    )
    # What bounds the fitted values' reach (optimizer/calibration/reach.py); a file written
    # before one was recorded is judged on what it records.
    engine_versions: list[str] | None = Field(
        None,
        max_length=1000,
        description="The engines the runs named, each at its version (`megatron@core_r0.20.0`).",
    )
    precisions: list[str] | None = Field(
        None, max_length=100, description="The runs' training precisions."
    )
    architectures: list[Literal["dense", "moe"]] | None = Field(
        None, max_length=2, description="Whether the runs' models were dense, MoE, or both."
    )
    seq_lens: list[JsonInt] | None = Field(
        None,
        max_length=1000,
        description="The runs' sequence lengths: a fitted attention efficiency applies between "
        "the least and the greatest.",
    )
    hidden_sizes: list[JsonInt] | None = Field(
        None,
        max_length=1000,
        description="The runs' models' hidden sizes: a fitted kernel efficiency applies between "
        "the least and the greatest.",
    )


class ProvenanceAssumptions(BaseModel):
    """What the assumptions say about themselves."""

    model_config = SPEC_CONFIG

    calibrated_on: CalibrationProvenance | None = Field(
        None,
        description=(
            "Written by `layoutopt calibrate` (and POST /calibrate): the GPUs, engines at their "
            "versions, precisions, dense or MoE models, sequence lengths, hidden sizes and number "
            "of the runs the file's fitted values come from. Not priced itself, it bounds the fitted "
            "values' reach: a request under another engine version, on another GPU, in another "
            "precision or of the other kind of model (and, for the kernel and attention "
            "efficiencies, at a hidden size or sequence length outside the runs') is priced with the default in place of each "
            "fitted value, and told so (docs/usage.md, 'calibration's reach')."
        ),
    )
