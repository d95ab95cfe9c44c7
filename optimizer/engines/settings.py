"""An engine's own named settings, as a user states them (`engine_settings`), and what each
one changes in the price.

A setting is the engine's flag or config field under its own name: the value a request
states, or else its engine version's default (optimizer.engines.versions). Each one either
rewrites how the engine runs (`runs`: its gradient sync), sets cost assumptions
(`prices`, which may read the other settings in force: a bucket in MiB needs the dtype it
holds), or both, so that a request never carries a numeric assumption to say what its engine
was told. A request's own `assumptions` still win over both.

The Megatron-Core settings both Megatron-Core engines take are here (MCORE_SETTINGS), with
NeMo 1's own keys (NEMO1_SETTINGS) for the NeMo releases before Megatron-Bridge; torchtitan's
and DeepSpeed's are beside their versions (torchtitan_versions.py, deepspeed_versions.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from models.errors import InvalidSpec

from .base import EngineRuntime

SettingValue = bool | int | str | tuple[str, ...]
InForce = Mapping[str, SettingValue]

# Megatron-Core's attention backends (megatron/core/transformer/enums.py, AttnBackend):
# `local` and `unfused` run the s x s scores through HBM; the others are fused kernels.
ATTENTION_BACKENDS = ("flash", "fused", "unfused", "local", "auto")
UNFUSED_BACKENDS = ("unfused", "local")
# the backends that name Transformer Engine's kernel: cuDNN's fused attention, or FlashAttention
KERNEL_OF_BACKEND = {"fused": True, "flash": False}
MOE_DISPATCHERS = ("allgather", "alltoall", "flex")
# the flex dispatcher's backends (transformer_config.py l.895-898 at d98e8a6); DeepEP and
# HybridEP send a token once per remote NVLink domain, NCCL's EP API is not read (UNVERIFIED)
FLEX_BACKENDS = ("deepep", "hybridep", "ncclep")
DEDUP_BACKENDS = ("deepep", "hybridep")
# bytes of a gradient value in the buffer and on the wire: fp32 or the parameters' bf16
FP32_BYTES, BF16_BYTES = 4, 2
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
MIB = 2**20

MLM = "NVIDIA/Megatron-LM@d98e8a6"
MLM_R08 = "NVIDIA/Megatron-LM@core_v0.8.0"
MLM_2304 = "NVIDIA/Megatron-LM@23.04"
BRIDGE = "NVIDIA-NeMo/Megatron-Bridge@067f987"
UB_PRESETS = f"{BRIDGE} src/megatron/bridge/training/comm_overlap.py"


@dataclass(frozen=True)
class EngineSetting:
    """One named setting: how the engine spells it, what values it takes, and what it
    changes in the price."""

    name: str  # the request's key: the engine's config field
    flag: str  # as the engine's own launch spells it
    kind: type  # bool, int, str or tuple (a list of names)
    source: str
    choices: tuple[str, ...] = ()  # for a str setting
    # the assumptions the value sets, given every setting in force
    prices: Callable[[SettingValue, InForce], dict[str, object]] | None = None
    runs: Callable[[SettingValue, EngineRuntime], EngineRuntime] | None = None
    # a setting read by another one's `prices` (e.g. a bucket's dtype) says which
    read_by: str = ""

    def checked(self, value: object) -> SettingValue:
        """`value` as the setting holds it, or InvalidSpec naming the setting."""
        where = f"engine_settings.{self.name}"
        if self.kind is tuple:
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise InvalidSpec(f"{self.name} takes a list of names", where)
            return tuple(value)
        # a JSON integer may be written 4e7 (JSON Schema counts it an integer), as every count
        if self.kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        # a JSON true is an int to Python, and 1 is no bool: each kind exactly
        if type(value) is not self.kind:
            raise InvalidSpec(f"{self.name} takes a {self.kind.__name__}", where)
        if self.choices and value not in self.choices:
            raise InvalidSpec(f"{self.name} takes one of {', '.join(self.choices)}", where)
        if self.kind is int and isinstance(value, int) and not 1 <= value <= 10**13:
            raise InvalidSpec(f"{self.name} takes a count from 1 to 1e13", where)
        assert isinstance(value, bool | int | str)
        return value


def reduced_in(value: SettingValue, runtime: EngineRuntime) -> EngineRuntime:
    """The engine's gradient sync with its buffers reduced in fp32 (True) or in the
    parameters' bf16 (False)."""
    wire = FP32_BYTES if value else BF16_BYTES
    syncs = tuple(replace(s, reduce_bytes_per_value=wire) for s in runtime.gradient_sync)
    return replace(runtime, gradient_sync=syncs)


def _gradient_buffer(value: SettingValue, _: InForce) -> dict[str, object]:
    return {"gradient_bytes_per_param": FP32_BYTES if value else BF16_BYTES}


# --- tensor-parallel overlap --------------------------------------------------------------

# Transformer Engine's userbuffers overlap a layer's 8 tensor-parallel collectives: the four
# all-gathers as ring exchanges and the two dgrad ones in bulk, all hidden; the two forward
# reduce-scatters after the output projection and MLP-down either pipelined in num_splits
# chunks, of which the last stays exposed, or as ring exchanges of tp steps, of which one
# stays exposed (docs/cost-model.md, 'Tensor parallelism'). TE's own default
# (transformer_engine/pytorch/module/base.py initialize_ub: ring_exchange for qkv_fprop,
# fc1_fprop, proj_dgrad, fc2_dgrad; pipeline for proj_fprop, fc2_fprop; bulk for the rest;
# get_default_config num_splits 4) is what --tp-comm-overlap without a config file runs.
PIPELINE_SPLITS = 4
COLLECTIVES_PER_LAYER = 8
EXPOSED_REDUCE_SCATTERS = 2
# Share of the hidden collectives whose overlap moves data with SMs (tp_overlap_sm_share),
# the cost model's rule: with pipelined reduce-scatters the two bulk dgrad all-gathers and
# the two pipelined reduce-scatters, 4 of 8; with ring-exchange ones only the bulk pair, 2 of
# 8 (ring exchanges move data with the copy engines).
SM_SHARE = {"pipeline": 0.5, "ring_exchange": 0.25}
# A userbuffers configuration by name: how it runs the forward reduce-scatters, and at which
# tp its ring has its steps (the preset's name says it).
USERBUFFERS: dict[str, tuple[str, int]] = {
    "te_default": ("pipeline", 0),
    # NVIDIA/NeMo@6f2c6fd nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py
    # l.163-174; the same in Megatron-Bridge (UB_PRESETS l.177-187)
    "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192": ("pipeline", 4),
    "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192": ("ring_exchange", 4),  # l.111-122
    "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192": ("ring_exchange", 8),  # l.164-175
    "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192": ("ring_exchange", 4),  # l.190-201
    # the other presets whose two forward reduce-scatters run one way (Megatron-Bridge@067f987
    # src/megatron/bridge/training/comm_overlap.py, the line each begins at); GPT-3 175B's
    # (h12288, tp 4, 2,048 tokens) among them. Those that mix the two ways are not offered.
    "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192": ("pipeline", 4),  # l.98
    "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192": ("pipeline", 2),  # l.124
    "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192": ("ring_exchange", 2),  # l.137
    "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192": ("pipeline", 8),  # l.151
    "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048": ("pipeline", 2),  # l.232
    "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048": ("pipeline", 2),  # l.245
    "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048": ("ring_exchange", 4),  # l.272
    "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048": ("ring_exchange", 4),  # l.285
    "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048": ("ring_exchange", 4),  # l.298
    "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096": ("ring_exchange", 2),  # l.312
    "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096": ("ring_exchange", 8),  # l.339
}


def userbuffers_overlap(config: str) -> dict[str, object]:
    """(tp_overlap_fraction, tp_overlap_sm_share) of a userbuffers configuration: the share
    of the two forward reduce-scatters left exposed, 1/num_splits pipelined or 1/tp as a ring,
    out of 8 collectives."""
    method, tp = USERBUFFERS[config]
    exposed = 1 / PIPELINE_SPLITS if method == "pipeline" else 1 / tp
    hidden = 1 - EXPOSED_REDUCE_SCATTERS * exposed / COLLECTIVES_PER_LAYER
    return {"tp_overlap_fraction": hidden, "tp_overlap_sm_share": SM_SHARE[method]}


# the hidden share of TE's default configuration: 15/16
TP_OVERLAP_HIDDEN = 1 - EXPOSED_REDUCE_SCATTERS / PIPELINE_SPLITS / COLLECTIVES_PER_LAYER


def _tp_overlap(value: SettingValue, in_force: InForce) -> dict[str, object]:
    if not value:
        return {"tp_overlap_fraction": 0.0}
    return userbuffers_overlap(str(in_force.get("tp_comm_overlap_cfg", "te_default")))


# Megatron-LM's own linear layers before Transformer Engine (megatron/core/tensor_parallel/
# layers.py l.264-325 at 23.04): the backward starts the input gradient's collective
# asynchronously and waits on it after the weight-gradient GEMM. With sequence parallelism
# that is the reduce-scatters after QKV and MLP-up, 2 of a layer's 8 collectives (the flag
# itself is turned off then, arguments.py l.343-346, the sequence-parallel path is async
# anyway); without it the two all-reduces there, 4 of 8. NCCL kernels on SMs: share 1.
ASYNC_HIDDEN_WITH_SP = 2 / COLLECTIVES_PER_LAYER
ASYNC_HIDDEN_WITHOUT_SP = 4 / COLLECTIVES_PER_LAYER


def _async_tp(value: SettingValue, in_force: InForce) -> dict[str, object]:
    if bool(in_force.get("sequence_parallel", False)):
        hidden = ASYNC_HIDDEN_WITH_SP
    elif value:
        hidden = ASYNC_HIDDEN_WITHOUT_SP
    else:
        return {}
    return {"tp_overlap_fraction": hidden, "tp_overlap_sm_share": 1.0}


# --- data-parallel sync and pipeline sends ------------------------------------------------


def _dp_overlap(value: SettingValue, _: InForce) -> dict[str, object]:
    # off: the step's reduce and gather run after the last backward, nothing hides them
    return {} if value else {"dp_overlap_microbatches": 0.0, "dp_sync_per_chunk": False}


def _p2p_overlap(value: SettingValue, _: InForce) -> dict[str, object]:
    return {"pp_p2p_interleaved_overlap_fraction": 1.0 if value else 0.0}


def fixed_bucket(value: SettingValue, _: InForce) -> dict[str, object]:
    # a stated size is kept whatever the data group (Megatron-Core grows only its default;
    # DeepSpeed's reduce_bucket_size never grows)
    assert isinstance(value, int)
    return {"dp_bucket_params": float(value), "dp_bucket_grows_with_dp": False}


def _modules(value: SettingValue, _: InForce) -> dict[str, object]:
    assert isinstance(value, tuple)
    return {"selective_recompute_modules": list(value)}


# --- kernels -------------------------------------------------------------------------------


def _transformer_impl(value: SettingValue, _: InForce) -> dict[str, object]:
    # Megatron-LM's local layers run FusedScaleMaskSoftmax on the stored s x s scores;
    # Transformer Engine's DotProductAttention picks flash or cuDNN's fused kernel itself (the
    # version's cudnn_fused_attention)
    if value == "transformer_engine":
        return {"fused_attention": True}
    return {"fused_attention": False, "cudnn_fused_attention": False}


def _flash(value: SettingValue, _: InForce) -> dict[str, object]:
    # the flash-attn package under Megatron-LM's local layers: FlashAttention, not cuDNN
    return {"fused_attention": True, "cudnn_fused_attention": False} if value else {}


def _attention_backend(value: SettingValue, _: InForce) -> dict[str, object]:
    # Megatron-Core's AttnBackend: flash sets NVTE_FLASH_ATTN=1, NVTE_FUSED_ATTN=0; fused the
    # reverse; auto leaves Transformer Engine its own choice, the version's
    # (cudnn_fused_attention; attention_kernels.py)
    values: dict[str, object] = {"fused_attention": value not in UNFUSED_BACKENDS}
    if value in KERNEL_OF_BACKEND:
        values["cudnn_fused_attention"] = KERNEL_OF_BACKEND[value]
    return values


def _nvte_fused_attn(value: SettingValue, _: InForce) -> dict[str, object]:
    # NVTE_FUSED_ATTN=0 leaves Transformer Engine FlashAttention; 1 lets it take cuDNN's
    return {"cudnn_fused_attention": bool(value)}


# HBM bytes per logit of Megatron-Core's fused cross entropy (megatron/core/fusions/
# fused_cross_entropy.py): four jit-scripted functions, counted one kernel a function, each
# reading and writing the fp32 logits once: the cast and max 6, subtract, exp and sum 8,
# divide 8; backward 8 and the cast back 6 (UNVERIFIED that each function fuses into one
# kernel), against the unfused default's 52 (loss_bytes_per_logit).
NATIVE_FUSED_LOSS_BYTES_PER_LOGIT = 6 + 8 + 8 + 8 + 6
UNFUSED_LOSS_BYTES_PER_LOGIT = 52.0
# Transformer Engine's kernel (cross_entropy_fusion_impl 'te') on the bf16 logits in place
# (NVIDIA/TransformerEngine@1b2b4a8 transformer_engine/pytorch/triton/cross_entropy.py): an
# online-softmax pass reads them (2), a second reads them and writes the gradient over them
# (2 + 2), and backward scales it by the per-token loss gradient (2 + 2).
TE_FUSED_LOSS_BYTES_PER_LOGIT = 2 + 4 + 4
FUSED_LOSS = {"native": NATIVE_FUSED_LOSS_BYTES_PER_LOGIT, "te": TE_FUSED_LOSS_BYTES_PER_LOGIT}


def _loss(value: SettingValue, in_force: InForce) -> dict[str, object]:
    if not value:
        return {"loss_bytes_per_logit": UNFUSED_LOSS_BYTES_PER_LOGIT}
    impl = str(in_force.get("cross_entropy_fusion_impl", "native"))
    return {"loss_bytes_per_logit": FUSED_LOSS[impl]}


# the dispatchers Megatron-Core runs its EP all-to-all overlap with; with allgather it refuses
# overlap_moe_expert_parallel_comm (transformer_config.py l.3002-3041 at d98e8a6)
PAIRED_OVERLAP_DISPATCHERS = ("alltoall", "flex")


def moe_dispatcher(in_force: Mapping[str, object]) -> str:
    """The token dispatcher in force: the setting's, else Megatron-Core's own default."""
    return str(in_force.get("moe_token_dispatcher_type", "alltoall"))


def _paired_overlap(asked: SettingValue, in_force: InForce) -> dict[str, object]:
    """The EP all-to-all overlap, asked, runs only beside a dispatcher that takes it; where
    it runs on a layout is the cost model's (ranks.paired_overlap_on)."""
    takes = moe_dispatcher(in_force) in PAIRED_OVERLAP_DISPATCHERS
    return {"moe_all_to_all_paired_overlap": bool(asked) and takes}


def _dispatch(value: SettingValue, in_force: InForce) -> dict[str, object]:
    backend = in_force.get("moe_flex_dispatcher_backend", "deepep")
    return {"moe_dispatch_dedup": value == "flex" and backend in DEDUP_BACKENDS}


# Milliseconds an eager MoE layer leaves the GPU waiting on the host per micro-batch (forward
# and backward): Megatron-Core's alltoall dispatcher syncs on each layer's token counts, after
# which the GPU runs as fast as Python launches kernels. Megatron-Bridge measured what TE-scoped
# CUDA graphs of attention, router and dispatch preprocessing remove on H100 (NVIDIA-NeMo/
# Megatron-Bridge@247a7ab docs/training/cuda-graphs.md): 3.3 ms a GPT-OSS-20B layer and 1.9 ms
# a Qwen3-30B-A3B layer (docs/cost-model.md, 'Host time of eager MoE layers'); launch-bound
# time follows a layer's kernels, not its width, so one figure serves: their mean.
EAGER_MOE_HOST_MS = (3.3 + 1.9) / 2
CUDA_GRAPH_IMPLS = ("none", "local", "transformer_engine", "full_iteration")


def _cuda_graphs(value: SettingValue, _: InForce) -> dict[str, object]:
    return {"moe_host_ms_per_layer": EAGER_MOE_HOST_MS if value == "none" else 0.0}


# --- optimiser state -----------------------------------------------------------------------


def _optimizer_state(_: SettingValue, in_force: InForce) -> dict[str, object]:
    """Megatron-Core's precision-aware optimiser keeps its master weights and Adam's two
    moments each in its own dtype (--main-params-dtype, --exp-avg-dtype, --exp-avg-sq-dtype,
    fp32 by default: 4 + 4 + 4)."""
    names = ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")
    state = sum(DTYPE_BYTES[str(in_force.get(name, "fp32"))] for name in names)
    return {"optimizer_bytes_per_param": float(state)}


def mcore_settings() -> tuple[EngineSetting, ...]:
    """The settings both Megatron-Core engines take, in the order their prices apply (an
    attention backend over the implementation's default, a userbuffers overlap over the
    layers' own async collectives)."""
    args = f"{MLM} megatron/training/arguments.py"
    config = f"{MLM} megatron/core/transformer/transformer_config.py"
    parallel = f"{MLM} megatron/core/model_parallel_config.py"
    dtypes = ("fp32", "fp16", "bf16", "fp8")
    return (
        EngineSetting(
            "sequence_parallel",
            "--sequence-parallel",
            bool,
            f"{parallel} l.94",
            prices=lambda v, _: {"sequence_parallel": bool(v)},
        ),
        EngineSetting(
            "transformer_impl",
            "--transformer-impl",
            str,
            f"{MLM_2304} megatron/arguments.py l.415 (default local); {MLM_R08} "
            "megatron/training/arguments.py l.668 (default transformer_engine)",
            choices=("local", "transformer_engine"),
            prices=_transformer_impl,
        ),
        EngineSetting(
            "use_flash_attn",
            "--use-flash-attn",
            bool,
            f"{MLM_2304} megatron/arguments.py l.755; {MLM_R08} megatron/training/arguments.py "
            "l.1137 (FlashAttention under the local implementation)",
            prices=_flash,
        ),
        EngineSetting(
            "attention_backend",
            "--attention-backend",
            str,
            f"{MLM} megatron/core/transformer/enums.py (AttnBackend)",
            choices=ATTENTION_BACKENDS,
            prices=_attention_backend,
        ),
        EngineSetting(
            "async_tensor_model_parallel_allreduce",
            "--no-async-tensor-model-parallel-allreduce (off)",
            bool,
            f"{MLM_2304} megatron/arguments.py l.767-772, 343-346; megatron/core/"
            "tensor_parallel/layers.py l.264-325",
            prices=_async_tp,
        ),
        EngineSetting(
            "tp_comm_overlap",
            "--tp-comm-overlap (Bridge: comm_overlap.tp_comm_overlap)",
            bool,
            f"{parallel} l.265 (tp_comm_overlap); Transformer Engine's userbuffers",
            prices=_tp_overlap,
        ),
        EngineSetting(
            "tp_comm_overlap_cfg",
            "--tp-comm-overlap-cfg (Bridge: comm_overlap.tp_comm_overlap_cfg, a preset by name)",
            str,
            f"{MLM_R08} megatron/training/arguments.py l.1053-1056 (None: TE's defaults); "
            f"{UB_PRESETS} (the presets)",
            choices=tuple(USERBUFFERS),
            read_by="tp_comm_overlap",
        ),
        EngineSetting(
            "overlap_grad_reduce",
            "--overlap-grad-reduce",
            bool,
            f"{MLM} megatron/core/distributed/distributed_data_parallel_config.py (overlap_grad_reduce)",
            prices=_dp_overlap,
        ),
        EngineSetting(
            "overlap_param_gather",
            "--overlap-param-gather",
            bool,
            f"{MLM} megatron/core/optimizer/distrib_optimizer.py l.3168-3198 (off: the "
            "all-gathers run in the optimizer step, synchronously)",
            prices=lambda v, _: {"dp_param_gather_hidden": bool(v)},
        ),
        EngineSetting(
            "grad_reduce_in_fp32",
            "--accumulate-allreduce-grads-in-fp32",
            bool,
            f"{MLM} megatron/core/distributed/param_and_grad_buffer.py l.924 (the buffer's dtype)",
            prices=_gradient_buffer,
            runs=reduced_in,
        ),
        EngineSetting(
            "fp8_param_gather",
            "--fp8-param-gather",
            bool,
            f"{config} (fp8_param)",
            prices=lambda v, _: {"fp8_params": bool(v)},
        ),
        EngineSetting(
            "overlap_p2p_comm",
            "--no-overlap-p2p-communication (off)",
            bool,
            f"{MLM} megatron/core/pipeline_parallel/schedules.py l.1697-1866",
            prices=_p2p_overlap,
        ),
        EngineSetting(
            "ddp_bucket_size",
            "--ddp-bucket-size",
            int,
            f"{MLM} megatron/core/distributed/distributed_data_parallel.py l.134",
            prices=fixed_bucket,
        ),
        EngineSetting(
            "recompute_modules",
            "--recompute-modules",
            tuple,
            f"{config} (recompute_modules)",
            prices=_modules,
        ),
        EngineSetting(
            "cross_entropy_loss_fusion",
            "--cross-entropy-loss-fusion",
            bool,
            f"{parallel} l.320-325; {MLM} megatron/core/fusions/fused_cross_entropy.py",
            prices=_loss,
        ),
        EngineSetting(
            "cross_entropy_fusion_impl",
            "--cross-entropy-fusion-impl",
            str,
            f"{parallel} l.325 (native by default; te: Transformer Engine's kernel)",
            choices=tuple(FUSED_LOSS),
            read_by="cross_entropy_loss_fusion",
        ),
        EngineSetting(
            "moe_token_dispatcher_type",
            "--moe-token-dispatcher-type",
            str,
            f"{MLM} megatron/core/transformer/moe/token_dispatcher.py; flex: DeepEP / HybridEP",
            choices=MOE_DISPATCHERS,
            prices=_dispatch,
        ),
        EngineSetting(
            "moe_flex_dispatcher_backend",
            "--moe-flex-dispatcher-backend",
            str,
            f"{config} l.895-898",
            choices=FLEX_BACKENDS,
            read_by="moe_token_dispatcher_type",
        ),
        EngineSetting(
            "overlap_moe_expert_parallel_comm",
            "--overlap-moe-expert-parallel-comm (Bridge: "
            "comm_overlap.overlap_moe_expert_parallel_comm)",
            bool,
            f"{config} l.3002-3041 (needs ep > 1, the alltoall or flex dispatcher, "
            "interleaving with pp > 1, no full recompute); "
            f"{MLM} megatron/core/pipeline_parallel/combined_1f1b.py l.55-67; from "
            "core_v0.14.0 (ae1c88296f, 2025-08-01)",
            prices=_paired_overlap,
        ),
        EngineSetting(
            "main_params_dtype",
            "--main-params-dtype (with --use-precision-aware-optimizer)",
            str,
            f"{args} l.3666-3685",
            choices=("fp32", "fp16"),
            prices=_optimizer_state,
        ),
        EngineSetting(
            "exp_avg_dtype",
            "--exp-avg-dtype (with --use-precision-aware-optimizer)",
            str,
            f"{args} l.3675-3679",
            choices=dtypes,
            prices=_optimizer_state,
        ),
        EngineSetting(
            "exp_avg_sq_dtype",
            "--exp-avg-sq-dtype (with --use-precision-aware-optimizer)",
            str,
            f"{args} l.3680-3685",
            choices=dtypes,
            prices=_optimizer_state,
        ),
        EngineSetting(
            "cuda_graph_impl",
            "--cuda-graph-impl",
            str,
            f"{MLM} megatron/core/transformer/transformer_config.py l.1075 (default none); "
            "unset here: MoE layers priced as NVIDIA's tuned recipes capture them",
            choices=CUDA_GRAPH_IMPLS,
            prices=_cuda_graphs,
        ),
    )


MCORE_SETTINGS = mcore_settings()

# Megatron-LM's own spelling of the gradient dtype: under --bf16 it reduces in fp32 unless
# --grad-reduce-in-bf16 (arguments.py l.1204-1217 at d98e8a6; the flag arrives in
# core_v0.12.0), where Megatron-Bridge states grad_reduce_in_fp32.
GRAD_REDUCE_IN_BF16 = EngineSetting(
    "grad_reduce_in_bf16",
    "--grad-reduce-in-bf16",
    bool,
    f"{MLM} megatron/training/arguments.py l.1213-1216, 3053 (store_true; the gradient buffer "
    "and its reduce in bf16, not fp32)",
    prices=lambda v, in_force: _gradient_buffer(not v, in_force),
    runs=lambda v, runtime: reduced_in(not v, runtime),
)


# --- NeMo 1 (NeMo Framework 24.x: megatron_gpt_pretraining.py, Apex's distributed Adam) ---

NEMO1 = "NVIDIA/NeMo@000316c nemo/collections/nlp/models/language_modeling/megatron_base_model.py"
APEX = "NVIDIA/apex@b7a4acc1 apex/contrib/optimizers/distributed_fused_adam.py"
TE_ATTENTION = "NVIDIA/TransformerEngine@v1.11 transformer_engine/pytorch/attention.py"


def _grad_sync_bytes(in_force: InForce) -> int:
    """Bytes of Apex's gradient buffer: grad_sync_dtype, or the optimiser's dtype, fp32, when
    unset (DistributedFusedAdam's grad_sync_dtype None)."""
    return DTYPE_BYTES[str(in_force.get("grad_sync_dtype", "fp32"))]


def _grad_sync(value: SettingValue, in_force: InForce) -> dict[str, object]:
    return _gradient_buffer(value == "fp32", in_force)


def _grad_sync_runs(value: SettingValue, runtime: EngineRuntime) -> EngineRuntime:
    return reduced_in(value == "fp32", runtime)


def _bucket_mib(value: SettingValue, in_force: InForce) -> dict[str, object]:
    # Apex cuts its buffer into bucket_cap_mb MiB of the grad_sync_dtype, whatever the group
    # (apex l.730-738)
    assert isinstance(value, int)
    params = value * MIB // _grad_sync_bytes(in_force)
    return {"dp_bucket_params": float(params), "dp_bucket_grows_with_dp": False}


# NeMo 1 keeps Adam's two moments in model.optim.dtype and, beside bf16 weights, either the
# fp32 master's 16-bit remainder (store_param_remainders) or, with fp8_params or a dtype
# other than the model's and fp32, the master itself (store_params): NEMO1,
# setup_optimization.
REMAINDER_BYTES = 2


def _optimizer_dtype(value: SettingValue, in_force: InForce) -> dict[str, object]:
    moments = 2 * DTYPE_BYTES[str(value)]
    if in_force.get("fp8_params", False):
        master = DTYPE_BYTES[str(value)]  # store_params
    else:
        master = REMAINDER_BYTES if value == "fp32" else 0  # remainders, or the bf16 weights
    return {"optimizer_bytes_per_param": float(moments + master)}


NEMO1_SETTINGS = (
    EngineSetting(
        "nvte_fused_attn",
        "NVTE_FUSED_ATTN (environment)",
        bool,
        f"{TE_ATTENTION} l.89-90, 327-337 (get_attention_backend: 0 keeps FlashAttention, 1 lets "
        "Transformer Engine take cuDNN's fused attention)",
        prices=_nvte_fused_attn,
    ),
    EngineSetting(
        "ub_tp_comm_overlap",
        "model.ub_tp_comm_overlap",
        bool,
        f"{NEMO1} _validate_and_override_config (needs sequence_parallel); Transformer "
        "Engine's default userbuffers unless the yaml names methods",
        prices=lambda v, _: userbuffers_overlap("te_default") if v else {},
    ),
    EngineSetting(
        "grad_sync_dtype",
        "model.optim.grad_sync_dtype",
        str,
        f"{APEX} l.1172-1195 (the gradient buffer and its reduce-scatter in this dtype)",
        choices=("fp32", "bf16"),
        prices=_grad_sync,
        runs=_grad_sync_runs,
    ),
    EngineSetting(
        "bucket_cap_mb",
        "model.optim.bucket_cap_mb",
        int,
        f"{APEX} l.730-738 (bucket_cap_mb MiB of grad_sync_dtype, fixed)",
        prices=_bucket_mib,
    ),
    EngineSetting(
        "fp8_params",
        "model.fp8_params",
        bool,
        f"{NEMO1} setup_optimization (store_params); Transformer Engine's fp8_model_init",
        prices=lambda v, _: {"fp8_params": bool(v)},
    ),
    EngineSetting(
        "optim_dtype",
        "model.optim.dtype",
        str,
        f"{NEMO1} setup_optimization (get_config_arg('dtype', torch.float32); store_params, "
        "store_param_remainders)",
        choices=("fp32", "bf16"),
        prices=_optimizer_dtype,
    ),
)


# --- Megatron-Bridge's performance scripts ------------------------------------------------

PERF_SCRIPTS = f"{BRIDGE} scripts/performance"


def _a2a_overlap(value: SettingValue, in_force: InForce) -> dict[str, object]:
    # off leaves the recipe's own choice (run_script.py l.73-75 keeps its base value)
    return _paired_overlap(value, in_force) if value else {}


BRIDGE_SETTINGS = (
    EngineSetting(
        "moe_a2a_overlap",
        "--moe_a2a_overlap (Megatron-Bridge's performance scripts)",
        bool,
        f"{PERF_SCRIPTS}/argument_parser.py l.843-847; utils/overrides.py l.189-199 (sets "
        "comm_overlap.overlap_moe_expert_parallel_comm and delay_wgrad_compute): priced as "
        "overlap_moe_expert_parallel_comm",
        prices=_a2a_overlap,
    ),
)


def settings_named(
    known: tuple[EngineSetting, ...], stated: Mapping[str, object], engine: str
) -> dict[str, SettingValue]:
    """`stated` checked against the engine's settings: unknown names are an error listing
    the known ones."""
    by_name = {s.name: s for s in known}
    for name in stated:
        if name not in by_name:
            offered = ", ".join(by_name) or "none"
            raise InvalidSpec(
                f"{engine} has no setting {name!r}; known: {offered}", f"engine_settings.{name}"
            )
    return {name: by_name[name].checked(value) for name, value in stated.items()}


def settings_assumptions(known: tuple[EngineSetting, ...], in_force: InForce) -> dict[str, object]:
    """The cost assumptions the settings in force set."""
    values: dict[str, object] = {}
    for setting in known:
        if setting.prices is not None and setting.name in in_force:
            values |= setting.prices(in_force[setting.name], in_force)
    return values


def settings_runtime(
    known: tuple[EngineSetting, ...], in_force: InForce, runtime: EngineRuntime
) -> EngineRuntime:
    """The engine's runtime as the settings in force change it."""
    for setting in known:
        if setting.runs is not None and setting.name in in_force:
            runtime = setting.runs(in_force[setting.name], runtime)
    return runtime
