"""Model and GPU presets, kept as data (`presets/*.json`) with the source of every figure."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from models.errors import UnknownPreset
from models.hardware import GpuSpec
from models.transformer import TransformerSpec


@cache
def _catalogue(kind: str) -> dict[str, dict[str, Any]]:
    text = resources.files("models").joinpath(f"presets/{kind}.json").read_text()
    return {name: entry for name, entry in json.loads(text).items() if not name.startswith("_")}


def _lookup(kind: str, name: str) -> dict[str, Any]:
    catalogue = _catalogue(kind)
    key = name.strip().lower()
    if key not in catalogue:
        known = ", ".join(sorted(catalogue))
        raise UnknownPreset(f"unknown {kind[:-1]} preset {name!r}; known: {known}")
    return catalogue[key]


def model_preset(name: str) -> TransformerSpec:
    return TransformerSpec.model_validate(_lookup("models", name)["spec"])


def gpu_preset(name: str) -> GpuSpec:
    entry = _lookup("gpus", name)
    return GpuSpec.model_validate({**entry["spec"], "source": entry["source"]})


def model_presets() -> dict[str, dict[str, Any]]:
    """Every model preset with its spec, parameter count and source."""
    return {
        name: {**entry, "total_params": model_preset(name).total_params}
        for name, entry in _catalogue("models").items()
    }


def gpu_presets() -> dict[str, dict[str, Any]]:
    return dict(_catalogue("gpus"))
