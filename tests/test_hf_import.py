"""Hugging Face config.json import against the parameter counts the models were published with.

Each row holds the keys of a real config.json that the count depends on (values copied, the
source beside it) and the published counts. Exact counts are the checkpoints' own, as the
Hugging Face Hub publishes them (https://huggingface.co/api/models/<repo>, field
`safetensors.total`); I read those numbers in copies in the public code index, not from the
Hub itself, and each one below was found in several independent copies. Vendors' rounded
figures are taken to the digit they were published to.

The import counts weight matrices only (models/transformer.py): the exact checkpoints exceed
it by their norm scales and biases, which the last test bounds.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from models.errors import InvalidSpec
from models.hf_config import describe_import, from_hf_config
from models.transformer import TransformerSpec
from tests.helpers import run_cli


class Published(NamedTuple):
    config: dict[str, Any]
    total: str  # as published: all digits for an exact count, "671B" for a rounded one
    active: str | None = None
    # DeepSeek and OpenAI publish active counts without the input embedding; Mistral and
    # Qwen with it (see TransformerSpec.active_params)
    active_without_input_embedding: bool = False


# fmt: off
ROWS: dict[str, Published] = {
    # config: huggingface.co/meta-llama/Llama-3.1-8B config.json (verbatim copy: code
    # index id 30247352769); total: huggingface.co/api/models/meta-llama/Llama-3.1-8B
    "Llama-3.1-8B": Published({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False}, "8030261248"),
    # config: NVIDIA-NeMo/Megatron-Bridge@dc805f5 llama_provider.py Llama31ModelProvider70B;
    # total: huggingface.co/api/models/meta-llama/Llama-3.1-70B
    "Llama-3.1-70B": Published({"model_type": "llama", "num_hidden_layers": 80, "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False}, "70553706496"),
    # config: same file, Llama31ModelProvider405B; total: .../meta-llama/Llama-3.1-405B
    "Llama-3.1-405B": Published({"model_type": "llama", "num_hidden_layers": 126, "hidden_size": 16384, "intermediate_size": 53248, "num_attention_heads": 128, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False}, "405853388800"),
    # config: Megatron-Bridge@067f987 tests/unit_tests/models/llama/test_llama_bridge.py;
    # total: huggingface.co/api/models/meta-llama/Llama-3.2-1B (the card rounds to 1.23B)
    "Llama-3.2-1B": Published({"model_type": "llama", "num_hidden_layers": 16, "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256, "tie_word_embeddings": True}, "1235814400"),
    # config: huggingface.co/meta-llama/Llama-3.2-3B config.json (verbatim copy: index
    # id 30247352769); total: huggingface.co/api/models/meta-llama/Llama-3.2-3B
    "Llama-3.2-3B": Published({"model_type": "llama", "num_hidden_layers": 28, "hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256, "tie_word_embeddings": True}, "3212749824"),
    # config: huggingface/candle mixtral.rs v0_1_8x7b (HF config.json URL in its comment);
    # total: huggingface.co/api/models/mistralai/Mixtral-8x7B-v0.1; active: Mistral AI,
    # mistral.ai/news/mixtral-of-experts, "12.9B parameters per token" (read second-hand)
    "Mixtral-8x7B": Published({"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False, "num_local_experts": 8, "num_experts_per_tok": 2}, "46702792704", "12.9B"),
    # config: NVIDIA/NeMo@02f25a8 mixtral.py MixtralConfig8x22B; total:
    # huggingface.co/api/models/mistral-community/Mixtral-8x22B-v0.1; active: Mistral AI,
    # mistral.ai/news/mixtral-8x22b, "39B active parameters out of 141B" (read second-hand)
    "Mixtral-8x22B": Published({"model_type": "mixtral", "num_hidden_layers": 56, "hidden_size": 6144, "intermediate_size": 16384, "num_attention_heads": 48, "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False, "num_local_experts": 8, "num_experts_per_tok": 2}, "140620634112", "39B"),
    # config: Megatron-Bridge@5ca1c1a qwen_provider.py Qwen25ModelProvider72B; total:
    # huggingface.co/api/models/Qwen/Qwen2.5-72B
    "Qwen2.5-72B": Published({"model_type": "qwen2", "num_hidden_layers": 80, "hidden_size": 8192, "intermediate_size": 29568, "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 152064, "tie_word_embeddings": False}, "72706203648"),
    # config: huggingface.co/Qwen/Qwen3-8B config.json (verbatim copy: index id 30247352769);
    # total: huggingface.co/api/models/Qwen/Qwen3-8B
    "Qwen3-8B": Published({"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False}, "8190735360"),
    # config: huggingface.co/Qwen/Qwen3-30B-A3B config.json (verbatim copy: index id
    # 30247352769); total: huggingface.co/api/models/Qwen/Qwen3-30B-A3B; active: the model
    # card, "3.3B activated" (read second-hand)
    "Qwen3-30B-A3B": Published({"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048, "intermediate_size": 6144, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": []}, "30532122624", "3.3B"),
    # config: huggingface.co/Qwen/Qwen3-235B-A22B config.json (copy: index id 22176531064);
    # total: huggingface.co/api/models/Qwen/Qwen3-235B-A22B; active: its model card, "22B"
    "Qwen3-235B-A22B": Published({"model_type": "qwen3_moe", "num_hidden_layers": 94, "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False, "moe_intermediate_size": 1536, "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": []}, "235093634560", "22B"),
    # config: Megatron-Bridge@067f987 tests/unit_tests/models/deepseek/test_deepseek_bridges.py
    # (= deepseek-ai/DeepSeek-V3 config.json); counts: deepseek-ai/DeepSeek-V3@9b4e978
    # README.md l.47, 93-99: 671B main model (the Hub's 685B adds the 14B MTP module), 37B
    # activated
    "DeepSeek-V3": Published({"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "intermediate_size": 18432, "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280, "tie_word_embeddings": False, "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "num_nextn_predict_layers": 1}, "671B", "37B", True),
    # config: deepseek-ai/DeepSeek-V3@9b4e978 inference/configs/config_16B.json and
    # Megatron-Bridge@dc805f5 DeepSeekV2LiteModelProvider; total:
    # huggingface.co/api/models/deepseek-ai/DeepSeek-V2-Lite; active: its model card, "2.4B"
    "DeepSeek-V2-Lite": Published({"model_type": "deepseek_v2", "num_hidden_layers": 27, "hidden_size": 2048, "intermediate_size": 10944, "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 102400, "tie_word_embeddings": False, "moe_intermediate_size": 1408, "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1, "moe_layer_freq": 1, "q_lora_rank": None, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}, "15706484224", "2.4B", True),
    # config: huggingface.co/openai/gpt-oss-20b config.json (a copy with
    # transformers_version 4.55.0.dev0, index id 35443043162); counts: the gpt-oss model
    # card, arXiv 2508.10925 Table 1 ("Unembedding parameters are counted towards active,
    # but not embeddings")
    "gpt-oss-20b": Published({"model_type": "gpt_oss", "num_hidden_layers": 24, "hidden_size": 2880, "intermediate_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088, "tie_word_embeddings": False, "num_local_experts": 32, "num_experts_per_tok": 4, "experts_per_token": 4, "sliding_window": 128}, "20.91B", "3.61B", True),
    # config: openai/gpt-oss@7b58334 gpt_oss/torch/model.py ModelConfig (36 layers, 128
    # experts) in the 20b's config.json keys; counts: the model card, Table 1
    "gpt-oss-120b": Published({"model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880, "intermediate_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088, "tie_word_embeddings": False, "num_local_experts": 128, "num_experts_per_tok": 4, "experts_per_token": 4, "sliding_window": 128}, "116.83B", "5.13B", True),
    # config: Megatron-Bridge@ebdef7c test_gemma2_bridge.py gemma2_9b_config_dict (ties by
    # Gemma2Config's default); total: huggingface.co/api/models/google/gemma-2-9b
    "Gemma-2-9B": Published({"model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584, "intermediate_size": 14336, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000}, "9241705984"),
    # config: same test, gemma2_27b_config_dict; total: .../google/gemma-2-27b
    "Gemma-2-27B": Published({"model_type": "gemma2", "num_hidden_layers": 46, "hidden_size": 4608, "intermediate_size": 36864, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "vocab_size": 256000}, "27227128320"),
    # config: NVIDIA/NeMo@1376c70 phi3mini.py Phi3ConfigMini; total:
    # huggingface.co/api/models/microsoft/Phi-3-mini-4k-instruct
    "Phi-3-mini": Published({"model_type": "phi3", "num_hidden_layers": 32, "hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32064, "tie_word_embeddings": False}, "3821079552"),
    # config: Megatron-Bridge@57852623 test_olmo2_bridge.py ("Mirror of
    # allenai/OLMo-2-1124-7B/config.json"); total: .../allenai/OLMo-2-1124-7B
    "OLMo-2-7B": Published({"model_type": "olmo2", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 100352, "tie_word_embeddings": False}, "7298617344"),
}
# fmt: on
EXACT = [name for name, row in ROWS.items() if row.total.isdigit()]
WITH_ACTIVE = [name for name, row in ROWS.items() if row.active is not None]


def figure(published: str) -> tuple[Decimal, Decimal]:
    """A published count and the unit of its last digit: "116.83B" is 116.83e9 give or take
    0.01e9, since vendors round (Qwen3-30B-A3B's 3.35B reads "3.3B") or truncate."""
    if published.isdigit():
        return Decimal(published), Decimal(1)
    number = Decimal(published.removesuffix("B"))
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    return number * 10**9, Decimal(10) ** exponent * 10**9


def assert_matches(predicted: int, published: str) -> None:
    """Within 0.1%, or to the last digit published when the figure is rounded coarser."""
    value, unit = figure(published)
    tolerance = max(value * Decimal("0.001"), unit)
    assert abs(Decimal(predicted) - value) <= tolerance, f"{predicted:,} against {published}"


def active(spec: TransformerSpec, row: Published) -> int:
    lookup = spec.input_embedding_params if row.active_without_input_embedding else 0
    return spec.active_params - lookup


@pytest.mark.parametrize("name", ROWS)
def test_import_counts_the_published_total(name: str) -> None:
    assert_matches(from_hf_config(ROWS[name].config).total_params, ROWS[name].total)


@pytest.mark.parametrize("name", WITH_ACTIVE)
def test_import_counts_the_published_active_parameters(name: str) -> None:
    row = ROWS[name]
    assert row.active is not None
    assert_matches(active(from_hf_config(row.config), row), row.active)


@pytest.mark.parametrize("name", EXACT)
def test_exact_checkpoints_exceed_the_import_by_norms_and_biases_only(name: str) -> None:
    # Llama 3.1 8B: 8,030,261,248 - 8,029,995,008 = 266,240 = 32 layers * 2 norms * 4096 +
    # the final norm; Qwen2.5 adds its QKV biases, Gemma 2 its four norms a layer
    spec = from_hf_config(ROWS[name].config)
    unmatched = int(ROWS[name].total) - spec.total_params
    assert 0 < unmatched < 0.0005 * spec.total_params


def test_qwen3_moe_as_transformers_5_writes_it_still_counts_its_narrow_experts() -> None:
    # Qwen3MoeConfig maps num_experts to num_local_experts (huggingface/transformers@008e574
    # src/transformers/models/qwen3_moe/configuration_qwen3_moe.py attribute_map), the key
    # Mixtral uses for experts as wide as intermediate_size: read that way Qwen3-30B-A3B
    # would count 48 * 128 * 3*2048*6144 = 232B of experts alone
    published = ROWS["Qwen3-30B-A3B"].config
    written = {k: v for k, v in published.items() if k != "num_experts"}
    written["num_local_experts"] = published["num_experts"]
    assert from_hf_config(written) == from_hf_config(published)


# Qwen1.5-MoE-A2.7B's config.json keys (huggingface.co/Qwen/Qwen1.5-MoE-A2.7B): one shared
# MLP 5632 wide beside 60 routed experts 1408 wide. No published count is checked here.
QWEN2_MOE = {
    "model_type": "qwen2_moe",
    "num_hidden_layers": 24,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "vocab_size": 151936,
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
}


def test_a_qwen2_moe_shared_expert_is_priced_as_whole_routed_ones() -> None:
    spec = from_hf_config(QWEN2_MOE)
    # 5632 / 1408 = 4 experts' worth: the same 3*2048*5632 matrices and FLOPs
    assert (spec.num_experts, spec.num_shared_experts, spec.dense_layers) == (60, 4, 0)
    assert spec.moe_layer_params - spec.attention_params_per_layer == 2048 * 60 + 64 * (
        3 * 2048 * 1408
    )


@pytest.mark.parametrize(
    ("layout", "dense_layers"),
    [
        ({"mlp_only_layers": [1, 0]}, 2),
        ({"mlp_layer_types": ["dense"] * 3 + ["sparse"] * 21}, 3),
        # mlp_layer_types takes priority over first_k_dense_replace
        ({"mlp_layer_types": ["dense"] + ["sparse"] * 23, "first_k_dense_replace": 3}, 1),
    ],
)
def test_leading_dense_layers_in_each_style(layout: dict[str, Any], dense_layers: int) -> None:
    assert from_hf_config({**QWEN2_MOE, **layout}).dense_layers == dense_layers


LLAMA = ROWS["Llama-3.1-8B"].config


@pytest.mark.parametrize(
    ("config", "message"),
    [
        # MoE layers listed in no regular interleaving (Llama 4's moe_layers is every n-th)
        (
            {**LLAMA, "num_local_experts": 16, "num_experts_per_tok": 1, "moe_layers": [0, 5]},
            r"moe_layers=\[0, 5\], interleave_moe_layer_step=None: MoE layers other than every",
        ),
        # an MoE count under a name not known here (ERNIE 4.5's) is not taken as dense
        ({**LLAMA, "moe_num_experts": 64, "moe_k": 8}, "moe_num_experts=64, moe_k=8"),
        ({**QWEN2_MOE, "decoder_sparse_step": 2}, r"decoder_sparse_step=2: dense layers other"),
        (
            {**QWEN2_MOE, "mlp_only_layers": [0, 5]},
            r"mlp_only_layers=\[0, 5\], decoder_sparse_step=1: dense",
        ),
        ({**QWEN2_MOE, "mlp_layer_types": ["dense", "sparse"] * 12}, "mlp_layer_types="),
        ({**QWEN2_MOE, "moe_intermediate_size": None}, "num_experts=60: routed experts without"),
        ({**QWEN2_MOE, "num_local_experts": 64}, "num_local_experts=64, num_experts=60: diff"),
        ({**QWEN2_MOE, "shared_expert_intermediate_size": 2000}, "not a whole number"),
        ({**QWEN2_MOE, "n_shared_experts": 1}, "two ways of sizing the shared experts"),
        ({**ROWS["gpt-oss-20b"].config, "experts_per_token": 2}, "num_experts_per_tok=4, exp"),
        (
            {k: v for k, v in ROWS["DeepSeek-V3"].config.items() if k != "v_head_dim"},
            r"kv_lora_rank=512 \(multi-head latent attention\) needs v_head_dim",
        ),
    ],
)
def test_layouts_not_modelled_are_refused_naming_their_keys(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidSpec, match=message):
        from_hf_config(config)


# GLM-4.5 355B-A32B's keys as Megatron-Bridge@067f987 tests/unit_tests/models/glm/
# test_glm45_bridge.py writes them (there under model_type "glm"; transformers' is glm4_moe).
GLM45 = {"model_type": "glm4_moe", "num_hidden_layers": 92, "hidden_size": 5120,
         "intermediate_size": 12288, "num_attention_heads": 96, "num_key_value_heads": 8,
         "head_dim": 128, "vocab_size": 151552, "tie_word_embeddings": False,
         "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 1,
         "num_experts_per_tok": 8, "first_k_dense_replace": 3, "partial_rotary_factor": 0.5,
         "routed_scaling_factor": 2.5, "use_qk_norm": True, "attention_bias": True}  # fmt: skip


def test_glm45_counts_by_hand() -> None:
    spec = from_hf_config(GLM45)
    h, layers, vocab = 5120, 92, 151552
    attention = h * 96 * 128 * 2 + h * 8 * 128 * 2  # q and o; k and v (GQA, head_dim 128)
    dense_mlp = 3 * h * 12288
    moe_mlp = (160 + 1) * 3 * h * 1536 + h * 160  # routed and shared experts, router
    # the import counts matrices only (norms and biases are ~1e-5 of them): 352.8B against
    # the model card's "355B", 0.6% more, which the norms do not explain (its MTP layer,
    # ~4B, is not counted here)
    assert spec.total_params == 2 * vocab * h + layers * attention + 3 * dense_mlp + 89 * moe_mlp
    active = 2 * vocab * h + layers * attention + 3 * dense_mlp
    active += 89 * ((8 + 1) * 3 * h * 1536 + h * 160)
    assert spec.active_params == active  # 33.6B with the input embedding; published "32B"


def test_kimi_k2_imports_as_the_deepseek_v3_it_is() -> None:
    # Kimi K2: DeepSeek-V3's architecture at 384 experts and 64 heads (Kimi K2 report,
    # arXiv 2507.20534, Table 2), under model_type kimi_k2
    keys = {**ROWS["DeepSeek-V3"].config, "num_attention_heads": 64, "num_key_value_heads": 64,
            "n_routed_experts": 384, "first_k_dense_replace": 1, "vocab_size": 163840}  # fmt: skip
    kimi = from_hf_config({**keys, "model_type": "kimi_k2"})
    assert kimi.model_dump(exclude={"name"}) == from_hf_config(keys).model_dump(exclude={"name"})
    assert round(kimi.total_params / 1e12, 2) == 1.03  # "1T total"; 1.026T counted


def test_a_multimodal_config_imports_its_text_model_and_says_so() -> None:
    # Gemma 3 and Mistral Small 3.1 nest the language model under text_config (transformers
    # Gemma3Config, Mistral3Config); the vision tower beside it is not priced
    text = {"model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376,
            "intermediate_size": 21504, "num_attention_heads": 32, "num_key_value_heads": 16,
            "head_dim": 128, "vocab_size": 262208}  # fmt: skip
    nested = from_hf_config({"model_type": "gemma3", "text_config": text, "vision_config": {}})
    flat = from_hf_config(text)
    assert nested.model_dump(exclude={"name"}) == flat.model_dump(exclude={"name"})
    assert nested.name == "gemma3 (text model only)" and nested.tied_embeddings


def test_every_import_says_what_it_counted() -> None:
    assert describe_import(from_hf_config(ROWS["Qwen3-30B-A3B"].config)) == (
        "imported qwen3_moe: 30.53B parameters, 3.35B active per token "
        "(3.04B without the input embedding)"
    )
    assert describe_import(from_hf_config(LLAMA)) == (
        "imported llama: 8.03B parameters (dense: all active per token)"
    )


def test_the_cli_reports_a_config_import_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(ROWS["gpt-oss-120b"].config))
    status, out, err = run_cli(["evaluate", "--model", str(path), "--gpus", "64", "--json"], capsys)
    assert status == 0 and json.loads(out)["memory_gb"]
    assert err == (
        "imported gpt_oss: 116.79B parameters, 5.71B active per token "
        "(5.13B without the input embedding); a 128-token sliding window on 18 of 36 layers\n"
    )
    # a preset is not an import: nothing to report
    assert run_cli(["evaluate", "--model", "llama3-8b", "--gpus", "64"], capsys)[2] == ""


GEMMA3_27B_TEXT = {"model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376,
                   "intermediate_size": 21504, "num_attention_heads": 32,
                   "num_key_value_heads": 16, "head_dim": 128, "vocab_size": 262208,
                   "sliding_window": 1024}  # fmt: skip


def test_sliding_windows_are_imported_with_the_layers_that_use_them() -> None:
    # where config.json lists no layer_types, transformers' family defaults decide: Gemma 2
    # and GPT-OSS window layers 0, 2, 4, ... (21 of 42, 18 of 36), Gemma 3 all but every
    # sixth (62 - 10 = 52), Qwen the layers from max_window_layers on and only when
    # use_sliding_window says so; Mistral 7B v0.1 windows every layer
    gemma2 = from_hf_config({**ROWS["Gemma-2-9B"].config, "sliding_window": 4096})
    assert (gemma2.sliding_window, gemma2.windowed_layers) == (4096, 21)
    oss = from_hf_config(ROWS["gpt-oss-120b"].config)
    assert (oss.sliding_window, oss.windowed_layers) == (128, 18)
    assert from_hf_config(GEMMA3_27B_TEXT).windowed_layers == 52
    listed = {
        **ROWS["gpt-oss-120b"].config,
        "layer_types": ["full_attention"] * 35 + ["sliding_attention"],
    }
    assert from_hf_config(listed).windowed_layers == 1
    qwen = {**ROWS["Qwen2.5-72B"].config, "sliding_window": 131072, "max_window_layers": 70}
    assert from_hf_config({**qwen, "use_sliding_window": False}).windowed_layers == 0
    assert from_hf_config(qwen).windowed_layers == 0  # Qwen's default: off
    assert from_hf_config({**qwen, "use_sliding_window": True}).windowed_layers == 10
    mistral = {**LLAMA, "model_type": "mistral", "sliding_window": 4096}
    assert from_hf_config(mistral).windowed_layers == 32
    # the window changes no parameter count
    assert gemma2.total_params == from_hf_config(ROWS["Gemma-2-9B"].config).total_params


def test_gpt_oss_clamps_its_glu_others_do_not() -> None:
    # the configs of these rows omit swiglu_limit: GptOssConfig's default, 7.0, is taken
    oss = from_hf_config(ROWS["gpt-oss-120b"].config)
    assert oss.glu_clamp == 7.0
    assert from_hf_config({**ROWS["gpt-oss-120b"].config, "swiglu_limit": 5.5}).glu_clamp == 5.5
    assert from_hf_config(ROWS["Qwen2.5-72B"].config).glu_clamp is None
    # a clamp changes no parameter count
    unclamped = oss.model_copy(update={"glu_clamp": None})
    assert unclamped.total_params == oss.total_params
    # a bad limit is named as config.json names it
    with pytest.raises(InvalidSpec, match="config.json: swiglu_limit: Input should be greater"):
        from_hf_config({**ROWS["gpt-oss-120b"].config, "swiglu_limit": -3})


def test_layers_that_are_not_attention_are_refused_not_priced_as_attention() -> None:
    # Qwen3-Next lists three linear-attention layers for each full one (transformers
    # Qwen3NextConfig layer_types); pricing them as attention would be a silent wrong answer
    hybrid = {
        **LLAMA,
        "model_type": "qwen3",
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    }
    hybrid["num_hidden_layers"] = 4
    with pytest.raises(InvalidSpec, match="linear_attention layers, which the spec does not model"):
        from_hf_config(hybrid)
