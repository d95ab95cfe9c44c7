"""Engines that name the model's code by a config (a recipe, a registry function): which
project preset each named config trains, and the rule that the engine has code for the
job's model. A model no named config trains is exported as a custom model of the engine's
own (recipe overrides, a config module), so only what the engine's model code lacks
refuses it. Matching a named config is by shape, so a renamed copy of a preset still
matches and a custom model that shares a preset's name does not."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from models.job import TrainingJob
from models.layout import Layout
from models.presets import model_preset
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
    return next((c for c, name in configs.items() if shape(model_preset(name)) == wanted), None)


# The pieces of a model the engine's code lacks, each named ("mixture-of-experts layers").
Missing = Callable[[TransformerSpec], list[str]]


def model_code_rule(label: str, code: str, missing: Missing, source: str) -> EngineRule:
    """The engine has `code` (its model code, in words) for every piece of the job's model."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.full(grid.tp.shape, not missing(job.model))

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"{job.model.name} has {' and '.join(missing(job.model))}"

    return EngineRule(
        "model_architecture",
        f"{label} builds the model with {code}, which has no code for each of its pieces",
        source,
        check,
        detail,
    )


# A model's pieces that some engine's model code lacks, each in words and as a test.
PIECES: dict[str, tuple[str, Callable[[TransformerSpec], bool]]] = {
    "moe": ("mixture-of-experts layers", lambda m: m.is_moe),
    "mla": ("multi-head latent attention", lambda m: m.is_mla),
    "gelu_mlp": ("a non-gated (GeLU) MLP", lambda m: not m.gated_mlp),
    "head_dim": (
        "a head_dim other than hidden / heads",
        lambda m: m.head_dim_size != m.hidden_size // m.num_attention_heads,
    ),
    "window": ("sliding-window attention", lambda m: m.windowed_layers > 0),
    "chunked": ("chunked attention", lambda m: m.chunked_layers > 0),
    "glu_clamp": ("a clamped GLU", lambda m: m.glu_clamp is not None),
}


def lacking(*pieces: str, configs: Mapping[str, str] | None = None) -> Missing:
    """Which of `pieces` (keys of PIECES) the model has; none when a named config of
    `configs` trains exactly this model (its own code has them)."""

    def missing(model: TransformerSpec) -> list[str]:
        if configs is not None and config_for(model, configs) is not None:
            return []
        return [PIECES[p][0] for p in pieces if PIECES[p][1](model)]

    return missing
