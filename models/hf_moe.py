"""The mixture-of-experts keys of a Hugging Face `config.json`: which keys mark which style,
and a refusal, naming the keys, of every layout the spec does not model.

The styles, as transformers' modeling_<type>.py files build them:
- Mixtral and GPT-OSS: `num_local_experts` experts, each `intermediate_size` wide, in every
  layer (MixtralSparseMoeBlock; openai/gpt-oss@7b58334 gpt_oss/torch/model.py l.275-309).
- Qwen2-MoE and Qwen3-MoE: `num_experts` experts `moe_intermediate_size` wide; dense layers
  (`intermediate_size`) where `mlp_only_layers` lists them or `decoder_sparse_step` skips;
  Qwen2-MoE adds one shared MLP `shared_expert_intermediate_size` wide (transformers v5.0.0
  Qwen3MoeConfig docs: "decoder_sparse_step: The frequency of the MoE layer").
  Transformers 5 may write the count as `num_local_experts`: `moe_intermediate_size`, not
  the count's name, says the experts are narrower than the dense MLP.
- DeepSeek V2/V3: `n_routed_experts` experts `moe_intermediate_size` wide plus
  `n_shared_experts` as wide; the first `first_k_dense_replace` layers dense, then MoE every
  `moe_layer_freq` layers (deepseek-ai/DeepSeek-V3@9b4e978 inference/model.py, Block).
- Newer transformers configs also list `mlp_layer_types`, "dense" or "sparse" per layer,
  taking priority over first_k_dense_replace (huggingface/transformers
  src/transformers/models/exaone_moe/modular_exaone_moe.py, ExaoneMoeConfig).
- Llama 4: `num_local_experts` experts `intermediate_size` wide and one shared expert as wide
  in each MoE layer (Llama4TextMoe builds `shared_expert` unconditionally); the MoE layers are
  `moe_layers`, by default every `interleave_moe_layer_step`-th from layer step - 1, the
  others dense MLPs `intermediate_size_mlp` wide (transformers configuration_llama4.py,
  Llama4TextConfig; modeling_llama4.py, Llama4TextDecoderLayer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.errors import InvalidSpec

# Keys that count routed experts (Mixtral/GPT-OSS, Qwen, DeepSeek) and the top-k.
ROUTED_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token")  # GPT-OSS writes both
# Family defaults for an omitted top-k: MixtralConfig(num_experts_per_tok=2).
_TOP_K_DEFAULTS = {"mixtral": 2}
_LAYOUT_KEYS = (
    "first_k_dense_replace",
    "moe_layer_freq",
    "mlp_only_layers",
    "decoder_sparse_step",
    "mlp_layer_types",
)
_SHARED_KEYS = ("n_shared_experts", "shared_expert_intermediate_size")
# Llama 4's interleaving of MoE and dense layers, and its dense layers' width
_INTERLEAVE_KEYS = ("moe_layers", "interleave_moe_layer_step", "intermediate_size_mlp")
# Families whose MoE layers hold shared experts that no key counts: Llama4TextMoe's one.
_SHARED_DEFAULTS = {"llama4_text": 1}
# Families whose config class makes leading layers dense when config.json names none:
# Glm4MoeLiteConfig's mlp_layer_types default, one dense layer then MoE (transformers 5.25
# models/glm4_moe_lite/configuration_glm4_moe_lite.py)
_DENSE_DEFAULTS = {"glm4_moe_lite": 1}
# Families that count experts as `num_experts` and size them by `intermediate_size`, with no
# moe_intermediate_size: OLMoE (OlmoeSparseMoeBlock builds each expert as OlmoeMLP(config))
# and FlexOlmo (its FlexOlmoMLP is OlmoeMLP).
_EXPERTS_AS_WIDE_AS_MLP = frozenset({"olmoe", "flex_olmo"})
_MODELLED = frozenset(
    {
        *ROUTED_KEYS,
        *TOP_K_KEYS,
        *_LAYOUT_KEYS,
        *_SHARED_KEYS,
        *_INTERLEAVE_KEYS,
        "moe_intermediate_size",
    }
)
# Keys that place or size experts without saying "expert" or "moe" in their names: other
# names for a dense prefix, a dense-layer list and a shared expert's width found in published
# configs (Llama 4's intermediate_size_mlp is modelled: _INTERLEAVE_KEYS)
# (a survey of config.json key names, index id 69497628760, table "mixture of experts").
_UNMODELLED_PLAIN = frozenset(
    {
        "num_dense_layers",
        "n_dense_first_layers",
        "dense_mlp_idx",
        "shared_intermediate_size",
    }
)


def moe_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """TransformerSpec's MoE fields from config.json; {} for a dense model."""
    unmodelled = [
        key
        for key, value in config.items()
        if key not in _MODELLED
        and value
        and ("expert" in key.lower() or "moe" in key.lower() or key in _UNMODELLED_PLAIN)
    ]
    if unmodelled:
        raise refusal(config, unmodelled, "mixture-of-experts keys this import does not model")
    routed = _routed(config)
    if routed is None:
        return {}
    width = _expert_width(config, routed)
    fields = {
        "num_experts": config[routed],
        "experts_per_token": _top_k(config),
        "expert_ffn_hidden_size": width,
        "num_shared_experts": _shared_experts(config, width),
        "dense_layers": _dense_layers(config),
    }
    interval = _moe_layer_interval(config)
    if interval > 1:
        fields["moe_layer_interval"] = interval
    if config.get("intermediate_size_mlp"):  # Llama 4: the dense layers' own width
        fields["ffn_hidden_size"] = config["intermediate_size_mlp"]
    return fields


def _moe_layer_interval(config: Mapping[str, Any]) -> int:
    """Llama 4's MoE every n-th layer (n - 1, 2n - 1, ...): `moe_layers` where given, which
    must be that pattern, else `interleave_moe_layer_step` (1: every layer)."""
    step = _integer(config, "interleave_moe_layer_step") or 1
    listed = config.get("moe_layers")
    if listed is None:
        return step
    layers = _integer(config, "num_hidden_layers")
    if isinstance(listed, list) and listed and _is_int(listed[0]) and listed[0] >= 0:
        step = listed[0] + 1
        if listed == list(range(step - 1, layers, step)):
            return step
    raise refusal(
        config,
        ["moe_layers", "interleave_moe_layer_step"],
        "MoE layers other than every n-th layer from layer n - 1, the only interleaving the "
        "spec models",
    )


def _routed(config: Mapping[str, Any]) -> str | None:
    """The key that counts routed experts; several must agree."""
    given = [key for key in ROUTED_KEYS if config.get(key)]
    if any(config[key] != config[given[0]] for key in given):
        raise refusal(config, given, "different numbers of routed experts")
    return given[0] if given else None


def _expert_width(config: Mapping[str, Any], routed: str) -> Any:
    if config.get("moe_intermediate_size"):
        return config["moe_intermediate_size"]
    if routed == "num_local_experts" or config.get("model_type") in _EXPERTS_AS_WIDE_AS_MLP:
        return config["intermediate_size"]  # Mixtral, GPT-OSS, OLMoE: experts as wide as the MLP
    raise refusal(config, [routed], "routed experts without moe_intermediate_size, their width")


def _top_k(config: Mapping[str, Any]) -> Any:
    given = [key for key in TOP_K_KEYS if config.get(key) is not None]
    if any(config[key] != config[given[0]] for key in given):
        raise refusal(config, given, "different numbers of experts per token")
    if given:
        return config[given[0]]
    default = _TOP_K_DEFAULTS.get(str(config.get("model_type")))
    if default is None:
        raise InvalidSpec("config.json lacks num_experts_per_tok for its experts", "model")
    return default


def _shared_experts(config: Mapping[str, Any], width: Any) -> int:
    """DeepSeek counts shared experts as wide as a routed one; Qwen2-MoE gives one shared MLP
    a width of its own, priced as that many routed-width experts (the same matrices and
    FLOPs: 3*h*(n*w) = n * 3*h*w), so it must be a whole multiple."""
    count, shared_width = (_integer(config, key) for key in _SHARED_KEYS)
    count = count or _SHARED_DEFAULTS.get(str(config.get("model_type")), 0)
    if count and shared_width:
        raise refusal(config, list(_SHARED_KEYS), "two ways of sizing the shared experts")
    if not shared_width:
        return count
    if not isinstance(width, int) or width <= 0 or shared_width % width:
        raise refusal(
            config,
            ["shared_expert_intermediate_size", "moe_intermediate_size"],
            "a shared expert that is not a whole number of routed ones",
        )
    return shared_width // width


def _dense_layers(config: Mapping[str, Any]) -> int:
    """The leading dense layers, the only dense-and-MoE mix the spec models. DeepSeek makes
    layer i MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0; Qwen when i is
    not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0; mlp_layer_types says it
    per layer."""
    first_k = _integer(config, "first_k_dense_replace")
    if config.get("first_k_dense_replace") is None and config.get("mlp_layer_types") is None:
        first_k = _DENSE_DEFAULTS.get(str(config.get("model_type")), 0)
    listed = _listed_dense_layers(config)
    if "mlp_layer_types" in config and config["mlp_layer_types"] is not None:
        first_k = 0  # mlp_layer_types takes priority over first_k_dense_replace
    dense = max([first_k, *(i + 1 for i in listed)])
    # leading iff the layers past the first k that must be dense are all listed
    leading = len({i for i in listed if i >= first_k}) == dense - first_k
    strided = [
        k for k in ("moe_layer_freq", "decoder_sparse_step") if config.get(k) not in (None, 1)
    ]
    if strided or not leading:
        raise refusal(
            config,
            [key for key in _LAYOUT_KEYS if key in config],
            "dense layers other than a leading run with MoE in every layer after it, the "
            "only mix the spec models",
        )
    return dense


def _listed_dense_layers(config: Mapping[str, Any]) -> set[int]:
    """Indices of layers named dense: Qwen's mlp_only_layers, or "dense" in mlp_layer_types."""
    only = config.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(_is_int(i) and i >= 0 for i in only):
        raise refusal(config, ["mlp_only_layers"], "not a list of layer indices")
    types = config.get("mlp_layer_types") or []
    if not isinstance(types, list) or not all(kind in ("dense", "sparse") for kind in types):
        raise refusal(config, ["mlp_layer_types"], 'not a list of "dense" and "sparse"')
    if types and len(types) != config.get("num_hidden_layers"):
        raise refusal(config, ["mlp_layer_types", "num_hidden_layers"], "a layer count apart")
    return set(only) | {i for i, kind in enumerate(types) if kind == "dense"}


def _integer(config: Mapping[str, Any], key: str) -> int:
    """A count config.json may give as null or omit (0 then)."""
    value = config.get(key)
    if value is None:
        return 0
    if not _is_int(value) or value < 0:
        raise refusal(config, [key], "not a count")
    return int(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def refusal(config: Mapping[str, Any], keys: list[str], problem: str) -> InvalidSpec:
    named = ", ".join(f"{key}={_shown(config.get(key))}" for key in keys)
    return InvalidSpec(
        f"config.json: {named}: {problem}; rather than guess, the import stops here: give the "
        "model as a spec (num_experts, experts_per_token, expert_ffn_hidden_size, "
        "num_shared_experts, dense_layers)",
        "model",
    )


def _shown(value: Any, limit_chars: int = 60) -> str:
    """A value as JSON-ish text, cut short: a per-layer list can run to hundreds of entries."""
    text = repr(value)
    return text if len(text) <= limit_chars else text[: limit_chars - 3] + "..."
