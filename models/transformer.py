"""The transformer being trained: a dense (Llama-style) decoder spec and its parameter counts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Bounds that reject typos and absurd sizes while admitting every published model.
MAX_LAYERS = 10_000
MAX_HIDDEN = 1_000_000
MAX_VOCAB = 10_000_000


class TransformerSpec(BaseModel):
    """A decoder-only transformer with grouped-query attention and a SwiGLU MLP."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field("custom", max_length=200)
    num_layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden_size: int = Field(gt=0, le=MAX_HIDDEN)
    ffn_hidden_size: int = Field(gt=0, le=16 * MAX_HIDDEN)
    num_attention_heads: int = Field(gt=0, le=MAX_HIDDEN)
    num_kv_heads: int = Field(gt=0, le=MAX_HIDDEN)
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    tied_embeddings: bool = False
    head_dim: int | None = Field(
        None, gt=0, le=MAX_HIDDEN, description="Defaults to hidden_size / num_attention_heads."
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
        return self

    @property
    def head_dim_size(self) -> int:
        return (
            self.head_dim
            if self.head_dim is not None
            else self.hidden_size // self.num_attention_heads
        )

    @property
    def params_per_layer(self) -> int:
        """Q, K, V and output projections plus the three SwiGLU matrices; norms ignored.

        With head_dim = h / a this is the spec's `h*(h + 2*k*hd) + h*h + 3*h*f`.
        """
        h, f, hd = self.hidden_size, self.ffn_hidden_size, self.head_dim_size
        q_width = self.num_attention_heads * hd
        kv_width = 2 * self.num_kv_heads * hd
        return h * (q_width + kv_width) + q_width * h + 3 * h * f

    @property
    def embedding_params(self) -> int:
        """Input embedding plus output head (one matrix when tied)."""
        matrices = 1 if self.tied_embeddings else 2
        return matrices * self.vocab_size * self.hidden_size

    @property
    def total_params(self) -> int:
        return self.num_layers * self.params_per_layer + self.embedding_params
