"""Families with MoE keys of their own (ERNIE 4.5, Hunyuan-A13B) and the dense families added
beside them (Nemotron, Ministral, InternLM3), counted by hand against the published sizes.

Configs: the keys a count depends on, copied from public copies of the real config.json
found in the code index (ids beside each); the models' names give their rounded sizes."""

from __future__ import annotations

from typing import Any

import pytest

from models.errors import InvalidSpec
from models.hf_config import describe_import, from_hf_config

# baidu/ERNIE-4.5-300B-A47B: code index id 20695270586 (a copy of its config.json in an
# inference engine's tests; the key set, moe_capacity and moe_use_aux_free included, as in
# id 54865186461)
ERNIE_300B: dict[str, Any] = {
    "model_type": "ernie4_5_moe", "hidden_size": 8192, "intermediate_size": 28672,
    "num_hidden_layers": 54, "num_attention_heads": 64, "num_key_value_heads": 8,
    "vocab_size": 103424, "tie_word_embeddings": True, "use_bias": False,
    "moe_num_experts": 64, "moe_num_shared_experts": 0, "moe_layer_start_index": 3,
    "moe_layer_end_index": 53, "moe_intermediate_size": 3584, "moe_k": 8,
    "moe_layer_interval": 1, "moe_capacity": [64, 64, 64], "moe_gate": "topk",
    "moe_use_aux_free": True, "num_nextn_predict_layers": 1,
}  # fmt: skip
# tencent/Hunyuan-A13B: code index id 57983092879 (its per-layer lists as published)
HUNYUAN_A13B: dict[str, Any] = {
    "model_type": "hunyuan_v1_moe", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "intermediate_size": 3072, "vocab_size": 128167, "num_experts": 64,
    "moe_intermediate_size": [3072] * 32, "moe_topk": [8] * 32, "num_shared_expert": [1] * 32,
}  # fmt: skip


def _attention(h: int, heads: int, kv_heads: int, head_dim: int) -> int:
    return h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h


def test_ernie_300b_a47b_counts_by_hand() -> None:
    h, vocab = 8192, 103424
    attention = _attention(h, 64, 8, 128)
    expert, router = 3 * h * 3584, h * 64
    model = from_hf_config(ERNIE_300B)
    # layers 0-2 dense, 3-53 MoE (start index 3, end 53: the last), embeddings tied
    dense, moe = attention + 3 * h * 28672, attention + router + 64 * expert
    assert model.total_params == vocab * h + 3 * dense + 51 * moe
    assert model.active_params == vocab * h + 3 * dense + 51 * (attention + router + 8 * expert)
    # "300B" and "A47B" as the name rounds them: 298.6B and 47.1B counted
    assert round(model.total_params / 1e9, 1) == 298.6
    assert round(model.active_params / 1e9) == 47
    assert (model.dense_layers, model.num_shared_experts, model.tied_embeddings) == (3, 0, True)


def test_ernie_defaults_are_the_21b_a3b_shape_with_two_shared_experts() -> None:
    # Ernie4_5_MoeConfig's defaults (ERNIE-4.5-21B-A3B): MoE keys omitted take them
    config = {
        "model_type": "ernie4_5_moe", "hidden_size": 2560, "intermediate_size": 12288,
        "num_hidden_layers": 28, "num_attention_heads": 20, "num_key_value_heads": 4,
        "vocab_size": 103424,
    }  # fmt: skip
    h = 2560
    attention, expert = _attention(h, 20, 4, 128), 3 * h * 1536
    moe = attention + h * 64 + 64 * expert + 2 * expert  # two shared, as wide as an expert
    model = from_hf_config(config)
    assert model.total_params == 103424 * h + attention + 3 * h * 12288 + 27 * moe
    assert round(model.total_params / 1e9, 1) == 21.8  # "21B"
    # six routed and the two shared a token: 3.35B with the input embedding ("A3B")
    active_moe = attention + h * 64 + 8 * expert
    assert model.active_params == 103424 * h + attention + 3 * h * 12288 + 27 * active_moe
    assert "21.83B parameters" in describe_import(model)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"moe_layer_end_index": 40}, "moe_layer_end_index=40"),
        ({"moe_layer_interval": 2}, "moe_layer_interval=2"),
        ({"moe_capacity": [1.0, 1.0, 2.0]}, "may drop tokens"),
    ],
)
def test_ernie_layouts_the_spec_cannot_hold_are_refused(change: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidSpec, match=named):
        from_hf_config({**ERNIE_300B, **change})


def test_hunyuan_a13b_counts_by_hand() -> None:
    h, vocab = 4096, 128167
    attention, expert, router = _attention(h, 32, 8, 128), 3 * h * 3072, h * 64
    model = from_hf_config(HUNYUAN_A13B)
    # every layer MoE: 64 routed experts and one shared MLP, all 3,072 wide; untied (the
    # copy omits the tying: HunYuanMoEV1Config's default)
    assert model.total_params == 2 * vocab * h + 32 * (attention + router + 65 * expert)
    assert model.active_params == 2 * vocab * h + 32 * (attention + router + 9 * expert)
    assert round(model.total_params / 1e9) == 81  # "80B": 79.87B without the embeddings
    assert round((model.active_params - vocab * h) / 1e9, 1) == 12.7  # "A13B"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"num_shared_expert": [2] * 32}, "num_shared_expert"),
        ({"moe_intermediate_size": 1536}, "moe_intermediate_size=1536"),
        ({"moe_topk": [8] * 31 + [2]}, "different value in different layers"),
        ({"use_cla": True}, "shared across layers"),
    ],
)
def test_hunyuan_layouts_transformers_does_not_build_are_refused(
    change: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidSpec, match=named):
        from_hf_config({**HUNYUAN_A13B, **change})


def test_nemotron4_15b_is_the_papers_count() -> None:
    # Nemotron-4 15B Technical Report (arXiv 2402.16819) Table 1 and section 2: 32 layers,
    # hidden 6144, 48 heads, 8 KV heads, vocabulary 256,000, squared-ReLU MLP of 4h;
    # "3.2 billion embedding parameters and 12.5 billion non-embedding parameters"
    config = {
        "model_type": "nemotron", "hidden_size": 6144, "intermediate_size": 24576,
        "num_hidden_layers": 32, "num_attention_heads": 48, "num_key_value_heads": 8,
        "vocab_size": 256000,
    }  # fmt: skip
    model = from_hf_config(config)
    embeddings = 2 * 256000 * 6144
    layer = _attention(6144, 48, 8, 128) + 2 * 6144 * 24576  # up and down only
    assert model.total_params == embeddings + 32 * layer
    assert round(32 * layer / 1e9, 1) == 12.5
    assert abs(embeddings / 1e9 - 3.2) < 0.06  # 3.15B: the report's 3.2 is rounded up
    assert (model.gated_mlp, model.tied_embeddings) == (False, False)


@pytest.mark.parametrize(
    ("model_type", "windowed"), [("ministral", 30), ("ministral3", 0), ("internlm3", 0)]
)
def test_llama_shaped_families_and_ministrals_default_window(
    model_type: str, windowed: int
) -> None:
    config = {
        "model_type": model_type, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 30, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000,
    }  # fmt: skip
    model = from_hf_config(config)
    layer = 64 * (64 + 2 * 2 * 16) + 64 * 64 + 3 * 64 * 128
    assert model.total_params == 2 * 1000 * 64 + 30 * layer
    # MinistralConfig windows every layer (4,096 tokens) when layer_types is not given
    assert model.windowed_layers == windowed
