"""Hugging Face config.json import of the families counted by hand, not against a published
checkpoint total: Llama 4 (its shared expert, Maverick's interleaved MoE, chunked attention),
OLMo 3, Qwen3-VL, Command A, OLMoE, Phi-3.5-MoE, SmolLM3; and the architectures the import
refuses by key. Each count is written out from the config's keys in the test."""

from __future__ import annotations

from typing import Any

import pytest

from models.errors import InvalidSpec
from models.hf_config import describe_import, from_hf_config
from tests.test_hf_import import LLAMA, ROWS

# Llama 4's text model as transformers' Llama4TextConfig defaults it, which are Llama 4
# Scout's (configuration_llama4.py, docstring checkpoint meta-llama/Llama-4-Scout-17B-16E):
# 16 experts, top-1, all 48 layers MoE, chunks of 8,192 tokens on the RoPE layers (all but
# every fourth); Maverick (Llama-4-Maverick-17B-128E) has 128 experts on every second layer.
LLAMA4_SCOUT = {"model_type": "llama4", "text_config": {
    "model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
    "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_attention_heads": 40,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048,
    "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
    "attention_chunk_size": 8192, "no_rope_layers": [], "tie_word_embeddings": False},
    "vision_config": {"hidden_size": 1408}}  # fmt: skip


def _llama4(**text: Any) -> dict[str, Any]:
    return {**LLAMA4_SCOUT, "text_config": {**LLAMA4_SCOUT["text_config"], **text}}


def test_llama4_counts_by_hand() -> None:
    h, vocab, layers = 5120, 202048, 48
    attention = 2 * h * 40 * 128 + 2 * h * 8 * 128  # q and o; k and v (8 KV heads of 128)
    expert, router = 3 * h * 8192, h  # one SwiGLU expert; the router's column per expert
    dense = 3 * h * 16384  # intermediate_size_mlp
    scout = from_hf_config(LLAMA4_SCOUT)
    # every layer: 16 routed experts and the shared one; 107.77B counted against the model
    # card's "109B total", which counts its vision encoder too (not priced here)
    moe_layer = attention + 16 * router + (16 + 1) * expert
    assert scout.total_params == 2 * vocab * h + layers * moe_layer
    assert scout.active_params == 2 * vocab * h + layers * (attention + 16 * router + 2 * expert)
    assert (scout.num_moe_layers, scout.num_shared_experts, scout.ffn_hidden_size) == (48, 1, 16384)
    # Maverick: MoE on layers 1, 3, ..., 47 (128 experts), dense MLPs on the other 24: 400.7B
    # against the card's "400B total", and 17.2B active (the card's "17B active")
    maverick = from_hf_config(_llama4(num_local_experts=128, interleave_moe_layer_step=2))
    moe_layer = attention + 128 * router + (128 + 1) * expert
    assert maverick.total_params == 2 * vocab * h + 24 * moe_layer + 24 * (attention + dense)
    assert round(maverick.total_params / 1e9, 1) == 400.7
    assert (maverick.num_moe_layers, maverick.moe_layer_interval) == (24, 2)
    listed = from_hf_config(_llama4(num_local_experts=128, moe_layers=list(range(1, 48, 2))))
    assert listed.model_dump() == maverick.model_dump()


def test_llama4_chunked_attention_is_imported_with_its_layers() -> None:
    # no_rope_layers empty: transformers' default, all but every fourth layer chunked (36 of
    # 48); a layer_types list (transformers 5) or a no_rope_layers list says it per layer
    assert from_hf_config(LLAMA4_SCOUT).chunked_layers == 36
    types = ["chunked_attention"] * 40 + ["full_attention"] * 8
    assert from_hf_config(_llama4(layer_types=types)).chunked_layers == 40
    assert from_hf_config(_llama4(no_rope_layers=[1, 0] * 24)).chunked_layers == 24
    assert describe_import(from_hf_config(LLAMA4_SCOUT)).endswith(
        "; 8,192-token attention chunks on 36 of 48 layers"
    )


def test_olmo3_is_olmo2_with_windows_on_three_layers_of_four() -> None:
    # transformers Olmo3Config(Olmo2Config): sliding_window 4,096 and layer_types sliding on
    # all but every fourth layer by default; the parameters are OLMo 2's
    olmo2 = ROWS["OLMo-2-7B"].config
    olmo3 = from_hf_config({**olmo2, "model_type": "olmo3"})
    assert (olmo3.sliding_window, olmo3.windowed_layers) == (4096, 24)
    assert olmo3.total_params == from_hf_config(olmo2).total_params
    listed = {**olmo2, "model_type": "olmo3", "sliding_window": 2048,
              "layer_types": ["sliding_attention", "full_attention"] * 16}  # fmt: skip
    assert (from_hf_config(listed).sliding_window, from_hf_config(listed).windowed_layers) == (
        2048,
        16,
    )


def test_qwen3_vl_imports_its_text_model_with_the_outer_tying() -> None:
    # Qwen3-VL-30B-A3B's text_config holds Qwen3-30B-A3B's layers under model_type
    # qwen3_vl_moe_text, and its tie_word_embeddings sits in the outer config
    text = {**ROWS["Qwen3-30B-A3B"].config, "model_type": "qwen3_vl_moe_text"}
    del text["tie_word_embeddings"]
    outer = {"model_type": "qwen3_vl_moe", "text_config": text, "tie_word_embeddings": False}
    vl = from_hf_config(outer)
    assert vl.total_params == from_hf_config(ROWS["Qwen3-30B-A3B"].config).total_params
    # a small one ties them (Qwen3-VL-2B and 4B): one vocab x h matrix fewer
    tied = from_hf_config({**outer, "tie_word_embeddings": True})
    assert vl.total_params - tied.total_params == 151936 * 2048


def test_command_a_and_olmoe_count_by_hand() -> None:
    # Command A (CohereLabs/c4ai-command-a-03-2025: 64 layers, h 12288, f 36864, 96 heads, 8
    # KV heads, vocabulary 256,000, tied): 111.06B against the model card's "111B"; windows
    # on all but every fourth layer by default
    h, f, q, kv = 12288, 36864, 12288, 8 * 128
    command_a = from_hf_config({"model_type": "cohere2", "num_hidden_layers": 64,
                                "hidden_size": h, "intermediate_size": f,
                                "num_attention_heads": 96, "num_key_value_heads": 8,
                                "vocab_size": 256000})  # fmt: skip
    assert command_a.total_params == 256000 * h + 64 * (h * (q + 2 * kv) + q * h + 3 * h * f)
    assert round(command_a.total_params / 1e9) == 111
    assert (command_a.sliding_window, command_a.windowed_layers) == (4096, 48)
    # OLMoE-1B-7B (allenai/OLMoE-1B-7B-0924: 16 layers, h 2048, 64 experts 1,024 wide, top-8,
    # vocabulary 50,304, untied): 6.92B total, 1.28B active (the paper's "7B", "1B active")
    h, e = 2048, 3 * 2048 * 1024
    olmoe = from_hf_config({"model_type": "olmoe", "num_hidden_layers": 16, "hidden_size": h,
                            "intermediate_size": 1024, "num_attention_heads": 16,
                            "num_key_value_heads": 16, "vocab_size": 50304,
                            "num_experts": 64, "num_experts_per_tok": 8})  # fmt: skip
    attention, router = 4 * h * h, h * 64
    assert olmoe.total_params == 2 * 50304 * h + 16 * (attention + router + 64 * e)
    assert olmoe.active_params == 2 * 50304 * h + 16 * (attention + router + 8 * e)
    assert (round(olmoe.total_params / 1e9, 2), round(olmoe.active_params / 1e9, 2)) == (6.92, 1.28)


def test_phi35_moe_and_smollm3_count_by_hand() -> None:
    # Phi-3.5-MoE (microsoft/Phi-3.5-MoE-instruct, PhimoeConfig's defaults: 32 layers, h 4096,
    # 16 experts 6,400 wide, top-2, 8 KV heads of 128, vocabulary 32,064, untied): 41.87B
    # and 6.64B active against the model card's "41.9B" and "6.6B active"
    h = 4096
    attention, expert = h * (h + 2 * 1024) + h * h, 3 * h * 6400
    phi = from_hf_config({"model_type": "phimoe", "num_hidden_layers": 32, "hidden_size": h,
                          "intermediate_size": 6400, "num_attention_heads": 32,
                          "num_key_value_heads": 8, "vocab_size": 32064,
                          "num_local_experts": 16, "num_experts_per_tok": 2})  # fmt: skip
    assert phi.total_params == 2 * 32064 * h + 32 * (attention + h * 16 + 16 * expert)
    assert (round(phi.total_params / 1e9, 1), round(phi.active_params / 1e9, 1)) == (41.9, 6.6)
    # SmolLM3-3B (SmolLM3Config's defaults: 36 layers, h 2048, f 11008, 16 heads, 4 KV heads,
    # vocabulary 128,256, tied): 3.07B; a sliding_window stays off unless use_sliding_window
    h = 2048
    smol = {"model_type": "smollm3", "num_hidden_layers": 36, "hidden_size": h,
            "intermediate_size": 11008, "num_attention_heads": 16, "num_key_value_heads": 4,
            "vocab_size": 128256, "sliding_window": 4096}  # fmt: skip
    spec = from_hf_config(smol)
    per_layer = h * (h + 2 * 512) + h * h + 3 * h * 11008
    assert spec.total_params == 128256 * h + 36 * per_layer
    assert round(spec.total_params / 1e9, 2) == 3.07 and spec.windowed_layers == 0
    assert from_hf_config({**smol, "use_sliding_window": True}).windowed_layers == 36


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        # DeepSeek-V3.2's sparse attention (config.json: index_n_heads 64, index_head_dim 128,
        # index_topk 2048), refused even where the caller names the MLP and the tying
        ({"index_n_heads": 64, "index_topk": 2048}, "DeepSeek sparse attention"),
        ({"altup_num_inputs": 4, "laurel_rank": 64}, "Gemma 3n's AltUp, Gemma 3n's LAuReL"),
        ({"linear_num_key_heads": 16}, "linear attention layers"),
    ],
)
def test_architectures_the_spec_does_not_price_are_refused(
    keys: dict[str, Any], message: str
) -> None:
    config = {**LLAMA, "model_type": "unknown", "gated_mlp": True, **keys}
    with pytest.raises(InvalidSpec, match=message):
        from_hf_config(config)


# transformers 5.25's config classes, whose defaults are the released models' shapes
# (models/mistral4/configuration_mistral4.py, minimax_m2/configuration_minimax_m2.py) and
# Seed-OSS-36B's config.json (ByteDance-Seed/Seed-OSS-36B-Instruct).
MISTRAL4 = {
    "model_type": "mistral4", "vocab_size": 131072, "hidden_size": 4096,
    "intermediate_size": 12288, "moe_intermediate_size": 2048, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 32, "n_shared_experts": 1,
    "n_routed_experts": 128, "kv_lora_rank": 256, "q_lora_rank": 1024,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 64,
    "num_experts_per_tok": 4, "first_k_dense_replace": 0,
}  # fmt: skip
MINIMAX_M2 = {
    "model_type": "minimax_m2", "vocab_size": 200064, "hidden_size": 3072,
    "intermediate_size": 1536, "num_hidden_layers": 62, "num_attention_heads": 48,
    "num_key_value_heads": 8, "head_dim": 128, "num_experts_per_tok": 8,
    "num_local_experts": 256, "rotary_dim": 64, "attn_type_list": [1] * 62,
}  # fmt: skip
SEED_OSS = {
    "model_type": "seed_oss", "hidden_size": 5120, "num_hidden_layers": 64,
    "intermediate_size": 27648, "num_attention_heads": 80, "num_key_value_heads": 8,
    "head_dim": 128, "vocab_size": 155136, "attention_bias": True,
}  # fmt: skip


def test_mistral4_is_deepseeks_shape_counted_by_hand() -> None:
    h, vocab = 4096, 131072
    # MLA: q_a 4096 x 1024 and q_b 1024 x 32 x 128; kv_a 4096 x (256 + 64) and kv_b
    # 256 x 32 x (64 + 128); the output 32 x 128 x 4096
    attention = 1024 * (h + 32 * 128) + h * (256 + 64) + 256 * 32 * 192 + 32 * 128 * h
    assert attention == 28_049_408
    expert, router = 3 * h * 2048, h * 128
    model = from_hf_config(MISTRAL4)
    embeddings = 2 * vocab * h
    assert model.total_params == embeddings + 36 * (attention + router + 129 * expert)
    assert model.active_params == embeddings + 36 * (attention + router + 5 * expert)
    assert round(model.total_params / 1e9, 2) == 118.97  # 119B
    assert (model.num_moe_layers, model.kv_lora_rank, model.tied_embeddings) == (36, 256, False)


def test_minimax_m2_and_seed_oss_count_by_hand() -> None:
    h, vocab = 3072, 200064
    attention = h * (48 * 128 + 2 * 8 * 128) + 48 * 128 * h
    expert, router = 3 * h * 1536, h * 256
    m2 = from_hf_config(MINIMAX_M2)
    assert m2.total_params == 2 * vocab * h + 62 * (attention + router + 256 * expert)
    # 228.7B and 9.8B active without the embeddings: MiniMax's "230B total, 10B active"
    assert round(m2.total_params / 1e9, 1) == 228.7
    assert round((m2.active_params - 2 * vocab * h) / 1e9, 1) == 9.8
    h, vocab = 5120, 155136
    layer = h * (80 * 128 + 2 * 8 * 128) + 80 * 128 * h + 3 * h * 27648
    seed = from_hf_config(SEED_OSS)
    assert seed.total_params == 2 * vocab * h + 64 * layer  # 36.15B: "Seed-OSS-36B"
    assert "36.15B" in describe_import(seed)


def test_minimax_lightning_attention_is_refused() -> None:
    # MiniMax-Text-01's hybrid: 0 marks a lightning (linear) attention layer
    with pytest.raises(InvalidSpec, match="lightning"):
        from_hf_config({**MINIMAX_M2, "attn_type_list": [0] * 7 + [1]})


@pytest.mark.parametrize(
    ("model_type", "matrices", "tied"),
    [("glm4", 3, False), ("hunyuan_v1_dense", 3, False), ("ernie4_5", 3, True),
     ("apertus", 2, False), ("arcee", 2, False)],
)  # fmt: skip
def test_dense_families_count_their_mlp_and_tying(
    model_type: str, matrices: int, tied: bool
) -> None:
    # 2 layers of h 64 (4 heads of 16, 2 KV heads), f 128, vocabulary 1,000: gated MLPs are
    # gate, up and down (GLM-4's merged gate_up is two of them), plain ones up and down
    config = {
        "model_type": model_type, "hidden_size": 64, "num_hidden_layers": 2,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000,
    }  # fmt: skip
    attention = 64 * (64 + 2 * 2 * 16) + 64 * 64
    layer = attention + matrices * 64 * 128
    model = from_hf_config(config)
    assert model.total_params == (1 if tied else 2) * 1000 * 64 + 2 * layer
    assert (model.gated_mlp, model.tied_embeddings) == (matrices == 3, tied)


def test_dots1_and_exaone4_count_by_hand_with_their_windows() -> None:
    # dots.llm1 (rednote-hilab/dots.llm1.base config.json): one dense layer, then 128 routed
    # experts (top 6) and 2 shared of 1,408; 142.77B and 14.02B active ("142B / 14B")
    dots = {
        "model_type": "dots1", "hidden_size": 4096, "num_hidden_layers": 62,
        "first_k_dense_replace": 1, "n_routed_experts": 128, "num_experts_per_tok": 6,
        "n_shared_experts": 2, "moe_intermediate_size": 1408, "intermediate_size": 10944,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 152064,
    }  # fmt: skip
    h, attention = 4096, 4 * 4096 * 4096
    expert = 3 * h * 1408
    moe_layer = attention + 128 * h + 130 * expert
    model = from_hf_config(dots)
    assert model.total_params == 2 * 152064 * h + attention + 3 * h * 10944 + 61 * moe_layer
    assert round(model.active_params / 1e9, 2) == 14.02
    # Dots1Config windows only layers from max_window_layers (62) on: none of the 62
    assert model.sliding_window_layers == 0
    # EXAONE 4.0 32B: "LLLG" windows 3 of every 4 layers, 48 of 64 (the int form alike)
    exaone = {
        "model_type": "exaone4", "hidden_size": 5120, "num_hidden_layers": 64,
        "intermediate_size": 27392, "num_attention_heads": 40, "num_key_value_heads": 8,
        "head_dim": 128, "vocab_size": 102400, "sliding_window": 4096,
        "sliding_window_pattern": "LLLG",
    }  # fmt: skip
    assert from_hf_config(exaone).sliding_window_layers == 48
    assert from_hf_config({**exaone, "sliding_window_pattern": 4}).sliding_window_layers == 48
    layer = 5120 * (5120 + 2 * 8 * 128) + 5120 * 5120 + 3 * 5120 * 27392
    assert from_hf_config(exaone).total_params == 2 * 102400 * 5120 + 64 * layer  # 32.0B
    with pytest.raises(InvalidSpec, match="one global"):
        from_hf_config({**exaone, "sliding_window_pattern": "LGLG"})


def test_glm4_moe_lite_makes_its_first_layer_dense_by_default() -> None:
    # Glm4MoeLiteConfig's defaults (GLM-4.7-Flash's shape): MLA with q_lora 768, kv_lora 512,
    # heads of 192 + 64 (keys) and 256 (values); its head_dim key is qk_rope_head_dim's alias
    config = {
        "model_type": "glm4_moe_lite", "vocab_size": 154880, "hidden_size": 2048,
        "intermediate_size": 10240, "moe_intermediate_size": 1536, "num_hidden_layers": 47,
        "num_attention_heads": 20, "num_key_value_heads": 20, "n_shared_experts": 1,
        "n_routed_experts": 64, "kv_lora_rank": 512, "q_lora_rank": 768,
        "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192,
        "num_experts_per_tok": 4, "head_dim": 64,
    }  # fmt: skip
    h = 2048
    attention = 768 * (h + 20 * 256) + h * (512 + 64) + 512 * 20 * (192 + 256) + 20 * 256 * h
    assert attention == 21_757_952
    dense, moe = attention + 3 * h * 10240, attention + 64 * h + 65 * 3 * h * 1536
    model = from_hf_config(config)
    assert (model.dense_layers, model.num_moe_layers) == (1, 46)
    assert model.total_params == 2 * 154880 * h + dense + 46 * moe  # 29.94B: "30B"
    # a config that lists its layers says otherwise
    listed = from_hf_config({**config, "mlp_layer_types": ["dense"] * 2 + ["sparse"] * 45})
    assert listed.dense_layers == 2


def test_kimi_k25_imports_its_deepseek_shaped_text_model() -> None:
    # Kimi K2.5 nests Kimi K2 (DeepSeek-V3's layers: MLA, 384 experts of 2,048, top 8, one
    # shared, one dense layer first) under text_config (transformers 5.25 models/kimi_k25/
    # configuration_kimi_k25.py); its text config says untied
    from tests.test_mla import V3_MLA

    text = {
        "model_type": "kimi_k2", "hidden_size": 7168, "num_hidden_layers": 61,
        "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_attention_heads": 64,
        "num_key_value_heads": 64, "n_routed_experts": 384, "n_shared_experts": 1,
        "num_experts_per_tok": 8, "first_k_dense_replace": 1, "vocab_size": 163840,
        "tie_word_embeddings": False, **V3_MLA,
    }  # fmt: skip
    h = 7168
    attention = 1536 * (h + 64 * 192) + h * 576 + 512 * 64 * 256 + 64 * 128 * h
    dense = attention + 3 * h * 18432
    moe = attention + 384 * h + 385 * 3 * h * 2048
    model = from_hf_config({"model_type": "kimi_k25", "text_config": text, "vision_config": {}})
    assert model.total_params == 2 * 163840 * h + dense + 60 * moe  # 1.026T: "1T"
    assert model.name.endswith("(text model only)") and not model.tied_embeddings


@pytest.mark.parametrize(
    ("config", "message"),
    [
        # Gemma 4's text model feeds each layer an embedding of its own
        ({"model_type": "gemma4", "text_config": {**LLAMA, "model_type": "gemma4_text",
          "hidden_size_per_layer_input": 256}}, "per-layer embeddings"),
        # DeepSeek-V4's compressed sparse attention layers
        ({**LLAMA, "model_type": "deepseek_v4", "gated_mlp": True, "tie_word_embeddings": False,
          "layer_types": ["compressed_sparse_attention"] * 2}, "compressed_sparse_attention"),
        # Qwen4's linear attention layers
        ({"model_type": "qwen4_exp", "text_config": {**LLAMA, "model_type": "qwen4_exp_text",
          "linear_num_key_heads": 16}}, "linear attention"),
    ],
)  # fmt: skip
def test_current_architectures_the_spec_does_not_price_are_refused(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidSpec, match=message):
        from_hf_config(config)


@pytest.mark.parametrize(
    ("model_type", "experts_key", "experts", "top_k"),
    [("flex_olmo", "num_experts", 7, 5), ("granitemoe", "num_local_experts", 8, 2)],
)
def test_flexolmo_and_granite_moe_experts_are_as_wide_as_the_mlp(
    model_type: str, experts_key: str, experts: int, top_k: int
) -> None:
    # 2 layers of h 64 (4 heads of 16, 2 KV heads), experts of gate, up and down 128 wide
    config = {
        "model_type": model_type, "hidden_size": 64, "num_hidden_layers": 2,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000, experts_key: experts, "num_experts_per_tok": top_k,
    }  # fmt: skip
    attention, expert, router = 64 * (64 + 2 * 2 * 16) + 64 * 64, 3 * 64 * 128, 64 * experts
    model = from_hf_config(config)
    embeddings = 2 * 1000 * 64
    assert model.total_params == embeddings + 2 * (attention + router + experts * expert)
    assert model.active_params == embeddings + 2 * (attention + router + top_k * expert)


def test_granite_sliding_window_families_keep_layers_0_4_8_full() -> None:
    # 10 layers: full at 0, 4 and 8 (i % 4 == 0), windows of 128 on the other 7, unless
    # config.json lists layer_types; Granite MoE SWA's shared MLP is refused where it is set
    base = {
        "hidden_size": 64, "num_hidden_layers": 10, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
    }  # fmt: skip
    dense = from_hf_config({**base, "model_type": "granite_swa"})
    assert (dense.sliding_window, dense.sliding_window_layers, dense.tied_embeddings) == (
        128,
        7,
        True,
    )
    listed = ["full_attention"] * 2 + ["sliding_attention"] * 8
    assert (
        from_hf_config(
            {**base, "model_type": "granite_swa", "layer_types": listed}
        ).sliding_window_layers
        == 8
    )
    moe = {**base, "model_type": "granitemoe_swa", "num_local_experts": 8, "num_experts_per_tok": 2}
    assert from_hf_config(moe).sliding_window_layers == 7
    with pytest.raises(InvalidSpec, match="shared_intermediate_size"):
        from_hf_config({**moe, "shared_intermediate_size": 256})
