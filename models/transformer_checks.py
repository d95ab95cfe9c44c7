"""The consistency rules of a transformer spec, checked when one is built
(`TransformerSpec._is_consistent`): each raises ValueError with what is wrong, in the
fields' own names, which pydantic reports as the spec's validation error."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.transformer import TransformerSpec


def check_consistent(spec: TransformerSpec) -> None:
    heads_are_consistent(spec)
    mla_is_consistent(spec)
    moe_is_consistent(spec)
    window_is_consistent(spec)
    chunks_are_consistent(spec)


def heads_are_consistent(spec: TransformerSpec) -> None:
    a, k = spec.num_attention_heads, spec.num_kv_heads
    if a % k:
        raise ValueError(
            f"num_attention_heads({a}) is not divisible by num_kv_heads({k}): "
            "grouped-query attention shares each KV head among a whole number of query heads"
        )
    # Under MLA the head widths are the MLA fields', not hidden_size / heads.
    if spec.head_dim is None and not spec.is_mla and spec.hidden_size % a:
        raise ValueError(
            f"hidden_size({spec.hidden_size}) is not divisible by num_attention_heads({a}); "
            "give head_dim explicitly if the model's heads are not hidden_size / heads wide"
        )


def mla_is_consistent(spec: TransformerSpec) -> None:
    latent = {
        "q_lora_rank": spec.q_lora_rank,
        "qk_nope_head_dim": spec.qk_nope_head_dim,
        "qk_rope_head_dim": spec.qk_rope_head_dim,
        "v_head_dim": spec.v_head_dim,
    }
    if not spec.is_mla:
        given = [name for name, value in latent.items() if value is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)} describe multi-head latent attention and need kv_lora_rank"
            )
        return
    missing = [name for name, value in latent.items() if value is None and name != "q_lora_rank"]
    if missing:
        raise ValueError(f"multi-head latent attention (kv_lora_rank) needs {', '.join(missing)}")
    if spec.head_dim is not None:
        raise ValueError(
            "head_dim does not apply under multi-head latent attention: its heads are "
            "qk_nope_head_dim + qk_rope_head_dim wide for queries and keys, v_head_dim for values"
        )
    if spec.qk_head_dim_size == 0:
        raise ValueError("qk_nope_head_dim + qk_rope_head_dim must be positive")
    # MLA up-projects one key and value per query head (DeepSeek-V3@9b4e978
    # inference/model.py l.432, 476): there are no shared KV heads to group.
    if spec.num_kv_heads != spec.num_attention_heads:
        raise ValueError(
            f"num_kv_heads({spec.num_kv_heads}) must equal num_attention_heads"
            f"({spec.num_attention_heads}) under multi-head latent attention: every query "
            "head gets its own key and value from the latent"
        )


def moe_is_consistent(spec: TransformerSpec) -> None:
    if not spec.num_experts:
        return
    if not 1 <= spec.experts_per_token <= spec.num_experts:
        raise ValueError(
            f"experts_per_token({spec.experts_per_token}) must be 1..num_experts({spec.num_experts})"
        )
    if spec.expert_ffn_hidden_size is None:
        raise ValueError("an MoE model needs expert_ffn_hidden_size")
    if spec.dense_layers >= spec.num_layers:
        raise ValueError(
            f"dense_layers({spec.dense_layers}) leaves no MoE layer of num_layers({spec.num_layers})"
        )
    if spec.moe_layer_interval > 1 and spec.dense_layers:
        raise ValueError(
            f"dense_layers({spec.dense_layers}) and moe_layer_interval"
            f"({spec.moe_layer_interval}): leading dense layers or interleaved ones, not both"
        )
    if spec.moe_layer_interval > spec.num_layers:
        raise ValueError(
            f"moe_layer_interval({spec.moe_layer_interval}) leaves no MoE layer of "
            f"num_layers({spec.num_layers})"
        )


def window_is_consistent(spec: TransformerSpec) -> None:
    count = spec.sliding_window_layers
    if count is None:
        return
    if spec.sliding_window is None:
        raise ValueError("sliding_window_layers needs sliding_window, the window's length")
    if count > spec.num_layers:
        raise ValueError(
            f"sliding_window_layers({count}) is more than num_layers({spec.num_layers})"
        )


def chunks_are_consistent(spec: TransformerSpec) -> None:
    chunked = spec.chunked_attention_layers
    if chunked is not None and spec.attention_chunk_size is None:
        raise ValueError("chunked_attention_layers needs attention_chunk_size, the chunk")
    if spec.windowed_layers + spec.chunked_layers > spec.num_layers:
        raise ValueError(
            f"windowed ({spec.windowed_layers}) and chunked ({spec.chunked_layers}) "
            f"attention layers are more than num_layers({spec.num_layers})"
        )
