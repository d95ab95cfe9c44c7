"""The transformer being trained: a decoder spec (dense or mixture-of-experts) and its parameter counts."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from models.strict import SPEC_CONFIG, JsonInt

# Bounds that reject typos and absurd sizes while admitting every published model.
MAX_LAYERS = 10_000
MAX_HIDDEN = 1_000_000
MAX_VOCAB = 10_000_000


class TransformerSpec(BaseModel):
    """A decoder-only transformer with grouped-query attention and a SwiGLU MLP."""

    model_config = SPEC_CONFIG

    name: str = Field("custom", max_length=200)
    num_layers: JsonInt = Field(gt=0, le=MAX_LAYERS)
    hidden_size: JsonInt = Field(gt=0, le=MAX_HIDDEN)
    ffn_hidden_size: JsonInt = Field(gt=0, le=16 * MAX_HIDDEN)
    num_attention_heads: JsonInt = Field(gt=0, le=MAX_HIDDEN)
    num_kv_heads: JsonInt = Field(gt=0, le=MAX_HIDDEN)
    vocab_size: JsonInt = Field(gt=0, le=MAX_VOCAB)
    tied_embeddings: bool = False
    head_dim: JsonInt | None = Field(
        None, gt=0, le=MAX_HIDDEN, description="Defaults to hidden_size / num_attention_heads."
    )
    gated_mlp: bool = Field(
        True, description="SwiGLU (three h x f matrices); false for a GeLU MLP (two, as GPT-3)."
    )
    # Mixture of experts: 0 experts is a dense model and every field below is ignored.
    num_experts: JsonInt = Field(0, ge=0, le=100_000, description="Routed experts per MoE layer.")
    experts_per_token: JsonInt = Field(0, ge=0, le=100_000, description="Routed experts (top-k).")
    expert_ffn_hidden_size: JsonInt | None = Field(
        None, gt=0, le=16 * MAX_HIDDEN, description="FFN width of one expert."
    )
    num_shared_experts: JsonInt = Field(
        0, ge=0, le=1_000, description="Experts every token passes through (DeepSeek style)."
    )
    dense_layers: JsonInt = Field(
        0, ge=0, le=MAX_LAYERS, description="Leading layers with a dense MLP in an MoE model."
    )

    @model_validator(mode="after")
    def _heads_are_consistent(self) -> TransformerSpec:
        a, k = self.num_attention_heads, self.num_kv_heads
        if a % k:
            raise ValueError(
                f"num_attention_heads({a}) is not divisible by num_kv_heads({k}): "
                "grouped-query attention shares each KV head among a whole number of query heads"
            )
        if self.head_dim is None and self.hidden_size % a:
            raise ValueError(
                f"hidden_size({self.hidden_size}) is not divisible by num_attention_heads({a}); "
                "give head_dim explicitly if the model's heads are not hidden_size / heads wide"
            )
        return self._moe_is_consistent()

    def _moe_is_consistent(self) -> TransformerSpec:
        if not self.num_experts:
            return self
        if not 1 <= self.experts_per_token <= self.num_experts:
            raise ValueError(
                f"experts_per_token({self.experts_per_token}) must be 1..num_experts({self.num_experts})"
            )
        if self.expert_ffn_hidden_size is None:
            raise ValueError("an MoE model needs expert_ffn_hidden_size")
        if self.dense_layers >= self.num_layers:
            raise ValueError(
                f"dense_layers({self.dense_layers}) leaves no MoE layer of num_layers({self.num_layers})"
            )
        return self

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def head_dim_size(self) -> int:
        return (
            self.head_dim
            if self.head_dim is not None
            else self.hidden_size // self.num_attention_heads
        )

    @property
    def q_width(self) -> int:
        return self.num_attention_heads * self.head_dim_size

    @property
    def kv_width(self) -> int:
        """K and V together: `2*k*hd` values per token."""
        return 2 * self.num_kv_heads * self.head_dim_size

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def attention_params_per_layer(self) -> int:
        return self.hidden_size * (self.q_width + self.kv_width) + self.q_width * self.hidden_size

    @property
    def params_per_layer(self) -> int:
        """Q, K, V and output projections plus the (dense) MLP matrices; norms ignored.

        With head_dim = h / a and a SwiGLU MLP this is the spec's `h*(h + 2*k*hd) + h*h + 3*h*f`.
        """
        dense_mlp = self.mlp_matrices * self.hidden_size * self.ffn_hidden_size
        return self.attention_params_per_layer + dense_mlp

    @property
    def expert_params(self) -> int:
        """One expert's MLP matrices (0 for a dense model)."""
        if not self.is_moe or self.expert_ffn_hidden_size is None:
            return 0
        return self.mlp_matrices * self.hidden_size * self.expert_ffn_hidden_size

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.is_moe else 0

    @property
    def router_params(self) -> int:
        return self.hidden_size * self.num_experts

    @property
    def moe_layer_params(self) -> int:
        """Every parameter of one MoE layer: attention, router, routed and shared experts."""
        experts = (self.num_experts + self.num_shared_experts) * self.expert_params
        return self.attention_params_per_layer + self.router_params + experts

    @property
    def moe_layer_active_params(self) -> int:
        """The parameters one token multiplies in an MoE layer (top-k plus shared experts)."""
        experts = (self.experts_per_token + self.num_shared_experts) * self.expert_params
        return self.attention_params_per_layer + self.router_params + experts

    @property
    def layer_params(self) -> int:
        """Parameters of all transformer layers (dense and MoE)."""
        dense = (self.num_layers - self.num_moe_layers) * self.params_per_layer
        return dense + self.num_moe_layers * self.moe_layer_params

    @property
    def active_layer_params(self) -> int:
        """Parameters of all layers that one token multiplies (the model-FLOP count's N)."""
        dense = (self.num_layers - self.num_moe_layers) * self.params_per_layer
        return dense + self.num_moe_layers * self.moe_layer_active_params

    @property
    def embedding_params(self) -> int:
        """Input embedding plus output head (one matrix when tied)."""
        matrices = 1 if self.tied_embeddings else 2
        return matrices * self.vocab_size * self.hidden_size

    @property
    def total_params(self) -> int:
        return self.layer_params + self.embedding_params
