"""Import a Hugging Face `config.json` into a TransformerSpec: dense models of the families in
`hf_families.FAMILIES` (Llama, Mistral, Qwen, Gemma, Phi, GPT-NeoX, ...), mixture-of-experts in the
Mixtral, GPT-OSS, Qwen-MoE and DeepSeek styles (models/hf_moe.py; ERNIE 4.5's and Hunyuan's own
key names rewritten into them, models/hf_moe_aliases.py), and DeepSeek's multi-head
latent attention. `describe_import` says what was imported, for a user to check.

Sliding-window attention (`sliding_window`, and which layers use it: `layer_types`, or the
family's default) and Llama 4's chunked attention (`attention_chunk_size`) are imported and
priced. Not modelled, and not needed for the parameter
count: GPT-OSS's attention sinks; DeepSeek-V3's multi-token-prediction
module (num_nextn_predict_layers), which the published 671B leaves out as well
(deepseek-ai/DeepSeek-V3@9b4e978 README.md: "685B, which includes 671B of the Main Model
weights and 14B of the Multi-Token Prediction (MTP) Module weights")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from models.errors import InvalidSpec
from models.hf_families import FAMILIES
from models.hf_moe import moe_fields
from models.hf_moe_aliases import with_modelled_names
from models.text import one_line
from models.transformer import TransformerSpec

# config.json key -> TransformerSpec field
_HF_KEYS = {
    "num_hidden_layers": "num_layers",
    "hidden_size": "hidden_size",
    "intermediate_size": "ffn_hidden_size",
    "num_attention_heads": "num_attention_heads",
    "vocab_size": "vocab_size",
}
# Multi-head latent attention's per-head widths (deepseek-ai/DeepSeek-V3@9b4e978
# inference/configs/config_671B.json names them the same).
_MLA_HEAD_KEYS = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _mlp_and_tying(config: Mapping[str, Any]) -> tuple[bool, bool]:
    """Gated MLP and tied embeddings: the config's own keys first (`gated_mlp` is ours, for
    families not listed), else its family's defaults. An unknown family is refused rather
    than guessed: a gated MLP has 1.5 times a plain one's parameters."""
    model_type = config.get("model_type")
    gated, tied = FAMILIES.get(str(model_type), (None, None))
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
            f"tying are known ({', '.join(sorted(FAMILIES))}); add "
            + " and ".join(f'"{key}": true or false' for key in missing)
            + " (gated_mlp: three MLP matrices as in SwiGLU, or two)",
            "model",
        )
    return bool(gated), bool(tied)


def _mla_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """DeepSeek V2/V3 multi-head latent attention, marked by kv_lora_rank. q_lora_rank null (or
    0 in DeepSeek's own configs/config_16B.json) means full-rank queries, as in V2-Lite. Every
    query head gets its own key and value, so num_key_value_heads does not apply."""
    if not config.get("kv_lora_rank"):
        return {}
    missing = [key for key in _MLA_HEAD_KEYS if config.get(key) is None]
    if missing:
        raise InvalidSpec(
            f"config.json: kv_lora_rank={config['kv_lora_rank']!r} (multi-head latent "
            f"attention) needs {', '.join(missing)}",
            "model",
        )
    fields = {key: config[key] for key in ("kv_lora_rank", *_MLA_HEAD_KEYS)}
    fields["q_lora_rank"] = config.get("q_lora_rank") or None
    fields["num_kv_heads"] = config["num_attention_heads"]
    return fields


# Which layers a window applies to when config.json gives `sliding_window` but no
# `layer_types` list: transformers' defaults for the family (huggingface/transformers
# configuration_gemma2.py l.95-98 and configuration_gpt_oss.py l.102-105: layers 0, 2, 4,
# ...; configuration_gemma3.py l.109-115: all but every `sliding_window_pattern`-th, 6 by
# default; Qwen2Config and Qwen3Config: the layers from `max_window_layers` on, 28 by default,
# and only with `use_sliding_window`). Any other family windows every layer (Mistral 7B v0.1,
# Phi-3, Starcoder2).
QWEN_FAMILIES = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")


ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")

# Families that window all but every n-th layer when config.json lists no layer_types: the
# default n, and whether `sliding_window_pattern` may set it (Gemma3Config and Cohere2Config
# read it; Olmo3Config's layer_types default has a fixed 4).
_LOCAL_BUT_EVERY_NTH = {
    "gemma3_text": (6, True),
    "cohere2": (4, True),
    "olmo3": (4, False),
    "exaone4": (4, True),
}


# Granite's sliding-window families window every layer but 0, 4, 8, ... when config.json
# lists no layer_types (GraniteSWAConfig and GraniteMoeSWAConfig: full where i % 4 == 0)
_FULL_EVERY_FOURTH_FROM_THE_FIRST = frozenset({"granite_swa", "granitemoe_swa"})


def _all_but_every_nth(layers: int, n: int) -> int:
    """Layers left when every n-th of them (n - 1, 2n - 1, ...) is taken out."""
    return layers - layers // n


def _pattern_period(pattern: Any) -> int:
    """A window pattern's period: an integer n, or EXAONE 4's string form ("LLLG": local
    layers then one global), the only form the spec models."""
    if isinstance(pattern, str):
        if pattern.count("G") != 1 or not pattern.endswith("G") or set(pattern) - {"L", "G"}:
            raise InvalidSpec(
                f"config.json: sliding_window_pattern {pattern!r} is not local layers then "
                "one global one, the only pattern the spec models; give layer_types instead",
                "model",
            )
        return len(pattern)
    return int(pattern)


def _windowed_layer_count(config: Mapping[str, Any]) -> int:
    layers = int(config["num_hidden_layers"])
    types = config.get("layer_types")
    if isinstance(types, list):
        return sum(kind == "sliding_attention" for kind in types)
    model_type = config.get("model_type")
    if model_type in ("gemma2", "gpt_oss"):
        return (layers + 1) // 2
    if model_type in _LOCAL_BUT_EVERY_NTH:
        default, from_config = _LOCAL_BUT_EVERY_NTH[model_type]
        pattern = (from_config and config.get("sliding_window_pattern")) or default
        return _all_but_every_nth(layers, _pattern_period(pattern))
    if model_type in QWEN_FAMILIES:
        return max(layers - int(config.get("max_window_layers", 28)), 0)
    if model_type == "dots1":  # Dots1Config: windows from max_window_layers (62) on
        return max(layers - int(config.get("max_window_layers", 62)), 0)
    if model_type in _FULL_EVERY_FOURTH_FROM_THE_FIRST:  # layers 0, 4, 8, ... are full
        return layers - (layers + 3) // 4
    return layers


# Keys that mark an architecture the spec does not price, whatever else the config says: a
# user who adds gated_mlp and tie_word_embeddings to an unknown family must not get a silent
# count without them. DeepSeek-V3.2's sparse attention (its lightning indexer and top-k key
# selection: index_n_heads, index_head_dim, index_topk); Gemma 3n's AltUp, LAuReL and
# per-layer embeddings (and Gemma 4's); Qwen3-Next's and Qwen4's linear attention
# (linear_num_key_heads and the rest).
_UNPRICED_ARCHITECTURE_KEYS = {
    "index_topk": "DeepSeek sparse attention (its indexer and top-k key selection)",
    "index_n_heads": "DeepSeek sparse attention (its indexer and top-k key selection)",
    "altup_num_inputs": "Gemma 3n's AltUp",
    "laurel_rank": "Gemma 3n's LAuReL blocks",
    "hidden_size_per_layer_input": "per-layer embeddings (Gemma 3n, Gemma 4)",
    "linear_num_key_heads": "linear attention layers",
    "linear_num_value_heads": "linear attention layers",
}


def _refuse_unpriced_architectures(config: Mapping[str, Any]) -> None:
    found = {key: what for key, what in _UNPRICED_ARCHITECTURE_KEYS.items() if config.get(key)}
    if found:
        keys = ", ".join(f"{key}={config[key]!r}" for key in found)
        what = ", ".join(sorted(set(found.values())))
        raise InvalidSpec(
            f"config.json: {keys}: {what}, which the spec does not model; rather than price the "
            "model without it, the import stops here",
            "model",
        )


def _refuse_other_layer_types(config: Mapping[str, Any]) -> None:
    """Layers that are not softmax attention (Qwen3-Next's and MiniMax's linear attention,
    state-space blocks) have other projections and costs: refused, not priced as attention."""
    # MiniMax's remote-code configs list each layer's attention as 0 (lightning, a linear
    # attention) or 1 (softmax): MiniMax-M2's are all 1
    kinds = config.get("attn_type_list")
    if isinstance(kinds, list) and any(kind != 1 for kind in kinds):
        raise InvalidSpec(
            "config.json: attn_type_list has lightning (linear) attention layers (0), which "
            "the spec does not model; rather than price them as attention, the import stops "
            "here",
            "model",
        )
    types = config.get("layer_types")
    if not isinstance(types, list):
        return
    others = sorted({str(kind) for kind in types} - set(ATTENTION_LAYER_TYPES))
    if others:
        raise InvalidSpec(
            f"config.json: layer_types has {', '.join(others)} layers, which the spec does not "
            f"model (only {' and '.join(ATTENTION_LAYER_TYPES)}); rather than price them as "
            "attention, the import stops here",
            "model",
        )


# Windows a family's config class sets when config.json omits the key: Olmo3Config's,
# Cohere2Config's, Exaone4Config's, Dots1Config's and MinistralConfig's 4,096, Granite's SWA variants' 128.
_DEFAULT_WINDOWS = {
    "olmo3": 4096,
    "cohere2": 4096,
    "exaone4": 4096,
    "dots1": 4096,
    "ministral": 4096,
    "granite_swa": 128,
    "granitemoe_swa": 128,
}


def _window_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """Sliding-window attention: the window and how many layers use it. Qwen's and SmolLM3's
    configs carry a `sliding_window` that `use_sliding_window` (false by default) switches."""
    window = config.get("sliding_window", _DEFAULT_WINDOWS.get(str(config.get("model_type"))))
    off_by_default = config.get("model_type") in (*QWEN_FAMILIES, "smollm3")
    enabled = config.get("use_sliding_window", not off_by_default)
    if not window or not enabled:
        return {}
    return {"sliding_window": window, "sliding_window_layers": _windowed_layer_count(config)}


def _chunk_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """Llama 4's chunked attention: the chunk and how many layers use it. transformers'
    Llama4TextConfig writes `layer_types` ("chunked_attention" where `no_rope_layers` is 1,
    the RoPE layers); older configs give `no_rope_layers`, empty meaning its default, all but
    every `no_rope_layer_interval`-th (4) layer (configuration_llama4.py)."""
    chunk = config.get("attention_chunk_size")
    if not chunk:
        return {}
    layers = int(config["num_hidden_layers"])
    types, rope = config.get("layer_types"), config.get("no_rope_layers")
    if isinstance(types, list):
        count = sum(kind == "chunked_attention" for kind in types)
    elif isinstance(rope, list) and rope:
        count = sum(bool(flag) for flag in rope)
    else:
        count = _all_but_every_nth(layers, int(config.get("no_rope_layer_interval") or 4))
    return {"attention_chunk_size": chunk, "chunked_attention_layers": count}


# Spec fields read from config.json keys of other names than _HF_KEYS maps
_OTHER_KEYS = {"glu_clamp": "swiglu_limit"}


def looks_like_hf_config(data: Mapping[str, Any]) -> bool:
    """config.json carries `model_type`; a bare dict with its layer keys is taken as one too."""
    return "model_type" in data or ("num_hidden_layers" in data and "hidden_size" in data)


def from_hf_config(config: Mapping[str, Any]) -> TransformerSpec:
    """Map a config.json's fields; keys the cost model does not use are ignored. A
    multimodal config (Gemma 3, Mistral Small 3.1, Qwen2.5-VL, ...) nests its language model
    under `text_config`: that is imported, named so (its vision tower is not priced)."""
    text = config.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" not in config:
        name = config.get("_name_or_path") or config.get("model_type") or "hf-config"
        # the outer config's tying governs the model's head where the text config is silent
        outer = {k: config[k] for k in ("tie_word_embeddings",) if k in config}
        return from_hf_config({**outer, **text, "_name_or_path": f"{name} (text model only)"})
    _refuse_unpriced_architectures(config)
    missing = [key for key in _HF_KEYS if key not in config]
    if missing:
        message = f"config.json lacks {', '.join(missing)}"
        if config.get("model_type") not in FAMILIES:
            message += (
                f": model_type {config.get('model_type')!r} names its fields otherwise and is "
                f"not imported ({', '.join(sorted(FAMILIES))} are); give the model as a spec "
                "(num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_kv_heads, "
                "vocab_size, gated_mlp, tied_embeddings)"
            )
        raise InvalidSpec(message, "model")
    config = with_modelled_names(config)
    fields: dict[str, Any] = {field: config[key] for key, field in _HF_KEYS.items()}
    fields.update(moe_fields(config))
    fields["num_kv_heads"] = config.get("num_key_value_heads") or config["num_attention_heads"]
    fields["gated_mlp"], fields["tied_embeddings"] = _mlp_and_tying(config)
    mla = _mla_fields(config)
    # transformers' DeepseekV3Config also writes head_dim (= qk_rope_head_dim): not MLA's width
    if config.get("head_dim") and not mla:
        fields["head_dim"] = config["head_dim"]
    fields.update(mla)
    _refuse_other_layer_types(config)
    fields.update(_window_fields(config))
    fields.update(_chunk_fields(config))
    # GPT-OSS clamps its SwiGLU's halves: swiglu_limit, 7.0 when config.json omits it
    # (transformers' configuration_gpt_oss.py, GptOssConfig(swiglu_limit=7.0))
    limit = config.get("swiglu_limit", 7.0 if config.get("model_type") == "gpt_oss" else None)
    if limit:
        fields["glu_clamp"] = limit
    # the file's own label, not the user's words: made one printable line rather than refused
    name = config.get("_name_or_path") or config.get("model_type") or "hf-config"
    fields["name"] = one_line(str(name))
    try:
        return TransformerSpec.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        # Name the key as the user wrote it in config.json, not our field.
        where = {**{v: k for k, v in _HF_KEYS.items()}, **_OTHER_KEYS}.get(field, field) or "model"
        raise InvalidSpec(f"config.json: {where}: {first['msg']}", "model") from None


def describe_import(spec: TransformerSpec) -> str:
    """One line to check an import against the model card: the total and, for an MoE model,
    the active count both with the input embedding (as total_params counts) and without it
    (as DeepSeek and OpenAI publish theirs; see TransformerSpec.active_params)."""
    total = f"imported {spec.name}: {_billions(spec.total_params)} parameters"
    window = (
        f"; a {spec.sliding_window:,}-token sliding window on {spec.windowed_layers} of "
        f"{spec.num_layers} layers"
        if spec.windowed_layers
        else ""
    )
    if spec.chunked_layers and spec.attention_chunk_size is not None:
        window += (
            f"; {spec.attention_chunk_size:,}-token attention chunks on {spec.chunked_layers} "
            f"of {spec.num_layers} layers"
        )
    if not spec.is_moe:
        return f"{total} (dense: all active per token){window}"
    without_input = spec.active_params - spec.input_embedding_params
    return (
        f"{total}, {_billions(spec.active_params)} active per token "
        f"({_billions(without_input)} without the input embedding){window}"
    )


def _billions(count: int) -> str:
    return f"{count / 1e9:.2f}B"
