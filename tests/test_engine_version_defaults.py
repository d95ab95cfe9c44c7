"""Each engine setting's price, worked by hand; versions refusing the settings their code lacks;
and the validation rows priced by their engine's version and settings exactly as their own
assumptions priced them before they stated settings instead (the old values hard-coded below
as the rows stated them), except the host-time constants that went."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from models.errors import InvalidSpec
from optimizer.costmodel import CostAssumptions
from optimizer.engines import ENGINES, engine_assumptions, get_engine

DOCS = Path(__file__).resolve().parents[1] / "docs" / "engines.md"


# A request the settings' tests price over HTTP: Llama 3 70B at tp 4, pp 4, ZeRO-1
LLAMA_70B_ON_64: dict[str, Any] = {
    "model": "llama3-70b",
    "cluster": {"gpus": 64, "gpu": "h100-sxm"},
    "training": {"global_batch": 64, "seq_len": 8192},
    "layout": {"tp": 4, "pp": 4, "micro_batch": 1, "zero": 1, "recompute": "none"},
}


def priced(spec: str, settings: dict[str, Any] | None = None) -> CostAssumptions:
    return engine_assumptions(get_engine(spec, settings), CostAssumptions())


def test_the_engines_page_names_every_setting_and_version() -> None:
    text = DOCS.read_text()
    for engine in ENGINES.values():
        for setting in engine.settings:
            assert f"| `{setting.name}` |" in text, setting.name
        for version in engine.versions:
            assert f"`{version.name}`" in text, f"{engine.name}@{version.name}"


def test_every_default_lacked_setting_and_fact_of_a_version_is_the_engines_and_sourced() -> None:
    fields = set(CostAssumptions.model_fields)
    for engine in ENGINES.values():
        names = {s.name for s in engine.settings}
        for version in engine.versions:
            assert set(version.defaults) <= names, version.name
            assert set(version.assumptions) <= fields, version.name
            assert set(version.assumption_sources) == set(version.assumptions), version.name
            for name, value in version.defaults.items():  # each default takes its own check
                setting = next(s for s in engine.settings if s.name == name)
                assert setting.checked(list(value) if isinstance(value, tuple) else value) == value


# --- each setting's price, by hand --------------------------------------------------------


def test_nemo_1_buckets_gradients_and_optimiser_state() -> None:
    # Apex cuts bucket_cap_mb MiB of the grad_sync_dtype: 75 x 2^20 / 2 bytes in bf16, / 4
    # in fp32 (its default, the optimiser's dtype), whatever the data group
    bf16 = priced("nemo@24.09", {"grad_sync_dtype": "bf16", "bucket_cap_mb": 75})
    assert bf16.dp_bucket_params == 39_321_600 and bf16.dp_bucket_grows_with_dp is False
    assert priced("nemo@24.09", {"bucket_cap_mb": 75}).dp_bucket_params == 19_660_800
    # bf16 gradients: 2 bytes, and the distributed optimizer's bf16 reduce-scatter (1) with
    # the bf16 parameters' all-gather (1) at ZeRO-1, the gather alone at ZeRO-2
    assert (bf16.gradient_bytes_per_param, bf16.gradient_volumes_per_step) == (2, [2, 2, 1])
    fp32 = priced("nemo@24.09", {"grad_sync_dtype": "fp32"})
    assert (fp32.gradient_bytes_per_param, fp32.gradient_volumes_per_step) == (4, [4, 3, 1])
    # Adam's two moments in optim_dtype beside the master's int16 remainder, or the master
    # itself with fp8_params: fp32 8 + 2, 8 + 4; bf16 4 + 0, 4 + 2
    state = {
        ("fp32", False): 10,
        ("fp32", True): 12,
        ("bf16", False): 4,
        ("bf16", True): 6,
    }
    for (dtype, fp8_params), expected in state.items():
        stated = {"optim_dtype": dtype, "fp8_params": fp8_params}
        assert priced("nemo@24.09", stated).optimizer_bytes_per_param == expected
    assert priced("nemo@24.09").optimizer_bytes_per_param == 10  # fp32 by default
    on = priced("nemo@24.09", {"ub_tp_comm_overlap": True})
    assert (on.tp_overlap_fraction, on.tp_overlap_sm_share) == (15 / 16, 0.5)


@pytest.mark.parametrize(
    ("config", "hidden", "sm_share"),
    [
        # pipelined reduce-scatters of 4 splits: 2 x 1/4 of 8 collectives exposed
        ("te_default", 1 - 2 * (1 / 4) / 8, 0.5),
        ("userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", 0.9375, 0.5),
        # ring-exchange reduce-scatters expose one of tp steps each: 2 x 1/tp of 8
        ("userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", 1 - 2 * (1 / 4) / 8, 0.25),
        ("userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", 1 - 2 * (1 / 8) / 8, 0.25),
        ("userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", 0.9375, 0.25),
    ],
)
def test_a_userbuffers_configuration_sets_the_hidden_and_sm_shares(
    config: str, hidden: float, sm_share: float
) -> None:
    on = priced("nemo", {"tp_comm_overlap": True, "tp_comm_overlap_cfg": config})
    assert (on.tp_overlap_fraction, on.tp_overlap_sm_share) == (hidden, sm_share)
    off = priced("nemo", {"tp_comm_overlap": False, "tp_comm_overlap_cfg": config})
    assert off.tp_overlap_fraction == 0


def test_megatron_23_04s_asynchronous_backward_collectives() -> None:
    # the input gradient's collective under the weight-gradient GEMM: with sequence
    # parallelism its 2 reduce-scatters of 8, without it its 2 all-reduces (4 of 8); NCCL on SMs
    with_sp = priced("megatron@23.04", {"sequence_parallel": True})
    assert (with_sp.tp_overlap_fraction, with_sp.tp_overlap_sm_share) == (0.25, 1.0)
    without = priced("megatron@23.04")
    assert (without.tp_overlap_fraction, without.tp_overlap_sm_share) == (0.5, 1.0)
    sync = priced("megatron@23.04", {"async_tensor_model_parallel_allreduce": False})
    assert sync.tp_overlap_fraction == 0


def test_attention_loss_dispatch_and_optimiser_settings() -> None:
    assert priced("megatron@23.04").fused_attention is False  # local layers
    assert priced("megatron@23.04", {"use_flash_attn": True}).fused_attention is True
    assert priced("megatron@core_r0.8.0").fused_attention is True  # Transformer Engine
    # the loss's bytes a logit: unfused 52; Megatron-Core's fused kernels 6 + 8 + 8 + 8 + 6;
    # Transformer Engine's in place 2 + 4 + 4
    assert priced("megatron@core_r0.8.0").loss_bytes_per_logit == 52
    assert priced("megatron", {"cross_entropy_loss_fusion": True}).loss_bytes_per_logit == 36
    te = {"cross_entropy_loss_fusion": True, "cross_entropy_fusion_impl": "te"}
    assert priced("megatron", te).loss_bytes_per_logit == 10
    assert priced("nemo@26.04.01").loss_bytes_per_logit == 36  # fused, native by default
    flex = {"moe_token_dispatcher_type": "flex"}
    assert priced("nemo", flex).moe_dispatch_dedup is True  # DeepEP by default
    assert priced("nemo", flex | {"moe_flex_dispatcher_backend": "hybridep"}).moe_dispatch_dedup
    assert not priced("nemo", flex | {"moe_flex_dispatcher_backend": "ncclep"}).moe_dispatch_dedup
    alltoall = {"moe_token_dispatcher_type": "alltoall", "moe_flex_dispatcher_backend": "deepep"}
    assert not priced("nemo", alltoall).moe_dispatch_dedup
    # master weights and Adam's two moments, each in its own dtype: 4 + 2 + 2, 2 + 1 + 1
    moments = {"exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}
    assert priced("megatron", moments).optimizer_bytes_per_param == 8
    small = {"main_params_dtype": "fp16", "exp_avg_dtype": "fp8", "exp_avg_sq_dtype": "fp8"}
    assert priced("megatron", small).optimizer_bytes_per_param == 4


def test_torchtitan_and_deepspeed_settings() -> None:
    eager = priced("torchtitan@0.1.0")
    assert (eager.eager_pointwise, eager.eager_norms) == (True, True)
    fused_norm = priced("torchtitan@0.1.0", {"norm_type": "fused_rmsnorm"})
    assert (fused_norm.eager_pointwise, fused_norm.eager_norms) == (True, False)
    compiled = priced("torchtitan@0.1.0", {"compile": True})
    assert (compiled.eager_pointwise, compiled.eager_norms) == (False, False)
    current = priced("torchtitan")  # nn.RMSNorm fused in current torch
    assert (current.eager_pointwise, current.eager_norms) == (True, False)
    # foreach AdamW: weight decay 8, first moment 12, second 8 + 12, denominator 3 x 8, update
    # 16; the foreach clip's norm 4 and rescale 8. Fused: 28 + 4 + 8
    foreach = {"optimizer_implementation": "foreach"}
    assert priced("torchtitan@0.1.0", foreach).optimizer_step_bytes_per_param == 92
    assert priced("torchtitan@0.1.0").optimizer_step_bytes_per_param == 40
    reuse = priced("deepspeed", {"stage3_max_reuse_distance": 500_000_000})
    assert reuse.zero3_reuse_distance_params == 5e8
    bucket = priced("deepspeed", {"reduce_bucket_size": 200_000_000})
    assert (bucket.dp_bucket_params, bucket.dp_bucket_grows_with_dp) == (2e8, False)


@pytest.mark.parametrize(
    ("spec", "setting", "value"),
    [
        ("megatron@v2.5", "sequence_parallel", True),  # no --sequence-parallel in 2021
        ("megatron@23.04", "tp_comm_overlap", True),
        ("megatron", "async_tensor_model_parallel_allreduce", True),  # dropped since
        ("nemo@24.09", "tp_comm_overlap", True),  # NeMo 1 spells it ub_tp_comm_overlap
        ("nemo@26.04.01", "bucket_cap_mb", 75),  # NeMo 1's key
        ("torchtitan", "norm_type", "rmsnorm"),  # the code before 0.1.0
    ],
)
def test_a_version_refuses_a_setting_its_code_lacks(spec: str, setting: str, value: Any) -> None:
    with pytest.raises(InvalidSpec) as refused:
        get_engine(spec, {setting: value})
    assert refused.value.field == f"engine_settings.{setting}"
    assert spec.split("@")[0] in refused.value.message


# --- rows as their assumptions priced them -------------------------------------------------

# (the row, its engine and settings now, the assumptions it stated before)
ROWS: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "Megatron-LM SC21 GPT 3.6B on 64 A100",
        "megatron@v2.5",
        {},
        {
            "fused_attention": False,
            "dp_overlap_microbatches": 0,
            "sequence_parallel": False,
            "pp_p2p_interleaved_overlap_fraction": 0,
        },
    ),
    (
        "Korthikanti 2022 GPT 22B on 8 A100",
        "megatron@23.04",
        {"sequence_parallel": True},
        {
            "fused_attention": False,
            "dp_overlap_microbatches": 0,
            "pp_p2p_interleaved_overlap_fraction": 0,
            "tp_overlap_fraction": 0.25,
            "tp_overlap_sm_share": 1,
        },
    ),
    (
        "BigScience BLOOM 176B on 384 A100",
        "deepspeed@0.6.2",
        {},
        {
            "fused_attention": False,
            "dp_overlap_microbatches": 0,
            "gradient_bytes_per_param": 6,
            "gradient_accumulation_bytes_per_param": 18,
            "sequence_parallel": False,
        },
    ),
    (
        "Megatron-LM SC21 ZeRO-3 GPT 174.6B on 384 A100, micro-batch 4",
        "deepspeed@0.3.15",
        {},
        {
            "fused_attention": False,
            "dp_overlap_microbatches": 0,
            "zero3_overlap_fraction": 0,
            "zero3_gather_buffer_bytes_per_param": 6,
            "zero3_scatter_buffer_bytes_per_param": 8,
            "zero3_gathers_per_layer": 4,
            "zero3_reduce_scatters_per_layer": 12,
            # the host times of that release's list collectives, as the rows stated them
            "zero3_copy_per_rank_s": 3.8e-6,
            "zero3_gather_views_per_rank_s": 3e-6,
            "zero3_scatter_views_per_rank_s": 5e-6,
        },
    ),
    (
        "NVIDIA Megatron-Bridge Llama 3.1 405B on 256 GB200, cp 2",
        "nemo@26.04.01",
        {
            "grad_reduce_in_fp32": False,
            "tp_comm_overlap": True,
            "tp_comm_overlap_cfg": "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192",
            "cross_entropy_fusion_impl": "te",
        },
        {
            "gradient_bytes_per_param": 2,
            "gradient_volumes_per_step": [2, 2, 1],
            "tp_overlap_fraction": 0.9375,
            "loss_bytes_per_logit": 10,  # the engine's before it had versions
        },
    ),
    (
        "Megatron-Bridge Llama 3.1 405B on 1024 H100, FP8, 26.04.01",
        "nemo@26.04.01",
        {
            "grad_reduce_in_fp32": False,
            "fp8_param_gather": True,
            "tp_comm_overlap": True,
            "tp_comm_overlap_cfg": "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
            "cross_entropy_fusion_impl": "te",
        },
        {
            "gradient_bytes_per_param": 2,
            "gradient_volumes_per_step": [2, 2, 1],
            "fp8_params": True,
            "tp_overlap_fraction": 0.96875,
            "tp_overlap_sm_share": 0.25,
        },
    ),
    (
        "Megatron-Bridge DeepSeek-V3 (dropless) on 1024 H100, 25.09",
        "nemo@26.04.01",
        {
            "grad_reduce_in_fp32": False,
            "moe_token_dispatcher_type": "flex",
            "moe_flex_dispatcher_backend": "deepep",
            "overlap_grad_reduce": False,
            "fp8_param_gather": False,
            "recompute_modules": ["mla_up_proj", "mlp"],
            "cross_entropy_fusion_impl": "te",
        },
        {
            "gradient_bytes_per_param": 2,
            "gradient_volumes_per_step": [2, 2, 1],
            "moe_dispatch_dedup": True,
            "dp_overlap_microbatches": 0,
            "dp_sync_per_chunk": False,
            "fp8_params": False,
            "selective_recompute_modules": ["mla_up_proj", "mlp"],
        },
    ),
    (
        "NeMo 24.09 Llama 3.1 70B on 64 H100 (DGX Cloud benchmark, BF16)",
        "nemo@24.09",
        {
            "grad_sync_dtype": "bf16",
            "bucket_cap_mb": 75,
            "cross_entropy_loss_fusion": True,
            "ub_tp_comm_overlap": True,
        },
        {
            "gradient_volumes_per_step": [2, 2, 1],
            "gradient_bytes_per_param": 2,
            "optimizer_bytes_per_param": 10,
            "tp_overlap_fraction": 0.9375,
            "loss_bytes_per_logit": 36,
            "dp_bucket_params": 39321600,
            "dp_bucket_grows_with_dp": False,
        },
    ),
    (
        "NeMo 24.09 Nemotron-4 340B on 128 H100 (DGX Cloud benchmark, FP8)",
        "nemo@24.09",
        {
            "grad_sync_dtype": "bf16",
            "bucket_cap_mb": 50,
            "cross_entropy_loss_fusion": True,
            "ub_tp_comm_overlap": True,
            "fp8_params": True,
            "optim_dtype": "bf16",
        },
        {
            "gradient_volumes_per_step": [2, 2, 1],
            "gradient_bytes_per_param": 2,
            "tp_overlap_fraction": 0.9375,
            "loss_bytes_per_logit": 36,
            "dp_bucket_params": 26214400,
            "dp_bucket_grows_with_dp": False,
            "fp8_params": True,
            "optimizer_bytes_per_param": 6,
        },
    ),
    (
        "torchtitan Llama 3.1 8B on 8 H100, FSDP 8",
        "torchtitan@0.1.0",
        {"compile": False, "optimizer_implementation": "foreach", "norm_type": "rmsnorm"},
        {
            "logits_bytes_per_value": 12,
            "eager_norms": True,
            "eager_pointwise": True,
            "gqa_kv_copies": True,
            "optimizer_step_bytes_per_param": 92,
            "gradient_buffer_zeroed": False,
        },
    ),
    (
        "torchtitan Llama 3 8B on 64 A100, FSDP, selective op checkpointing",
        "torchtitan@0.1.0",
        {"compile": False, "optimizer_implementation": "foreach", "norm_type": "fused_rmsnorm"},
        {
            "eager_pointwise": True,
            "eager_norms": False,  # unset: the Triton norm
            "gqa_kv_copies": True,
            "optimizer_step_bytes_per_param": 92,
            "gradient_buffer_zeroed": False,
        },
    ),
    (
        "Megatron-Core GPT 7.1B on 96 H100 (weak scaling",
        "megatron@core_r0.8.0",
        {
            "sequence_parallel": True,
            "tp_comm_overlap": True,
            "overlap_grad_reduce": True,
            "overlap_param_gather": True,
        },
        {"tp_overlap_fraction": 0.9375, "dp_param_gather_hidden": True},
    ),
]


@pytest.mark.parametrize(("row", "spec", "settings", "old"), ROWS, ids=[r[0] for r in ROWS])
def test_a_rows_version_and_settings_price_what_its_assumptions_did(
    row: str, spec: str, settings: dict[str, Any], old: dict[str, Any]
) -> None:
    from optimizer.validation import published_runs

    run = next(run for run in published_runs() if run.name.startswith(row))
    stated = {k: list(v) if isinstance(v, tuple) else v for k, v in run.engine_settings.items()}
    assert (run.engine, stated) == (spec, settings)
    now = priced(spec, settings)
    for name, value in old.items():
        assert getattr(now, name) == value, name


def test_bridge_fp8_recipes_keep_fp8_weights_unless_a_run_states_otherwise() -> None:
    # Megatron-Bridge's FP8 and MXFP8 precision recipes set fp8_param_gather
    # (mixed_precision.py at v0.4.2 l.237, 270, 308): a 25.09-26.04 run that names fp8
    # keeps its weights in FP8 without saying so; a blockwise run states it off
    assert priced("nemo@26.04.01").fp8_params is True
    client, body = TestClient(create_app()), LLAMA_70B_ON_64 | {"engine": "nemo@25.09"}

    def weights_gb(precision: str, settings: dict[str, Any]) -> float:
        asked = body | {"engine_settings": settings}
        asked["training"] = body["training"] | {"precision": precision}
        answer = client.post("/v1/evaluate", json=asked)
        assert answer.status_code == 200, answer.text
        return float(answer.json()["memory_gb"]["weights"])

    unstated = weights_gb("fp8", {})
    assert unstated == weights_gb("fp8", {"fp8_param_gather": True})
    assert unstated < weights_gb("fp8", {"fp8_param_gather": False})
    # in bf16 there are no FP8 weights to keep either way
    assert weights_gb("bf16", {}) == weights_gb("bf16", {"fp8_param_gather": False})


def test_megatron_reduces_in_bf16_only_when_its_own_flag_says_so() -> None:
    # arguments.py l.1213-1216 at d98e8a6: --bf16 reduces in fp32 unless --grad-reduce-in-bf16
    assert priced("megatron").gradient_bytes_per_param == 4
    halved = priced("megatron", {"grad_reduce_in_bf16": True})
    assert halved.gradient_bytes_per_param == 2
    reduce_bytes = {
        s.reduce_bytes_per_value
        for s in get_engine("megatron", {"grad_reduce_in_bf16": True}).runtime.gradient_sync
    }
    assert reduce_bytes == {2}
    # the flag arrived in core_v0.12.0: core_r0.8.0 refuses it, a later release takes it
    with pytest.raises(InvalidSpec) as refused:
        get_engine("megatron@core_r0.8.0", {"grad_reduce_in_bf16": True})
    assert refused.value.field == "engine_settings.grad_reduce_in_bf16"
    assert (
        priced("megatron@core_r0.14", {"grad_reduce_in_bf16": True}).gradient_bytes_per_param == 2
    )
    client, body = TestClient(create_app()), LLAMA_70B_ON_64 | {"engine": "megatron"}
    fp32 = client.post("/v1/evaluate", json=body).json()
    bf16 = client.post(
        "/v1/evaluate", json=body | {"engine_settings": {"grad_reduce_in_bf16": True}}
    ).json()
    # 70.6B parameters over tp 4 x pp 4, two bytes fewer each (the stage with the embedding
    # or head holds more)
    assert fp32["memory_gb"]["gradients"] == pytest.approx(2 * bf16["memory_gb"]["gradients"])
    assert "--grad-reduce-in-bf16" in bf16["export"]["text"]
    assert "--grad-reduce-in-bf16" not in fp32["export"]["text"]


def test_a_parameter_gather_stated_off_is_written_off_and_priced_unhidden() -> None:
    # Megatron-LM's --overlap-param-gather is store_true; Megatron-Bridge turns it on with
    # dp > 1 (comm_overlap.py l.576-579 at v0.4.2); the export writes what is in force
    assert priced("megatron").dp_param_gather_hidden is True  # the export's
    assert priced("megatron@core_r0.8.0").dp_param_gather_hidden is False  # the library's
    assert priced("nemo@26.04.01").dp_param_gather_hidden is True
    client, body = TestClient(create_app()), LLAMA_70B_ON_64
    for engine, written_on, written_off in (
        ("megatron", "--overlap-param-gather", None),
        ("nemo", "ddp.overlap_param_gather=true", "ddp.overlap_param_gather=false"),
    ):
        on = client.post("/v1/evaluate", json=body | {"engine": engine}).json()
        off = client.post(
            "/v1/evaluate",
            json=body | {"engine": engine, "engine_settings": {"overlap_param_gather": False}},
        ).json()
        assert written_on in on["export"]["text"]
        assert written_on not in off["export"]["text"]
        if written_off is not None:
            assert written_off in off["export"]["text"]
        assert off["times_s"]["dp_comm_exposed"] > on["times_s"]["dp_comm_exposed"]
