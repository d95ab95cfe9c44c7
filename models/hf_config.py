"""Import a Hugging Face `config.json` (Llama, Mistral, Qwen style) into a TransformerSpec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from models.errors import InvalidSpec
from models.transformer import TransformerSpec

# config.json key -> TransformerSpec field
_HF_KEYS = {
    "num_hidden_layers": "num_layers",
    "hidden_size": "hidden_size",
    "intermediate_size": "ffn_hidden_size",
    "num_attention_heads": "num_attention_heads",
    "vocab_size": "vocab_size",
}
# Keys that mark a mixture-of-experts config, which a dense spec would silently misprice.
_MOE_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")


def looks_like_hf_config(data: Mapping[str, Any]) -> bool:
    return "num_hidden_layers" in data and "hidden_size" in data


def from_hf_config(config: Mapping[str, Any]) -> TransformerSpec:
    """Map a config.json's fields; keys the cost model does not use are ignored."""
    missing = [key for key in _HF_KEYS if key not in config]
    if missing:
        raise InvalidSpec(f"config.json lacks {', '.join(missing)}", "model")
    moe = [key for key in _MOE_KEYS if config.get(key)]
    if moe:
        raise InvalidSpec(
            f"config.json describes a mixture-of-experts model ({moe[0]}={config[moe[0]]}); "
            "the dense transformer spec cannot price it",
            "model",
        )
    fields: dict[str, Any] = {field: config[key] for key, field in _HF_KEYS.items()}
    fields["num_kv_heads"] = config.get("num_key_value_heads") or config["num_attention_heads"]
    fields["tied_embeddings"] = bool(config.get("tie_word_embeddings", False))
    if config.get("head_dim"):
        fields["head_dim"] = config["head_dim"]
    name = config.get("_name_or_path") or config.get("model_type") or "hf-config"
    fields["name"] = str(name)[:200]
    try:
        return TransformerSpec.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        # Name the key as the user wrote it in config.json, not our field.
        where = {v: k for k, v in _HF_KEYS.items()}.get(field, field) or "model"
        raise InvalidSpec(f"config.json: {where}: {first['msg']}", "model") from None
