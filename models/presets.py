"""Model and GPU presets, kept as data (`presets/*.json`) with the source of every figure."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from models.errors import UnknownPreset
from models.hardware import GpuSpec
from models.hf_config import from_hf_config
from models.transformer import TransformerSpec


@cache
def _catalogue(kind: str) -> dict[str, dict[str, Any]]:
    text = resources.files("models").joinpath(f"presets/{kind}.json").read_text()
    return {name: entry for name, entry in json.loads(text).items() if not name.startswith("_")}


@cache
def _model_catalogue() -> dict[str, dict[str, Any]]:
    """`presets/models.json`'s models, then the published Hugging Face configs kept beside the
    published runs (`presets/published_runs.json`, `hf_configs`: deepseek-v3, gpt-oss-120b,
    qwen3-235b-a22b, ...), imported as any config.json is and named by their key: a user asks
    for a current model by name as the validation rows do."""
    imported = {
        name: {
            "source": entry["source"],
            "spec": from_hf_config(entry["config"]).model_copy(update={"name": name}).model_dump(),
        }
        for name, entry in published_hf_configs().items()
    }
    return _catalogue("models") | imported


def _lookup(kind: str, catalogue: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    key = name.strip().lower()
    if key not in catalogue:
        known = ", ".join(sorted(catalogue))
        raise UnknownPreset(f"unknown {kind} preset {name!r}; known: {known}")
    return catalogue[key]


def model_preset(name: str) -> TransformerSpec:
    return TransformerSpec.model_validate(_lookup("model", _model_catalogue(), name)["spec"])


def gpu_preset(name: str) -> GpuSpec:
    entry = _lookup("gpu", _catalogue("gpus"), name)
    return GpuSpec.model_validate({**entry["spec"], "source": entry["source"]})


def model_presets() -> dict[str, dict[str, Any]]:
    """Every model preset with its spec, parameter count and source."""
    return {
        name: {**entry, "total_params": model_preset(name).total_params}
        for name, entry in _model_catalogue().items()
    }


def gpu_presets() -> dict[str, dict[str, Any]]:
    return dict(_catalogue("gpus"))


@cache
def published_data() -> dict[str, Any]:
    """`presets/published_runs.json` as read: the published runs (optimizer.validation) and
    the Hugging Face configs they and the engines' named configs refer to (`hf_configs`)."""
    text = resources.files("models").joinpath("presets/published_runs.json").read_text()
    return dict(json.loads(text))


@cache
def gemm_throughput() -> dict[str, Any]:
    """`presets/gemm_throughput.json` as read: measured bf16 GEMM TFLOP/s by shape, one table a
    GPU architecture (`axes`, `tables`; the file's `_about` gives the source)."""
    text = resources.files("models").joinpath("presets/gemm_throughput.json").read_text()
    return dict(json.loads(text))


GEMM_TABLES = ("sm_90", "sm_100")  # the tables gemm_throughput.json holds


def published_hf_configs() -> dict[str, Any]:
    return dict(published_data().get("hf_configs", {}))


def published_gpus() -> dict[str, Any]:
    """The GPU specs of published clusters no preset describes, by name, each `{"source",
    "spec"}`: rows name them as they name presets."""
    return dict(published_data().get("gpus", {}))
