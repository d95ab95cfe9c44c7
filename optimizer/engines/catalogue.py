"""Engines that pick the model by a named config (a recipe, a registry function) rather than
by its shape: which project preset each config trains, and the rule that the job's model is
one of them. Matching is by shape, so a renamed copy of a preset still matches and a custom
model that shares a preset's name does not."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from models.job import TrainingJob
from models.layout import Layout
from models.presets import reference_model
from models.transformer import TransformerSpec
from optimizer.costmodel import LayoutGrid

from .base import EngineRule


def shape(model: TransformerSpec) -> dict[str, object]:
    """What the model is, whatever its name and however it is spelt: a head_dim left out is
    hidden / heads (a Hugging Face config.json writes it; the presets leave it out)."""
    return model.model_dump(exclude={"name"}) | {"head_dim": model.head_dim_size}


def config_for(model: TransformerSpec, configs: Mapping[str, str]) -> str | None:
    """The engine config (key of `configs`, which maps config -> the preset or published
    Hugging Face config it trains) training `model`."""
    wanted = shape(model)
    return next((c for c, name in configs.items() if shape(reference_model(name)) == wanted), None)


def model_has_config(label: str, noun: str, configs: Mapping[str, str], source: str) -> EngineRule:
    """The job's model is one the engine has a `noun` (recipe, config) for."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.full(grid.tp.shape, config_for(job.model, configs) is not None)

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"{job.model.name} is none of {', '.join(sorted(set(configs.values())))}"

    return EngineRule(
        "model_has_config",
        f"{label} picks the model by a named {noun}: it needs one for this model's shape",
        source,
        check,
        detail,
    )
