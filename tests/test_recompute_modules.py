"""Selective recompute by module (Megatron-Core's recompute_modules): what each module frees
and replays, worked by hand from the layer as Transformer Engine's spec builds it
(docs/cost-model.md, "Selective recompute by module"), and the engines that set a list."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from models.errors import InvalidSpec
from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.costmodel.standard.recompute_modules import module_drop
from optimizer.engines import engine_assumptions, get_engine
from tests.test_mla import deepseek_v3

# DeepSeek-V3 by hand: h 7168, 61 layers of which 58 MoE (8 routed + 1 shared expert of
# 2048), 128 heads; queries 128 x 192 wide and outputs 128 x 128 (q_width, their mean,
# 20,480), keys and values 128 x (192 + 128) = 40,960.
H, MOE_SHARE = 7168, 58 / 61
# Forward matmul parameters of one layer: MLA 187,105,280; a dense MLP 3 x 7168 x 18432;
# an MoE layer's router 7168 x 256 and 9 active experts of 3 x 7168 x 2048.
ATTENTION = 187_105_280
DENSE_LAYER = ATTENTION + 3 * 7168 * 18432
MOE_LAYER = ATTENTION + 7168 * 256 + 9 * 3 * 7168 * 2048
ACTIVE = 3 * DENSE_LAYER + 58 * MOE_LAYER  # 35,697,917,952


def test_mla_up_proj_frees_the_up_projected_heads_and_replays_their_matmuls() -> None:
    assert ACTIVE == 35_697_917_952
    drop = module_drop(deepseek_v3(), ["mla_up_proj"])
    # Q, K and V as the layer counts them: 2 bytes x (20,480 + 40,960)
    assert drop.dropped_bytes_per_token == 2 * (20_480 + 40_960)
    # wq_b 1536 x 128 x 192 and wkv_b 512 x 128 x (128 + 128), in all 61 layers
    up = 1536 * 128 * 192 + 512 * 128 * 256
    assert drop.replayed_matmul_share == pytest.approx(61 * up / ACTIVE)
    assert drop.replayed_matmul_share == pytest.approx(0.093173, rel=1e-4)
    # nothing else: both norm outputs and every activation output stay saved
    assert drop.kept_norm_outputs_feeding_gemms == pytest.approx(2.0)
    # a model without latent attention has no up-projection to free or replay
    plain = module_drop(model_preset("llama3-70b"), ["mla_up_proj"])
    assert (plain.dropped_bytes_per_token, plain.replayed_matmul_share) == (0.0, 0.0)


def test_layernorm_frees_only_the_norms_that_are_separate_modules() -> None:
    # MLA's input norm is a TENorm of its own, and so is an MoE layer's pre-MLP norm;
    # moe_act frees each routed copy's activation output (2 x 2048 bytes, 8 copies)
    drop = module_drop(deepseek_v3(), ["layernorm", "moe_act"])
    norms = 2 * H * (1 + MOE_SHARE)
    assert drop.norm_outputs_dropped_bytes_per_token == pytest.approx(norms)
    assert drop.dropped_bytes_per_token == pytest.approx(norms + MOE_SHARE * 2 * 8 * 2048)
    assert drop.replayed_matmul_share == 0.0
    # a dense Llama's norms are fused into the QKV and MLP-up linears: nothing to free
    llama = model_preset("llama3-70b")
    assert module_drop(llama, ["core_attn", "layernorm"]).dropped_bytes_per_token == 0.0


def test_mlp_frees_a_dense_mlp_and_its_fused_norm_and_replays_it() -> None:
    # Llama 3 70B: gate, up and their product (6 x 28,672) and the fused norm's output (2h)
    llama = model_preset("llama3-70b")
    drop = module_drop(llama, ["mlp"])
    assert drop.dropped_bytes_per_token == 6 * 28_672 + 2 * 8192
    mlp, layer = 3 * 8192 * 28_672, 855_638_016
    assert drop.replayed_matmul_share == pytest.approx(mlp / layer)  # 0.82353
    assert drop.kept_norm_outputs_feeding_gemms == 1.0


def test_moe_frees_the_whole_expert_block() -> None:
    # every copy's intermediates (6 x 2048, the shared one's too), its dispatched input (2h)
    # and, where the combine weights outputs by probability, its output (2h)
    intermediates = 9 * 6 * 2048
    weighted_at_combine = module_drop(deepseek_v3(), ["moe"])
    in_activation = module_drop(deepseek_v3(), ["moe"], combine_saves_outputs=False)
    assert weighted_at_combine.dropped_bytes_per_token == pytest.approx(
        MOE_SHARE * (intermediates + 8 * 4 * H)
    )
    assert in_activation.dropped_bytes_per_token == pytest.approx(
        MOE_SHARE * (intermediates + 8 * 2 * H)
    )
    drop = in_activation
    experts = MOE_LAYER - ATTENTION
    assert drop.replayed_matmul_share == pytest.approx(58 * experts / ACTIVE)


def job(model: str = "llama3-70b", precision: str = "bf16") -> TrainingJob:
    return TrainingJob(
        model=model_preset(model),
        cluster=ClusterSpec(gpus=64, gpu=gpu_preset("h100-sxm")),
        training=TrainingSpec(global_batch=256, seq_len=8192, precision=precision),
    )


SELECTIVE = Layout(tp=4, pp=8, vpp=5, recompute="selective")
NONE = Layout(tp=4, pp=8, vpp=5, recompute="none")


def test_the_megatron_engines_selective_frees_only_what_their_layers_let_it() -> None:
    # core_attn, layernorm and moe_act: on a dense Llama the scores are never stored (fused
    # attention) and both norms are fused into their linears, so nothing is freed, and the
    # 2% replay is still paid; the profile's own selective mode (generic) frees norms' and
    # activations' outputs
    for engine in ("megatron", "nemo"):
        a = engine_assumptions(get_engine(engine), CostAssumptions())
        assert a.selective_recompute_modules == ["core_attn", "layernorm", "moe_act"]
        kept = evaluate(job(), SELECTIVE, "standard", a).memory.activations
        assert kept == evaluate(job(), NONE, "standard", a).memory.activations
    generic = engine_assumptions(get_engine("generic"), CostAssumptions())
    own = evaluate(job(), SELECTIVE, "standard", generic).memory.activations
    assert own < evaluate(job(), NONE, "standard", generic).memory.activations
    # on Mixtral (32 MoE layers, h 4096, top 2 of f_e 14336) it frees each layer's pre-MLP
    # norm output (2h) and both routed copies' activation outputs (2 x 2 f_e), a token
    drop = module_drop(model_preset("mixtral-8x7b"), ["core_attn", "layernorm", "moe_act"])
    assert drop.dropped_bytes_per_token == 2 * 4096 + 2 * 2 * 14336


def test_replayed_matmuls_are_priced_in_time_and_hardware_flops() -> None:
    base = CostAssumptions(selective_recompute_modules=["core_attn"])
    mlp = CostAssumptions(selective_recompute_modules=["core_attn", "mlp"])
    plain, replayed = (evaluate(job(), SELECTIVE, "standard", a) for a in (base, mlp))
    # the MLP's forward again: 2 x 80 layers x 3 x 8192 x 28672 FLOPs a token more
    tokens = 256 * 8192
    extra_flops = tokens * 2 * 80 * 3 * 8192 * 28_672
    hfu_gain = replayed.hardware_flops_utilization * replayed.step_time_s
    hfu_gain -= plain.hardware_flops_utilization * plain.step_time_s
    assert hfu_gain * 64 * 989e12 == pytest.approx(extra_flops, rel=1e-6)
    assert replayed.step_time_s > plain.step_time_s
    assert replayed.memory.activations < plain.memory.activations


def test_a_module_list_is_refused_where_the_engine_checkpoints_by_op(api: TestClient) -> None:
    with pytest.raises(ValidationError, match="every_second"):
        CostAssumptions(
            selective_recompute_modules=["mlp"], selective_recompute_matmuls="every_second"
        )
    mlp = CostAssumptions(selective_recompute_modules=["mlp"])
    with pytest.raises(InvalidSpec, match="op-level"):
        engine_assumptions(get_engine("torchtitan"), mlp)
    response = api.post(
        "/v1/evaluate",
        json={
            "model": "llama3-70b",
            "cluster": {"gpus": 64, "gpu": "h100-sxm"},
            "training": {"global_batch": 256, "seq_len": 8192},
            "layout": {"tp": 4, "pp": 8, "vpp": 5, "recompute": "selective"},
            "engine": "torchtitan",
            "assumptions": {"selective_recompute_modules": ["mlp"]},
        },
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "assumptions.selective_recompute_modules"
    assert "op-level" in error["message"] and "Traceback" not in response.text


def test_megatron_cores_experts_keep_no_output_for_the_combine() -> None:
    # DeepSeek-V3 with no recompute: 8 routed copies a token in 58 of 61 layers keep their
    # dispatched input (2h) everywhere, and their output (2h) only where the combine weights
    # it; on a tp 1, cp 1 rank of micro-batch 1 at 4,096 tokens, per layer held
    model = deepseek_v3()
    dsv3 = TrainingJob(
        model=model,
        cluster=ClusterSpec(gpus=1024, gpu=gpu_preset("h100-sxm")),
        training=TrainingSpec(global_batch=1024, seq_len=4096),
    )
    layout = Layout(tp=1, pp=16, ep=64, recompute="none")
    per_layer = MOE_SHARE * 8 * 2 * H * 4096
    combine = CostAssumptions(moe_combine_saves_expert_outputs=True)
    scatter = CostAssumptions(moe_combine_saves_expert_outputs=False)
    more, less = (evaluate(dsv3, layout, "standard", a) for a in (combine, scatter))
    # the first of 16 stages holds 4 layers (61 + 2 = 63 does not split; ceil(61 / 16)) and
    # 16 micro-batches in flight (dp 64: 16 micro-batches a step)
    held = more.memory.activations - less.memory.activations
    assert held == pytest.approx(per_layer * 4 * 16)
    mcore = engine_assumptions(get_engine("nemo"), CostAssumptions())
    assert not mcore.moe_combine_saves_expert_outputs
    assert engine_assumptions(
        get_engine("generic"), CostAssumptions()
    ).moe_combine_saves_expert_outputs
