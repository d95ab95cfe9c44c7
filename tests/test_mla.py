"""Multi-head latent attention in the spec: its projections, the widths the cost model reads,
and the checks that keep MLA and ordinary attention apart."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from models.layout import Layout
from models.presets import model_preset
from models.transformer import TransformerSpec
from optimizer.costmodel import evaluate
from tests.helpers import plate_job

# DeepSeek-V3's latent attention (deepseek-ai/DeepSeek-V3@9b4e978
# inference/configs/config_671B.json) on the deepseek-v3-shaped preset's other fields.
V3_MLA = {
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}


def deepseek_v3(**changes: Any) -> TransformerSpec:
    shaped = model_preset("deepseek-v3-shaped").model_dump()
    return TransformerSpec.model_validate({**shaped, "name": "deepseek-v3", **V3_MLA, **changes})


def test_latent_attention_counts_deepseeks_matrices() -> None:
    # wq_a 7168*1536 + wq_b 1536*128*192 = 11,010,048 + 37,748,736 (queries)
    # wkv_a 7168*(512 + 64) + wkv_b 512*128*(128 + 128) = 4,128,768 + 16,777,216 (latent)
    # wo 128*128*7168 = 117,440,512; sum 187,105,280
    assert deepseek_v3().attention_params_per_layer == 187_105_280
    # DeepSeek-V2-Lite's queries skip the bottleneck: wq 2048*16*192 = 6,291,456; then
    # 2048*576 + 512*16*256 + 16*128*2048 = 1,179,648 + 2,097,152 + 4,194,304
    lite = TransformerSpec(
        num_layers=27,
        hidden_size=2048,
        ffn_hidden_size=10944,
        num_attention_heads=16,
        num_kv_heads=16,
        vocab_size=102400,
        **{**V3_MLA, "q_lora_rank": None},
    )
    assert lite.attention_params_per_layer == 13_762_560


def test_widths_under_mla_keep_the_cost_models_sums_exact() -> None:
    spec = deepseek_v3()
    # queries 128*192 = 24,576 and outputs 128*128 = 16,384 wide: q_width is their mean, so
    # 2*q_width is the Q-plus-output activation and 12*q_width*s the QK^T-plus-AV FLOPs
    assert spec.q_width == 20_480
    assert 2 * spec.q_width == 128 * 192 + 128 * 128
    # keys (nope + rope) and values up-projected per head: 128*(192 + 128)
    assert spec.kv_width == 40_960
    # ordinary attention keeps q_width = a*hd and kv_width = 2*k*hd
    llama = model_preset("llama3-8b")
    assert (llama.q_width, llama.kv_width) == (32 * 128, 2 * 8 * 128)


def test_deepseek_v3_with_mla_counts_to_the_report() -> None:
    # 671B total and 37B active in the README (deepseek-ai/DeepSeek-V3@9b4e978 README.md
    # l.47), active without the input embedding (see TransformerSpec.active_params)
    spec = deepseek_v3()
    assert spec.total_params == pytest.approx(671e9, rel=0.001)
    assert spec.active_params - spec.input_embedding_params == pytest.approx(37e9, abs=0.5e9)


def test_the_shaped_preset_is_untouched_by_the_mla_fields() -> None:
    shaped = model_preset("deepseek-v3-shaped")
    assert not shaped.is_mla
    assert shaped.total_params == 672_148_750_336
    assert (shaped.q_width, shaped.kv_width) == (7168, 14336)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kv_lora_rank": None}, "describe multi-head latent attention and need kv_lora_rank"),
        ({"v_head_dim": None}, r"multi-head latent attention \(kv_lora_rank\) needs v_head_dim"),
        ({"head_dim": 56}, "head_dim does not apply under multi-head latent attention"),
        ({"num_kv_heads": 8}, r"num_kv_heads\(8\) must equal num_attention_heads\(128\)"),
        ({"qk_nope_head_dim": 0, "qk_rope_head_dim": 0}, "must be positive"),
    ],
)
def test_mla_fields_must_describe_one_attention(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        deepseek_v3(**changes)


def test_an_mla_model_prices_through_the_standard_profile() -> None:
    job = plate_job(gpus=2048, model=deepseek_v3(), global_batch=1024, seq_len=4096)
    layout = Layout(tp=8, pp=8, cp=2, ep=8, recompute="full")
    mla, shaped = (
        evaluate(j, layout, "standard")
        for j in (job, job.model_copy(update={"model": model_preset("deepseek-v3-shaped")}))
    )
    # attention time is linear in q_width: 20,480 against the shaped model's 7,168
    assert mla.times_s["attention"] == pytest.approx(shaped.times_s["attention"] * 20480 / 7168)
    # the context exchange carries K and V 40,960 wide against 14,336 (plus equal latency)
    assert mla.times_s["cp_comm"] > 2 * shaped.times_s["cp_comm"]
    # and MLA's attention has fewer parameters: 187M against 206M a layer
    assert mla.memory.weights < shaped.memory.weights
