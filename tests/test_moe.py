"""Mixture of experts: parameter counts against the papers, HF config import, ep checks."""

from __future__ import annotations

import pytest

from models.errors import InvalidSpec
from models.hardware import ClusterSpec
from models.hf_config import from_hf_config
from models.job import TrainingJob
from models.layout import Layout, resolve_layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from optimizer.costmodel import CostAssumptions
from optimizer.costmodel.grid import LayoutGrid
from optimizer.costmodel.profiles import evaluate
from optimizer.costmodel.standard import data_parallel as dpl
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard.profile import grid_degrees

MIXTRAL_CONFIG = {
    "model_type": "mixtral",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
}
DEEPSEEK_V3_CONFIG = {
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "vocab_size": 129280,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
}


def test_mixtral_counts_match_the_paper() -> None:
    # attention 4096*(4096 + 2*8*128) + 4096^2 = 41,943,040; expert 3*4096*14336 = 176,160,768
    # router 4096*8 = 32,768; layer = 41,943,040 + 32,768 + 8*176,160,768 = 1,451,262,464
    # total = 32 * 1,451,262,464 + 2*32000*4096 = 46,702,526,464 (paper: 46.7B)
    # active = 32 * (41,943,040 + 32,768 + 2*176,160,768) + 262,144,000 = 12,879,659,008 (12.9B)
    model = model_preset("mixtral-8x7b")
    assert model.total_params == 46_702_526_464
    assert model.active_layer_params + model.embedding_params == 12_879_659_008


def test_deepseek_shaped_is_near_the_report() -> None:
    # 671B total and 37B active in the report; MLA priced as MHA lands within 1% and 5%
    model = model_preset("deepseek-v3-shaped")
    assert model.total_params == pytest.approx(671e9, rel=0.01)
    assert model.active_layer_params + model.embedding_params == pytest.approx(37e9, rel=0.05)
    assert model.num_moe_layers == 58


def test_hf_import_of_moe_configs() -> None:
    assert from_hf_config(MIXTRAL_CONFIG).total_params == model_preset("mixtral-8x7b").total_params
    deepseek = from_hf_config(DEEPSEEK_V3_CONFIG)
    shaped = model_preset("deepseek-v3-shaped")
    assert (deepseek.num_experts, deepseek.experts_per_token, deepseek.dense_layers) == (256, 8, 3)
    assert deepseek.total_params == shaped.total_params


def test_hf_import_refuses_what_it_cannot_price() -> None:
    with pytest.raises(InvalidSpec, match="moe_layer_freq=2"):
        from_hf_config({**DEEPSEEK_V3_CONFIG, "moe_layer_freq": 2})
    qwen_moe = {**MIXTRAL_CONFIG, "num_local_experts": None, "num_experts": 60}
    with pytest.raises(InvalidSpec, match="num_experts=60"):
        from_hf_config(qwen_moe)


def test_moe_spec_validation_names_the_numbers() -> None:
    base = model_preset("mixtral-8x7b").model_dump()
    with pytest.raises(ValueError, match=r"experts_per_token\(9\)"):
        TransformerSpec.model_validate({**base, "experts_per_token": 9})
    with pytest.raises(ValueError, match="expert_ffn_hidden_size"):
        TransformerSpec.model_validate({**base, "expert_ffn_hidden_size": None})


def mixtral_job(gpus: int = 64) -> TrainingJob:
    return TrainingJob(
        model=model_preset("mixtral-8x7b"),
        cluster=ClusterSpec(gpus=gpus, gpu=gpu_preset("h100-sxm")),
        training=TrainingSpec(global_batch=256, seq_len=4096),
    )


def test_ep_is_carved_from_data_and_context_parallelism() -> None:
    job = mixtral_job()
    # tp 2 x pp 4 -> dp 8: ep 8 divides dp * cp = 8 and the 8 experts
    assert resolve_layout(Layout(tp=2, pp=4, ep=8), job).ep == 8
    with pytest.raises(InvalidSpec, match=r"ep\(16\) must divide dp\(8\) \* cp\(1\)"):
        resolve_layout(Layout(tp=2, pp=4, ep=16), job)
    llama = job.model_copy(update={"model": model_preset("llama3-8b")})
    with pytest.raises(InvalidSpec, match="mixture-of-experts"):
        resolve_layout(Layout(tp=2, pp=4, ep=2), llama)


def test_expert_parallelism_trades_memory_for_all_to_all() -> None:
    job = mixtral_job()
    by_ep = [evaluate(job, Layout(tp=2, pp=4, ep=ep), "standard") for ep in (1, 2, 4, 8)]
    weights = [e.memory.weights for e in by_ep]
    assert weights == sorted(weights, reverse=True) and weights[0] > 2 * weights[-1]
    all_to_all = [e.times_s["moe_all_to_all"] for e in by_ep]
    assert all_to_all[0] == 0 and all_to_all == sorted(all_to_all)


def test_workshop_warns_it_prices_moe_as_dense() -> None:
    estimate = evaluate(mixtral_job(), Layout(tp=2, pp=4), "workshop")
    assert any("mixture-of-experts" in warning for warning in estimate.warnings)


def test_experts_sync_over_their_own_data_parallel_group() -> None:
    # Mixtral on 64 H100s (8 nodes), tp 1, pp 1, dp 64, ep 8, ZeRO-1: the dense gradients
    # reduce over 64 ranks, 8 a node on 8 NICs; the experts' over every 8th rank, one a
    # node on one NIC. Latency and message-size shares off, by hand: 3 bf16 volumes a step
    # (reduce-scatter of fp32 gradients, gather of bf16 weights) of (g - 1) / g of each
    job = mixtral_job(64)
    quiet = {
        "collective_base_latency_s": 0,
        "nvlink_step_latency_s": 0,
        "network_step_latency_s": 0,
    }
    a = CostAssumptions(collective_message_size=False, **quiet)
    layout = resolve_layout(Layout(tp=1, pp=1, cp=1, ep=8, zero=1), job)
    k = grid_degrees(LayoutGrid.from_layouts([layout]))
    layers = mem.stage_layers(job.model.num_layers, k.pp, k.vpp)
    step_s = float(dpl.data_parallel_s(job, dpl.data_parallel_sync(job, a), k, layers)[0][0])
    model, nic = job.model, 50e9 * a.inter_node_bandwidth_efficiency
    experts = model.num_layers * model.num_experts * model.expert_params // 8
    dense = model.total_params - model.num_layers * model.num_experts * model.expert_params
    volumes = a.gradient_volumes_per_step[1]
    by_hand = volumes * 2 * (dense * 63 / 64 / min(8 * nic, 400e9) + experts * 7 / 8 / nic)
    assert step_s == pytest.approx(by_hand, rel=1e-6)


def test_eager_moe_layers_wait_on_the_host_per_layer_and_micro_batch() -> None:
    # DeepSeek-V3's shape: 58 of 61 layers are MoE. At pp 1 every layer is on the one stage
    # and the step runs m micro-batches back to back, so the host time adds, by hand,
    # m x 58 x 3.3 ms between the waterfall's expert all-to-all and host overhead steps
    model = from_hf_config(DEEPSEEK_V3_CONFIG)
    job = TrainingJob(
        model=model,
        cluster=ClusterSpec(gpu=gpu_preset("h100-sxm"), gpus=64),
        training=TrainingSpec(global_batch=512, seq_len=4096),
    )
    layout = Layout(tp=8, pp=1, ep=8, zero=1, recompute="full")
    graphed = evaluate(job, layout, "standard")
    eager = evaluate(job, layout, "standard", CostAssumptions(moe_host_ms_per_layer=3.3))
    micro_batches = 512 // 8  # dp 8, micro-batch 1
    added_s = micro_batches * 58 * 3.3e-3

    def step_times(estimate) -> dict[str, float]:
        return {s.name: estimate.step_time_s * estimate.mfu / s.mfu for s in estimate.mfu_steps}

    before, after = step_times(graphed), step_times(eager)
    assert graphed.times_s["moe_host"] == 0
    assert eager.times_s["moe_host"] == pytest.approx(58 / 61 * 3.3e-3)
    assert before["after host overhead"] == pytest.approx(before["after expert all-to-all"])
    gap = after["after host overhead"] - after["after expert all-to-all"]
    assert gap == pytest.approx(added_s, rel=1e-9)
    # nothing before the host step moves; a dense model has no MoE layer to wait on
    assert after["after expert all-to-all"] == pytest.approx(before["after expert all-to-all"])
    llama = job.model_copy(update={"model": model_preset("llama3-8b")})
    dense = evaluate(llama, Layout(tp=8), "standard", CostAssumptions(moe_host_ms_per_layer=3.3))
    assert dense.times_s["moe_host"] == 0
