"""The transformer being trained: a decoder spec (dense or mixture-of-experts, grouped-query or
multi-head latent attention) and its parameter counts.

Counts are of weight matrices: attention projections, MLP and expert matrices, routers and the
embeddings. Norm scales, biases and attention sinks are left out: in every model of
tests/test_hf_import.py they are under 0.05% of the total (gpt-oss-120b's expert biases, the
largest, are 36 * 128 * (2*2880 + 2880) = 39.8M of 116.8B; openai/gpt-oss@7b58334
gpt_oss/torch/model.py l.286-309).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, model_validator

from models.strict import SPEC_CONFIG, JsonInt
from models.text import NAME_MAX_CHARS, printable_name
from models.transformer_checks import check_consistent

# Bounds that reject typos and absurd sizes while admitting every published model.
MAX_LAYERS = 10_000
MAX_HIDDEN = 1_000_000
MAX_VOCAB = 10_000_000
MAX_WINDOW = 100_000_000  # as long as the longest sequence a job may train on


class TransformerSpec(BaseModel):
    """A decoder-only transformer with grouped-query (or multi-head latent) attention and a
    SwiGLU MLP."""

    model_config = SPEC_CONFIG

    name: Annotated[str, AfterValidator(printable_name)] = Field(
        "custom",
        max_length=NAME_MAX_CHARS,
        description="Written into the launch artefacts' comments: one line of printable text "
        "(no control, format or line-separator character).",
    )
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
    moe_layer_interval: JsonInt = Field(
        1,
        ge=1,
        le=MAX_LAYERS,
        description="An MoE layer every n-th layer (layers n-1, 2n-1, ...), the others dense "
        "with ffn_hidden_size (Llama 4 Maverick: 2); 1: every layer after dense_layers.",
    )
    # Multi-head latent attention (DeepSeek-V2/V3): kv_lora_rank None is ordinary attention
    # and every field below must then be None too. Names as in DeepSeek's config.json.
    kv_lora_rank: JsonInt | None = Field(
        None, gt=0, le=MAX_HIDDEN, description="MLA: width of the compressed key/value latent."
    )
    q_lora_rank: JsonInt | None = Field(
        None, gt=0, le=MAX_HIDDEN, description="MLA: query latent width; None: full-rank queries."
    )
    qk_nope_head_dim: JsonInt | None = Field(
        None, ge=0, le=MAX_HIDDEN, description="MLA: per-head query/key width without RoPE."
    )
    qk_rope_head_dim: JsonInt | None = Field(
        None, ge=0, le=MAX_HIDDEN, description="MLA: per-head query/key width with RoPE."
    )
    v_head_dim: JsonInt | None = Field(
        None, gt=0, le=MAX_HIDDEN, description="MLA: per-head value width."
    )
    # Sliding-window attention (Mistral 7B v0.1, Gemma 2 and 3, GPT-OSS): a windowed layer's
    # query attends itself and the keys just before it, `sliding_window` in all.
    sliding_window: JsonInt | None = Field(
        None,
        gt=0,
        le=MAX_WINDOW,
        description="Keys a query of a windowed layer attends (itself and those just before "
        "it); None: every layer attends the whole sequence.",
    )
    sliding_window_layers: JsonInt | None = Field(
        None,
        ge=0,
        le=MAX_LAYERS,
        description="Layers that attend within the window, the others the whole sequence "
        "(Gemma 2 and GPT-OSS: every other one); default every layer when a window is given.",
    )

    # Chunked attention (Llama 4): a chunked layer's query attends the keys of its own chunk
    # of `attention_chunk_size` tokens up to itself.
    attention_chunk_size: JsonInt | None = Field(
        None,
        gt=0,
        le=MAX_WINDOW,
        description="Tokens of one attention chunk: a query of a chunked layer attends itself "
        "and the keys before it in its chunk (Llama 4: 8,192); None: no chunked layer.",
    )
    chunked_attention_layers: JsonInt | None = Field(
        None,
        ge=0,
        le=MAX_LAYERS,
        description="Layers with chunked attention, the others full or windowed (Llama 4: all "
        "but every fourth); default every layer when a chunk size is given.",
    )

    glu_clamp: float | None = Field(
        None,
        gt=0,
        le=1e6,
        description="The limit a clamped GLU cuts its two halves to before the activation "
        "(GPT-OSS's swiglu_limit, 7.0: the gate at most it, the linear half within plus or "
        "minus it); None: unclamped. Run as eager ops the clamps cost HBM traffic "
        "(assumption fused_glu_clamp).",
    )

    @model_validator(mode="after")
    def _is_consistent(self) -> TransformerSpec:
        check_consistent(self)
        return self

    @property
    def windowed_layers(self) -> int:
        """Layers whose attention is windowed (sliding_window set): every one by default."""
        if self.sliding_window is None:
            return 0
        return self.num_layers if self.sliding_window_layers is None else self.sliding_window_layers

    @property
    def chunked_layers(self) -> int:
        """Layers whose attention is chunked (attention_chunk_size set): every one by default."""
        if self.attention_chunk_size is None:
            return 0
        given = self.chunked_attention_layers
        return self.num_layers if given is None else given

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
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def qk_head_dim_size(self) -> int:
        """One head's query (and key) width: head_dim, or under MLA nope + rope."""
        if not self.is_mla:
            return self.head_dim_size
        return (self.qk_nope_head_dim or 0) + (self.qk_rope_head_dim or 0)

    @property
    def v_head_dim_size(self) -> int:
        """One head's value (and attention output) width: head_dim, or under MLA v_head_dim."""
        return self.head_dim_size if self.v_head_dim is None else self.v_head_dim

    @property
    def q_width(self) -> int:
        """The per-token width the cost model gives queries and attention outputs, `a*hd`.

        It prices them as two equal halves: Q and the output as activations (2q bytes each)
        and QK^T and AV as FLOPs (12*q*s). Under MLA queries are a*(nope + rope) wide and
        outputs a*v, so q_width is their mean, which keeps both sums exact (DeepSeek-V3: 128 *
        (192 + 128) / 2 = 20,480). The odd half when a*(nope + rope + v) is odd is dropped.
        """
        a = self.num_attention_heads
        return a * (self.qk_head_dim_size + self.v_head_dim_size) // 2

    @property
    def kv_width(self) -> int:
        """K and V together per token, as the attention kernel reads them and context
        parallelism exchanges them: `2*k*hd`. Under MLA training attends over up-projected
        per-head keys (nope + rope) and values (v), a*(nope + rope + v) (DeepSeek-V3@9b4e978
        inference/model.py l.472-478, the non-absorbed path); the kv_lora_rank + rope latent
        is what inference caches, not what a training step's kernels read."""
        return self.num_kv_heads * (self.qk_head_dim_size + self.v_head_dim_size)

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def attention_params_per_layer(self) -> int:
        """Q, K, V and output projections: `h*(q + kv) + q*h`, or MLA's latent projections."""
        if self.kv_lora_rank is not None:
            return self._latent_attention_params(self.kv_lora_rank)
        return self.hidden_size * (self.q_width + self.kv_width) + self.q_width * self.hidden_size

    def _latent_attention_params(self, kv_lora_rank: int) -> int:
        """MLA's matrices (DeepSeek-V3@9b4e978 inference/model.py l.424-433): queries straight
        from h, or through a q_lora_rank bottleneck; a kv_lora_rank latent plus one RoPE key
        shared by the heads (wkv_a), up-projected to per-head nope keys and values (wkv_b);
        the output from a*v. Its two latent RMSNorms are not counted (see the module note)."""
        h, a = self.hidden_size, self.num_attention_heads
        qk, v, rope = self.qk_head_dim_size, self.v_head_dim_size, self.qk_rope_head_dim or 0
        q_lora = self.q_lora_rank
        queries = h * a * qk if q_lora is None else q_lora * (h + a * qk)
        latent = h * (kv_lora_rank + rope) + kv_lora_rank * a * (qk - rope + v)
        return queries + latent + a * v * h

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
        """Layers n-1, 2n-1, ... for an interval n (transformers' Llama4TextConfig.moe_layers),
        else every layer after the leading dense ones."""
        if not self.is_moe:
            return 0
        if self.moe_layer_interval > 1:
            return self.num_layers // self.moe_layer_interval
        return self.num_layers - self.dense_layers

    @property
    def moe_layer_share(self) -> float:
        """The share of the layers that are MoE layers (0 for a dense model)."""
        return self.num_moe_layers / self.num_layers

    @property
    def expert_copies_per_token(self) -> int:
        """The expert MLPs one token passes through in an MoE layer: routed and shared."""
        return self.experts_per_token + self.num_shared_experts if self.is_moe else 0

    @property
    def mlp_width_per_token(self) -> float:
        """The MLP intermediate width one token passes through in a layer, averaged over the
        layers: f in a dense layer, f_e for each routed and shared expert copy in an MoE
        one (the per-token factor of every MLP-activation byte count)."""
        experts = self.expert_copies_per_token * (self.expert_ffn_hidden_size or 0)
        share = self.moe_layer_share
        return (1 - share) * self.ffn_hidden_size + share * experts

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
    def input_embedding_params(self) -> int:
        """The input lookup table, vocab x h (when tied, the very matrix the head uses)."""
        return self.vocab_size * self.hidden_size

    @property
    def total_params(self) -> int:
        return self.layer_params + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters per token, counted as total_params counts them: the active layers plus
        both embeddings. Vendors differ. Mistral and Qwen count both, as their figures show
        (derived: Mixtral 8x7B's published 12.9B is 12.88B with both, 12.75B without the
        input embedding). OpenAI leaves the input embedding out (gpt-oss model card, arXiv
        2508.10925 Table 1: "Unembedding parameters are counted towards active, but not
        embeddings"), and so do DeepSeek's figures (derived: V3's 37B is 36.6B without it,
        37.6B with); for theirs subtract input_embedding_params."""
        return self.active_layer_params + self.embedding_params
