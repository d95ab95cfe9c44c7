"""Families that name their mixture-of-experts keys their own way, rewritten into the names
models/hf_moe.py models, or refused where a key says something the spec cannot hold.

- ERNIE 4.5 MoE (`ernie4_5_moe`): `moe_num_experts` experts `moe_intermediate_size` wide,
  `moe_k` a token, `moe_num_shared_experts` shared ones in one MLP that many experts wide
  (DeepSeek's sizing); layer i is MoE when (i + 1) % `moe_layer_interval` == 0 and
  `moe_layer_start_index` <= i <= `moe_layer_end_index` (-1: the last layer), dense
  otherwise (transformers 5.25 models/ernie4_5_moe/modeling_ernie4_5_moe.py,
  Ernie4_5_MoeDecoderLayer and Ernie4_5_MoeSparseMoeBlock; configuration_ernie4_5_moe.py).
- Hunyuan-A13B (`hunyuan_v1_moe`): MoE in every layer, `num_experts` experts and one shared
  MLP, all `intermediate_size` wide, `moe_topk` a token; the counts may be per-layer lists
  (HunYuanMoEV1Gate reads `config.num_experts[layer_idx]`). transformers builds the shared MLP
  unconditionally and sizes every expert by `intermediate_size` (modeling_hunyuan_v1_moe.py,
  HunYuanMoEV1Moe and HunYuanMoEV1Experts), whatever `num_shared_expert` and
  `moe_intermediate_size` say: a config whose own values differ is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from models.errors import InvalidSpec
from models.hf_moe import refusal

Config = Mapping[str, Any]


def with_modelled_names(config: Config) -> Config:
    """`config` with its family's own MoE keys rewritten into the modelled ones."""
    rewrite = _FAMILY_REWRITES.get(str(config.get("model_type")))
    return rewrite(config) if rewrite else config


# What Ernie4_5_MoeConfig takes when config.json omits a key (its class defaults, the 21B-A3B
# shape): every ernie4_5_moe model is an MoE one
_ERNIE_DEFAULTS = {
    "moe_num_experts": 64,
    "moe_k": 6,
    "moe_num_shared_experts": 2,
    "moe_layer_start_index": 1,
    "moe_layer_end_index": -1,
    "moe_layer_interval": 1,
    "moe_intermediate_size": 1536,
}
# ERNIE keys that change no parameter or FLOP count: the router's kind (moe_gate), its
# balancing bias (moe_use_aux_free), the routing weights' normaliser floor (moe_norm_min);
# moe_capacity is checked, then dropped
_ERNIE_ROUTING_KEYS = ("moe_capacity", "moe_gate", "moe_use_aux_free", "moe_norm_min")


def _ernie(config: Config) -> Config:
    given = {**_ERNIE_DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
    layers, experts = _count(given, "num_hidden_layers"), given["moe_num_experts"]
    if given["moe_layer_end_index"] not in (-1, layers - 1) or given["moe_layer_interval"] != 1:
        raise refusal(
            given,
            ["moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval"],
            "MoE layers other than every layer from the start index to the last, the only mix "
            "of dense and MoE layers the spec models besides Llama 4's",
        )
    _refuse_dropping_capacity(given, experts)
    return {
        **_without(config, (*_ERNIE_DEFAULTS, *_ERNIE_ROUTING_KEYS)),
        "n_routed_experts": experts,
        "num_experts_per_tok": given["moe_k"],
        "n_shared_experts": given["moe_num_shared_experts"],
        "first_k_dense_replace": given["moe_layer_start_index"],
        "moe_intermediate_size": given["moe_intermediate_size"],
    }


def _refuse_dropping_capacity(config: Config, experts: Any) -> None:
    """ERNIE's configs carry Paddle's capacity factors (`moe_capacity`, e.g. [64, 64, 64]);
    transformers routes without a capacity. A factor of at least the expert count gives
    every expert room for every token, so none is dropped and the dropless price holds; a
    smaller one could drop tokens, which the spec does not model."""
    capacity = config.get("moe_capacity")
    if capacity is None:
        return
    factors = capacity if isinstance(capacity, list) else [capacity]
    if not all(isinstance(f, int | float) and f >= experts for f in factors):
        raise refusal(
            config,
            ["moe_capacity", "moe_num_experts"],
            "a capacity that may drop tokens (a factor below the expert count), which the "
            "spec, dropless, does not model",
        )


def _hunyuan(config: Config) -> Config:
    """HunYuanMoEV1Config's defaults where config.json is silent: one expert, top 1."""
    width = config.get("intermediate_size")
    shared = _same_in_every_layer(config, "num_shared_expert")
    expert_width = _same_in_every_layer(config, "moe_intermediate_size")
    if shared not in (None, 1) or expert_width not in (None, width):
        raise refusal(
            config,
            ["num_shared_expert", "moe_intermediate_size", "intermediate_size"],
            "shared experts or expert widths other than the one shared MLP and the "
            "intermediate_size that transformers' Hunyuan MoE layer builds",
        )
    if config.get("use_cla"):
        raise refusal(config, ["use_cla"], "keys and values shared across layers")
    return {
        **_without(config, ("num_experts", "moe_topk", "num_shared_expert", "use_cla")),
        "num_experts": _same_in_every_layer(config, "num_experts") or 1,
        "num_experts_per_tok": _same_in_every_layer(config, "moe_topk") or 1,
        "n_shared_experts": 1,
        "moe_intermediate_size": width,
    }


def _same_in_every_layer(config: Config, key: str) -> Any:
    """A count given once or once a layer: the per-layer lists must agree."""
    value = config.get(key)
    if not isinstance(value, list):
        return value
    if not value or any(item != value[0] for item in value):
        raise refusal(config, [key], "a different value in different layers")
    return value[0]


def _count(config: Config, key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidSpec(f"config.json: {key} must be a whole number", "model")
    return value


def _without(config: Config, keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key not in keys}


_FAMILY_REWRITES: dict[str, Callable[[Config], Config]] = {
    "ernie4_5_moe": _ernie,
    "hunyuan_v1_moe": _hunyuan,
}
