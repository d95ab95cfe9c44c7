"""Profile `standard`, selective recompute by module: what Megatron-Core's `recompute_modules`
drop from a layer's saved activations and which matmuls they run again (docs/cost-model.md,
"Selective recompute by module").

Megatron-Core checkpoints the submodules its list names (NVIDIA/Megatron-LM@d98e8a6
megatron/core/transformer/transformer_config.py l.560-583; default ["core_attn"], l.1940-1941).
What each one frees depends on the layer as its Transformer Engine spec builds it
(megatron/core/models/gpt/gpt_layer_specs.py): the input norm is fused into the QKV linear
(TELayerNormColumnParallelLinear), which saves its output for the weight gradient, unless the
layer has multi-latent attention, whose down-projections read a separate TENorm; the pre-MLP
norm is a separate TENorm only in an MoE layer (the router reads it too). So "layernorm" frees
only the separate norms' outputs. Widths are per token and layer, averaged over dense and MoE
layers, in bf16 bytes before tp and cp split them, as `memory.layer_activation_bytes_per_token`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from models.transformer import TransformerSpec
from optimizer.costmodel.standard.memory import (
    BF16_BYTES,
    mlp_activation_bytes,
    routed_copy_bytes_per_token,
)


@dataclass(frozen=True)
class ModuleDrop:
    """What a module list changes in a layer under selective recompute."""

    dropped_bytes_per_token: float  # saved activations it frees
    norm_outputs_dropped_bytes_per_token: float  # of which the norms' outputs
    kept_norm_outputs_feeding_gemms: float  # norm outputs still saved, per token (count)
    kept_activation_width: float  # MLP activation outputs still saved (width per token)
    replayed_matmul_share: float  # share of the layers' forward matmul FLOPs run again


def module_drop(
    model: TransformerSpec, modules: Collection[str], combine_saves_outputs: bool = True
) -> ModuleDrop:
    """The activations `modules` free and the matmuls they replay, module by module:
    core_attn: only unfused scores (memory.attention_score_bytes_per_token), no matmul;
    layernorm: the separate norms' outputs (2h each); moe_act: the routed experts'
    activation outputs (2 f_e a copy); mla_up_proj: the up-projected Q, K and V (the
    2(q + kv) the layer counts) and their up-projections' forward; mlp: a dense layer's MLP
    intermediates and forward; shared_experts: the shared experts'; moe: the whole MoE
    layer's (its routed copies, every expert's intermediates) and its experts' and router's
    forward."""
    h, share = model.hidden_size, model.moe_layer_share
    dense_share = 1.0 - share
    f_e = model.expert_ffn_hidden_size or 0
    routed, shared = model.experts_per_token * f_e, model.num_shared_experts * f_e
    whole_moe, routed_act = "moe" in modules, "moe_act" in modules or "moe" in modules
    shared_gone = "shared_experts" in modules or whole_moe
    separate_norms = (1.0 if model.is_mla else 0.0) + share
    norms = 2 * h * separate_norms if "layernorm" in modules else 0.0
    up_projected = "mla_up_proj" in modules and model.is_mla  # no up-projection without MLA
    attention = 2 * (model.q_width + model.kv_width) if up_projected else 0.0
    # a dense MLP's checkpoint starts before its fused norm: the norm's output goes too
    dense_mlp = mlp_activation_bytes(model.ffn_hidden_size, model.gated_mlp) + 2 * h
    mlp = dense_share * dense_mlp if "mlp" in modules else 0.0
    experts = share * (
        mlp_activation_bytes(routed, model.gated_mlp)
        if whole_moe
        else (BF16_BYTES * routed if routed_act else 0.0)
    )
    experts += share * mlp_activation_bytes(shared, model.gated_mlp) if shared_gone else 0.0
    experts += routed_copy_bytes_per_token(model, combine_saves_outputs) if whole_moe else 0.0
    # norm outputs a GEMM still saves (under fp8 as its cast): the fused input norm's always,
    # a dense layer's pre-MLP one unless its MLP is checkpointed, an MoE one's unless freed
    kept_norms = (
        (0.0 if "layernorm" in modules and model.is_mla else 1.0)
        + dense_share * ("mlp" not in modules)
        + share * ("layernorm" not in modules and not whole_moe)
    )
    kept_act = (
        dense_share * model.ffn_hidden_size * ("mlp" not in modules)
        + share * routed * (not routed_act)
        + share * shared * (not shared_gone)
    )
    return ModuleDrop(
        dropped_bytes_per_token=norms + attention + mlp + experts,
        norm_outputs_dropped_bytes_per_token=norms,
        kept_norm_outputs_feeding_gemms=kept_norms,
        kept_activation_width=kept_act,
        replayed_matmul_share=_replayed_params(model, modules) / model.active_layer_params,
    )


def _replayed_params(model: TransformerSpec, modules: Collection[str]) -> float:
    """Parameters (forward FLOPs / 2 a token) of the matmuls the modules run again, over all
    layers."""
    moe_layers = model.num_moe_layers
    dense_layers = model.num_layers - moe_layers
    replayed = 0.0
    if "mla_up_proj" in modules and model.kv_lora_rank is not None:
        a, qk = model.num_attention_heads, model.qk_head_dim_size
        rope = model.qk_rope_head_dim or 0
        queries = 0 if model.q_lora_rank is None else model.q_lora_rank * a * qk
        keys_values = model.kv_lora_rank * a * (qk - rope + model.v_head_dim_size)
        replayed += model.num_layers * (queries + keys_values)
    if "mlp" in modules:
        replayed += dense_layers * model.mlp_matrices * model.hidden_size * model.ffn_hidden_size
    if "moe" in modules:
        replayed += moe_layers * (model.moe_layer_active_params - model.attention_params_per_layer)
    elif "shared_experts" in modules:
        replayed += moe_layers * model.num_shared_experts * model.expert_params
    return replayed
