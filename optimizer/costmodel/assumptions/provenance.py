"""Where a set of assumptions came from: not priced, read to warn a request that takes a
calibration beyond what it was fitted on."""

from __future__ import annotations

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


class ProvenanceAssumptions(BaseModel):
    """What the assumptions say about themselves."""

    model_config = SPEC_CONFIG

    calibrated_on: CalibrationProvenance | None = Field(
        None,
        description=(
            "Written by `layoutopt calibrate` (and POST /calibrate): the GPUs, engines and "
            "number of the runs the file's fitted values come from. Not priced: a request on "
            "another GPU or under another engine is warned that the fit may not carry "
            "(docs/validation.md, 'Calibrated on 3 rows per engine': a fit on one GPU's rows "
            "can price another GPU's worse than the defaults)."
        ),
    )
