"""A training job: what is trained, on what, with which batch. Everything a layout is priced against."""

from __future__ import annotations

from pydantic import BaseModel

from models.hardware import ClusterSpec
from models.strict import SPEC_CONFIG
from models.training import TrainingSpec
from models.transformer import TransformerSpec


class TrainingJob(BaseModel):
    model_config = SPEC_CONFIG

    model: TransformerSpec
    cluster: ClusterSpec
    training: TrainingSpec
