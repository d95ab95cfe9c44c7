"""Import a Hugging Face `config.json` into a TransformerSpec: dense models of the families in
`_FAMILIES` (Llama, Mistral, Qwen, Gemma, Phi, GPT-NeoX, ...) and mixture-of-experts in the
Mixtral and DeepSeek (V2/V3) styles."""

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

# model_type -> (gated MLP, tie_word_embeddings when config.json omits it). config.json
# states neither the MLP's shape nor, when it equals the class default, the tying: both
# come from transformers' configuration_<type>.py and modeling_<type>.py. Gated: three
# matrices (gate, up, down; SwiGLU or GeGLU); plain: two (fc1/fc2, c_fc/c_proj).
_FAMILIES: dict[str, tuple[bool, bool]] = {
    "llama": (True, False),
    "mistral": (True, False),
    "mixtral": (True, False),
    "qwen2": (True, False),
    "qwen2_moe": (True, False),
    "qwen3": (True, False),
    "qwen3_moe": (True, False),
    "gemma": (True, True),
    "gemma2": (True, True),
    "gemma3_text": (True, True),
    "deepseek_v2": (True, False),
    "deepseek_v3": (True, False),
    "phi3": (True, False),
    "olmo": (True, False),
    "olmo2": (True, False),
    "granite": (True, False),
    "cohere": (True, True),
    "stablelm": (True, False),
    "phi": (False, False),
    "gpt_neox": (False, False),
    "starcoder2": (False, True),
}


def _mlp_and_tying(config: Mapping[str, Any]) -> tuple[bool, bool]:
    """Gated MLP and tied embeddings: the config's own keys first (`gated_mlp` is ours, for
    families not listed), else its family's defaults. An unknown family is refused rather
    than guessed: a gated MLP has 1.5 times a plain one's parameters."""
    model_type = config.get("model_type")
    gated, tied = _FAMILIES.get(str(model_type), (None, None))
    gated = config.get("gated_mlp", gated)
    tied = config.get("tie_word_embeddings", tied)
    if gated is None or tied is None:
        missing = [
            key
            for key, value in (("gated_mlp", gated), ("tie_word_embeddings", tied))
            if value is None
        ]
        raise InvalidSpec(
            f"config.json: model_type {model_type!r} is not a family whose MLP and embedding "
            f"tying are known ({', '.join(sorted(_FAMILIES))}); add "
            + " and ".join(f'"{key}": true or false' for key in missing)
            + " (gated_mlp: three MLP matrices as in SwiGLU, or two)",
            "model",
        )
    return bool(gated), bool(tied)


def _mixtral_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """Mixtral: every layer is MoE and its experts are intermediate_size wide."""
    return {
        "num_experts": config["num_local_experts"],
        "experts_per_token": config.get("num_experts_per_tok", 2),
        "expert_ffn_hidden_size": config["intermediate_size"],
    }


def _deepseek_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """DeepSeek V2/V3: the first `first_k_dense_replace` layers are dense (intermediate_size
    wide), the rest MoE with moe_intermediate_size experts plus n_shared_experts shared ones.
    Multi-head latent attention is priced as multi-head attention of hidden/heads width."""
    if config.get("moe_layer_freq", 1) != 1:
        raise InvalidSpec(
            f"config.json: moe_layer_freq={config['moe_layer_freq']} (MoE every few layers) is "
            "not modelled; only every layer after first_k_dense_replace",
            "model",
        )
    missing = [k for k in ("moe_intermediate_size", "num_experts_per_tok") if k not in config]
    if missing:
        raise InvalidSpec(f"config.json lacks {', '.join(missing)} for its experts", "model")
    return {
        "num_experts": config["n_routed_experts"],
        "experts_per_token": config["num_experts_per_tok"],
        "expert_ffn_hidden_size": config["moe_intermediate_size"],
        "num_shared_experts": config.get("n_shared_experts") or 0,
        "dense_layers": config.get("first_k_dense_replace") or 0,
    }


def _moe_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    moe = [key for key in _MOE_KEYS if config.get(key)]
    if not moe:
        return {}
    if moe[0] == "num_local_experts":
        return _mixtral_fields(config)
    if moe[0] == "n_routed_experts":
        return _deepseek_fields(config)
    raise InvalidSpec(
        f"config.json describes a mixture-of-experts model ({moe[0]}={config[moe[0]]}) in a style "
        "not imported yet (Mixtral's num_local_experts and DeepSeek's n_routed_experts are); "
        "give the MoE fields (num_experts, experts_per_token, expert_ffn_hidden_size) explicitly",
        "model",
    )


def looks_like_hf_config(data: Mapping[str, Any]) -> bool:
    """config.json carries `model_type`; a bare dict with its layer keys is taken as one too."""
    return "model_type" in data or ("num_hidden_layers" in data and "hidden_size" in data)


def from_hf_config(config: Mapping[str, Any]) -> TransformerSpec:
    """Map a config.json's fields; keys the cost model does not use are ignored."""
    missing = [key for key in _HF_KEYS if key not in config]
    if missing:
        message = f"config.json lacks {', '.join(missing)}"
        if config.get("model_type") not in _FAMILIES:
            message += (
                f": model_type {config.get('model_type')!r} names its fields otherwise and is "
                f"not imported ({', '.join(sorted(_FAMILIES))} are); give the model as a spec "
                "(num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_kv_heads, "
                "vocab_size, gated_mlp, tied_embeddings)"
            )
        raise InvalidSpec(message, "model")
    fields: dict[str, Any] = {field: config[key] for key, field in _HF_KEYS.items()}
    fields.update(_moe_fields(config))
    fields["num_kv_heads"] = config.get("num_key_value_heads") or config["num_attention_heads"]
    fields["gated_mlp"], fields["tied_embeddings"] = _mlp_and_tying(config)
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
