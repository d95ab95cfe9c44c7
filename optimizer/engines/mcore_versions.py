"""The versions of the two Megatron-Core engines a request may name, oldest first, and each
one's defaults for the settings the engine declares (optimizer.engines.settings).

The newest version of each is the code the engine was read at (megatron.py, nemo.py): its
defaults are what that engine's export launches, so a bare name prices as the artefact runs.
An older one's defaults are what its code ran unless told, read at its tag; a setting its code
has no flag for is in its `lacks`, with the default that code always had.
"""

from __future__ import annotations

from .mcore import MLM
from .mcore_absent_flags import (
    ABSENT_IN_23_04,
    ABSENT_IN_CORE_R0_8_0,
    ABSENT_IN_V2_5,
)
from .settings import (
    BRIDGE,
    BRIDGE_SETTINGS,
    GRAD_REDUCE_IN_BF16,
    MCORE_SETTINGS,
    MLM_2304,
    MLM_R08,
    NEMO1,
    NEMO1_SETTINGS,
    SettingValue,
)
from .versions import EngineVersion

ARGS = f"{MLM} megatron/training/arguments.py"
ARGS_R08 = f"{MLM_R08} megatron/training/arguments.py"
ARGS_2304 = f"{MLM_2304} megatron/arguments.py"
MLM_V25 = "NVIDIA/Megatron-LM@v2.5"
BRIDGE_042 = "NVIDIA-NeMo/Megatron-Bridge@v0.4.2"
# Megatron-Core's settings and Megatron-LM's own spelling of one of them: what a release
# before core_v0.12.0 lacks unless it has it
MCORE_NAMES = frozenset(s.name for s in MCORE_SETTINGS) | {GRAD_REDUCE_IN_BF16.name}
NEMO1_NAMES = frozenset(s.name for s in NEMO1_SETTINGS)
BRIDGE_NAMES = frozenset(s.name for s in BRIDGE_SETTINGS)


def lacking(*having: str) -> frozenset[str]:
    """The Megatron-Core settings a release's code has no flag for: all but `having`."""
    return MCORE_NAMES - frozenset(having)


# What both exports write, or leave at Megatron-Core's default, at the code read.
LAUNCHED_DEFAULTS: dict[str, SettingValue] = {
    "tp_comm_overlap": False,
    "overlap_grad_reduce": True,
    "overlap_param_gather": True,
    "fp8_param_gather": True,
    "sequence_parallel": True,
    "overlap_p2p_comm": True,
    "moe_token_dispatcher_type": "alltoall",
    "overlap_moe_expert_parallel_comm": True,
}
LAUNCHED_SOURCES = {
    "tp_comm_overlap": f"{ARGS}:1441-1442 (off unless asked); the exports leave it off",
    "overlap_grad_reduce": "written by both exports (megatron.py, nemo.py)",
    "overlap_param_gather": "written by both exports with the distributed optimizer",
    "fp8_param_gather": "written by both exports under fp8/mxfp8 with the distributed optimizer",
    "sequence_parallel": "written by both exports at tp > 1",
    "overlap_p2p_comm": f"{ARGS}:3118-3120 (on with interleaving unless turned off)",
    "moe_token_dispatcher_type": "written by both exports with ep > 1",
    "overlap_moe_expert_parallel_comm": "written by both exports where Megatron-Core takes it "
    "(ep > 1, the alltoall or flex dispatcher, interleaving with pp > 1, no full recompute: "
    f"{MLM} megatron/core/transformer/transformer_config.py l.3002-3041), as NVIDIA's tuned "
    "DeepSeek-V3 and GPT-OSS recipes set it (Megatron-Bridge@067f987 src/megatron/bridge/"
    "perf_recipes/deepseek/common.py l.49-77, gpt_oss/common.py l.47-49); Megatron-Core's own "
    "default is False",
}

# Megatron-LM of the SC21 paper (Narayanan et al.): tag v2.5 = e269e20064 (2021-08-10, 'Merge
# branch sc21'), which holds the paper's commits 152aab304d, b4bc51b1e7 and e270f68af7; v2.0
# has no interleaved schedule. None of the settings has a flag there: what its code did.
V2_5 = EngineVersion(
    "v2.5",
    "2021-08",
    f"{MLM_V25} (e269e20064)",
    {
        "sequence_parallel": False,
        "transformer_impl": "local",
        "overlap_grad_reduce": False,
        "overlap_p2p_comm": False,
        "fp8_param_gather": False,
        "recompute_modules": ("core_attn",),
    },
    {
        "sequence_parallel": f"no --sequence-parallel in {MLM_V25} megatron/arguments.py (it "
        "arrives with 02bb1f5c86, 2022-03-02): norms' activations whole on every tp rank",
        "transformer_impl": f"{MLM_V25} megatron/model/transformer.py: Megatron's own layers, "
        "FusedScaleMaskSoftmax on the stored s x s scores (no flash or fused attention)",
        "overlap_grad_reduce": f"{MLM_V25} megatron/arguments.py l.578 (--DDP-impl local); "
        "megatron/training.py l.369 (allreduce_gradients() after the backward): nothing hides "
        "it (Korthikanti et al. 2022, section 6.3)",
        "overlap_p2p_comm": "no overlap_p2p_comm before f9283c5a8a (2023-05-31, first in 23.06)",
        "fp8_param_gather": "no FP8 in v2.5",
        "recompute_modules": "activation checkpointing of whole layers only; selective recompute "
        "(the attention core) arrives with Korthikanti et al.'s code (739cb43dae)",
    },
    lacks=MCORE_NAMES,
    absent_flags=ABSENT_IN_V2_5,
)

# Korthikanti et al.'s code (sequence parallelism 02bb1f5c86, selective recompute
# 739cb43dae): the first stored tag that holds it and not yet overlap_p2p_comm (f9283c5a8a).
# Upstream's v3.0 would fit the paper's dates better; it is not in the mirror read.
V23_04 = EngineVersion(
    "23.04",
    "2023-05",
    f"{MLM_2304} (2360d732a3)",
    {
        "sequence_parallel": False,
        "transformer_impl": "local",
        "use_flash_attn": False,
        "async_tensor_model_parallel_allreduce": True,
        "overlap_grad_reduce": False,
        "overlap_p2p_comm": False,
        "fp8_param_gather": False,
        "recompute_modules": ("core_attn",),
    },
    {
        "sequence_parallel": f"{ARGS_2304} l.778 (store_true)",
        "transformer_impl": f"{ARGS_2304} l.415 (default 'local')",
        "use_flash_attn": f"{ARGS_2304} l.755 (store_true)",
        "async_tensor_model_parallel_allreduce": f"{ARGS_2304} l.767-772 (on unless "
        "--no-async-tensor-model-parallel-allreduce)",
        "overlap_grad_reduce": f"no --overlap-grad-reduce in {ARGS_2304}; --DDP-impl local "
        "(l.947) reduces after the backward",
        "overlap_p2p_comm": "f9283c5a8a (overlap_p2p_comm) is not an ancestor of 23.04",
        "fp8_param_gather": f"no --fp8-param-gather in {ARGS_2304}",
        "recompute_modules": f"{ARGS_2304} --recompute-granularity selective: the attention "
        "core only (Korthikanti et al. 2022)",
    },
    lacks=lacking(
        "sequence_parallel",
        "transformer_impl",
        "use_flash_attn",
        "async_tensor_model_parallel_allreduce",
    ),
    absent_flags=ABSENT_IN_23_04,
)

# The Megatron-Core release the Megatron-LM README's H100 scaling figures name ('Megatron-Core
# r0.8.0'; added at f2e5db402c, 2024-07-15).
CORE_R0_8_0 = EngineVersion(
    "core_r0.8.0",
    "2024-08",
    f"{MLM_R08} (= core_r0.8.0, baf94af3c6)",
    {
        "sequence_parallel": False,
        "transformer_impl": "transformer_engine",
        "use_flash_attn": False,
        "tp_comm_overlap": False,
        "overlap_grad_reduce": False,
        "overlap_param_gather": False,
        "overlap_p2p_comm": True,
        "cross_entropy_loss_fusion": False,
        "moe_token_dispatcher_type": "allgather",
        "fp8_param_gather": False,
        "recompute_modules": ("core_attn",),
    },
    {
        "sequence_parallel": f"{ARGS_R08} l.1161 (store_true)",
        "transformer_impl": f"{ARGS_R08} l.668 (default 'transformer_engine')",
        "use_flash_attn": f"{ARGS_R08} l.1137 (store_true)",
        "tp_comm_overlap": f"{ARGS_R08} l.1053-1056 (store_true; --tp-comm-overlap-cfg None: "
        "Transformer Engine's default userbuffers); l.199-200 (needs --sequence-parallel)",
        "overlap_grad_reduce": f"{ARGS_R08} l.1413-1414 (default False)",
        "overlap_param_gather": f"{ARGS_R08} l.1429 (store_true; needs --overlap-grad-reduce "
        "and the distributed optimizer, l.279-285)",
        "overlap_p2p_comm": f"{ARGS_R08} l.1405 (--no-overlap-p2p-communication store_false)",
        "cross_entropy_loss_fusion": f"{ARGS_R08} l.1134 (store_true)",
        "moe_token_dispatcher_type": f"{MLM_R08} megatron/core/transformer/"
        "transformer_config.py l.256",
        "fp8_param_gather": f"no --fp8-param-gather in {ARGS_R08}",
        "recompute_modules": f"no recompute_modules in {MLM_R08} megatron/core/transformer/"
        "transformer_config.py: selective recompute is the attention core",
    },
    lacks=lacking(
        "sequence_parallel",
        "transformer_impl",
        "use_flash_attn",
        "async_tensor_model_parallel_allreduce",
        "tp_comm_overlap",
        "tp_comm_overlap_cfg",
        "overlap_grad_reduce",
        "overlap_param_gather",
        "overlap_p2p_comm",
        "ddp_bucket_size",
        "cross_entropy_loss_fusion",
        "moe_token_dispatcher_type",
    ),
    absent_flags=ABSENT_IN_CORE_R0_8_0,
)

# The code the engine was read at: Megatron-LM main at d98e8a6 (2026-08-22), which calls
# itself 0.20.0 (megatron/core/package_info.py) and had no tag yet. Named after the release
# branch it leads to, as core_r0.8.0 is; the newest tag then, core_v0.19.0 (5be9626709), lies
# on the core_r0.19.0 branch, not in d98e8a6's history, and its defaults were not read.
CORE_R0_20_0 = EngineVersion(
    "core_r0.20.0",
    "2026-08",
    f"{MLM} (d98e8a6, Megatron-Core 0.20.0 by its package_info.py, untagged)",
    LAUNCHED_DEFAULTS | {"grad_reduce_in_bf16": False},
    LAUNCHED_SOURCES
    | {"grad_reduce_in_bf16": f"{ARGS} l.3053 (store_true): fp32 under --bf16 unless asked"},
    lacks=frozenset({"async_tensor_model_parallel_allreduce"}),
)

MEGATRON_VERSIONS = (V2_5, V23_04, CORE_R0_8_0, CORE_R0_20_0)

# When each Megatron-LM release came out: the commit date of its tag in NVIDIA/Megatron-LM
# (`git log -1 --format=%cs core_v0.N.0`; core_v0.8.0 was tagged later, its branch
# core_r0.8.0 dates it; v1.0 to v2.6 the first releases), 0.20 the code read (d98e8a6). A
# request naming a release with no profile of its own (megatron@core_r0.14) is placed among
# the profiles by it.
MEGATRON_RELEASED: dict[tuple[int, ...], str] = {
    (1, 0): "2020-04-21",
    (2, 0): "2021-01-12",
    (2, 5): "2021-08-10",
    (2, 6): "2021-08-27",
    (0, 4): "2023-12-11",
    (0, 5): "2024-02-26",
    (0, 6): "2024-04-18",
    (0, 7): "2024-05-30",
    (0, 8): "2024-08-12",
    (0, 9): "2024-10-24",
    (0, 10): "2025-02-17",
    (0, 11): "2025-03-14",
    (0, 12): "2025-05-06",
    (0, 13): "2025-07-25",
    (0, 14): "2025-10-08",
    (0, 15): "2025-12-05",
    (0, 16): "2026-02-26",
    (0, 17): "2026-04-14",
    (0, 18): "2026-06-22",
    (0, 19): "2026-08-19",
    (0, 20): "2026-08-22",
}

# --- NeMo ---------------------------------------------------------------------------------

DGXC = "NVIDIA/dgxc-benchmarking@143b90d"
# NeMo Framework 24.09's NeMo 1 path (megatron_gpt_pretraining.py with megatron_amp_O2 and
# Apex's DistributedFusedAdam), as NVIDIA's DGX Cloud benchmarks ran it: NeMo 1's yaml keys,
# and of Megatron-Core's only those its yaml spells the same.
NEMO_24_09 = EngineVersion(
    "24.09",
    "2024-09",
    f"nvcr.io/nvidia/nemo:24.09 (NeMo 1 model path), as {DGXC} (v25.01) launches it",
    {
        "ub_tp_comm_overlap": False,
        "fp8_params": False,
        "optim_dtype": "fp32",
        "cross_entropy_loss_fusion": False,
    },
    {
        "ub_tp_comm_overlap": "NeMo 1 megatron_gpt_config.yaml (ub_tp_comm_overlap False); "
        "the recipes' yamls turn it on (UNVERIFIED beyond the rows' sources)",
        "fp8_params": f"{NEMO1} setup_optimization (cfg.get('fp8_params', False))",
        "optim_dtype": f"{NEMO1} setup_optimization (get_config_arg('dtype', torch.float32))",
        "cross_entropy_loss_fusion": "NeMo 1 megatron_gpt_config.yaml leaves it off: the "
        "unfused loss (UNVERIFIED in the yaml of 24.09)",
    },
    lacks=(MCORE_NAMES | BRIDGE_NAMES)
    - {"sequence_parallel", "overlap_p2p_comm", "cross_entropy_loss_fusion"},
    launcher_differs="its launcher is NeMo 1's megatron_gpt_pretraining.py and yaml, not "
    "Megatron-Bridge's scripts/training/run_recipe.py, whose overrides the export writes "
    "(Megatron-Bridge came after it); the figures are 24.09's, the export is "
    "the newest NeMo's (engine nemo)",
)

BRIDGE_LACKS = NEMO1_NAMES | {
    "async_tensor_model_parallel_allreduce",
    "use_flash_attn",
    "transformer_impl",
}
COMM_OVERLAP_042 = f"{BRIDGE_042} src/megatron/bridge/training/comm_overlap.py"

# NeMo Framework 26.04.01 = Megatron-Bridge 0.4.2 ({BRIDGE} docs/fern/docs.yml l.18;
# tag v0.4.2 = c81012934, 2026-05-28): one version for the Megatron-Bridge rows of 25.09 to
# 26.04.01, each row stating what its recipe sets.
NEMO_26_04_01 = EngineVersion(
    "26.04.01",
    "2026-05",
    f"{BRIDGE_042} (c81012934) on Megatron-Core",
    {
        "grad_reduce_in_fp32": True,
        "overlap_grad_reduce": True,
        "overlap_param_gather": True,
        "ddp_bucket_size": 128 * 1024 * 1024,
        "fp8_param_gather": True,
        "cross_entropy_loss_fusion": True,
        "cross_entropy_fusion_impl": "native",
        "moe_token_dispatcher_type": "allgather",
        "overlap_moe_expert_parallel_comm": False,
        "recompute_modules": ("core_attn",),
    },
    {
        "grad_reduce_in_fp32": f"{BRIDGE_042} src/megatron/bridge/training/mixed_precision.py "
        "l.47, 191-202 (bf16_mixed); the performance recipes turn it off",
        "overlap_grad_reduce": f"{COMM_OVERLAP_042} l.569-579 (_get_optimizer_overlap_cfgs: "
        "on with dp > 1)",
        "overlap_param_gather": f"{COMM_OVERLAP_042} l.576-579 (on with dp > 1)",
        "ddp_bucket_size": f"{COMM_OVERLAP_042} l.577 (128 x 1024 x 1024 parameters with dp > 1, "
        "fixed)",
        "fp8_param_gather": f"{BRIDGE_042} src/megatron/bridge/training/mixed_precision.py l.61 "
        "(False), set by the precision recipe a run names: the FP8 delayed and current "
        "scaling and MXFP8 recipes set it (l.237, 270, 308), so it is on where the job trains "
        "in fp8 or mxfp8 with the distributed optimizer (mcore_settings); the blockwise "
        "(subchannel) and NVFP4 recipes do not (l.390, 421): a run on them states it off",
        "cross_entropy_loss_fusion": f"{BRIDGE_042} src/megatron/bridge/models/gpt_provider.py "
        "l.196",
        "cross_entropy_fusion_impl": f"{MLM} megatron/core/model_parallel_config.py l.325 "
        "(Megatron-Core's default; the performance scripts set te)",
        "moe_token_dispatcher_type": f"{MLM} megatron/core/transformer/transformer_config.py "
        "l.891 (Megatron-Core's default; the recipes set theirs)",
        "recompute_modules": f"{MLM} megatron/core/transformer/transformer_config.py "
        "l.1940-1941 (Megatron-Core's default)",
        "overlap_moe_expert_parallel_comm": f"{COMM_OVERLAP_042} l.397, 438 (None, then False unless a "
        "recipe sets it; Megatron-Bridge's DeepSeek-V3 MXFP8 performance recipes do: "
        f"{BRIDGE} src/megatron/bridge/perf_recipes/deepseek/common.py l.49-77)",
    },
    lacks=BRIDGE_LACKS,
    # the first NeMo container on Megatron-Bridge: the performance summary's archive starts
    # at '25.09 NeMo Container' (Megatron-Bridge@067f987 docs/performance-summary-archive.md
    # l.599)
    covers_from="2025-09",
)

NEMO_VERSIONS = (
    NEMO_24_09,
    NEMO_26_04_01,
    EngineVersion(
        "bridge_0.7",
        "2026-08",
        f"{BRIDGE} (Megatron-Bridge 0.7.0) on {MLM}",
        LAUNCHED_DEFAULTS | {"grad_reduce_in_fp32": True},
        LAUNCHED_SOURCES
        | {"grad_reduce_in_fp32": "written by the export (ddp.grad_reduce_in_fp32=true)"},
        lacks=BRIDGE_LACKS,
    ),
)
