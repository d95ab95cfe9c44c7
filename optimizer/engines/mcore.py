"""Megatron-Core: what Megatron-LM and Megatron-Bridge (NeMo's recipes) share.

Both build the same `TransformerConfig` / `ModelParallelConfig` / `DistributedDataParallel`
from Megatron-Core, so the knobs those classes offer and the way they synchronise gradients
are written once here (the rules they enforce in mcore_rules.py); each engine passes its own
label and its own spelling of the knobs (command-line flags or recipe fields).

Read at NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553 (megatron-core 0.20.0,
2026-08-22); the assertion texts were cross-checked at tag core_v0.16.1 (55ac7082, the newest
megatron-core on PyPI when they were read).
"""

from __future__ import annotations

from collections.abc import Mapping

from models.layout import Dimension, Recompute, Schedule
from models.transformer import TransformerSpec

from .base import (
    CpExchange,
    EngineRuntime,
    GradientSync,
    Offers,
    Overlap,
    absent,
    offered,
    sync,
)

MLM = "NVIDIA/Megatron-LM@d98e8a6"
# What --recompute-granularity selective checkpoints unless told (megatron/core/transformer/
# transformer_config.py l.1940-1941 at MLM)
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)
# What these engines' selective recompute checkpoints: Megatron-Core's default and the two
# cheap output-discarding modules NVIDIA's MoE recipes name (Megatron-Bridge's GPT-OSS
# recipes: layernorm and moe_act). Exports write the ones that apply to the model
# (mcore_settings.applicable_recompute_modules): on a dense layer the norms are fused into
# their linears and there is no expert activation, so there it is the default.
ENGINE_SELECTIVE_MODULES = ("core_attn", "layernorm", "moe_act")
CORE = f"{MLM} megatron/core"
# Megatron-Core's rank order, innermost first: initialize_model_parallel's default
# order 'tp-cp-ep-dp-pp' (experts are carved from dp x cp, so a Layout's four groups keep it)
DEFAULT_RANK_ORDER: tuple[Dimension, ...] = ("tp", "cp", "dp", "pp")

# The knobs both engines offer, by the name this module uses; each engine maps these names
# to its own spelling (e.g. "--use-distributed-optimizer", "ddp.use_distributed_optimizer").
KNOBS = (
    "tp",
    "pp",
    "cp",
    "ep",
    "sp",
    "vpp",
    "first",
    "last",
    "account_embedding",
    "account_loss",
    "layout",
    "dist_opt",
    "mfsdp",
    "sharding",
    "recompute_granularity",
    "micro",
    "global",
)
Terms = Mapping[str, str]

# Megatron-FSDP's sharding strategies, ZeRO stage by stage (`--data-parallel-sharding-strategy`,
# arguments.py:3190-3192; docs/user-guide/features/megatron_fsdp.md:435, 441-452).
FSDP_STRATEGY = {2: "optim_grads", 3: "optim_grads_params"}


def offers(terms: Terms, sources: Mapping[str, str]) -> Offers:
    """Megatron-Core's offers in one engine's spelling; `sources` adds the engine's own
    files for the knobs whose spelling lives there (keys of KNOBS)."""
    missing = sorted(set(KNOBS) - set(terms))
    if missing:
        raise ValueError(f"an engine's spelling of Megatron-Core's knobs lacks {missing}")
    schedules = f"{CORE}/pipeline_parallel/schedules.py:53-167 (get_forward_backward_func)"
    return Offers(
        schedules={
            Schedule.ONE_F_ONE_B: offered(f"{terms['pp']} > 1", schedules),
            Schedule.ZERO_BUBBLE: absent(
                f"{schedules} picks only no-pipelining, 1F1B or interleaved 1F1B; no zero-bubble "
                "schedule in megatron/core/pipeline_parallel (also at core_v0.16.1, L146-150)"
            ),
            Schedule.DUALPIPE: absent(
                f"{schedules}; combined_1f1b.py overlaps expert all-to-alls of two micro-batches "
                "inside 1F1B, it is not DualPipe's two-direction schedule"
            ),
        },
        interleaving=offered(terms["vpp"], f"{schedules}; {sources['vpp']}"),
        zero={
            0: offered(
                "(DDP, no sharding)", f"{CORE}/distributed/param_and_grad_buffer.py:710-733"
            ),
            1: offered(terms["dist_opt"], sources["dist_opt"]),
            2: offered(f"{terms['mfsdp']} + {terms['sharding']} optim_grads", sources["mfsdp"]),
            3: offered(
                f"{terms['mfsdp']} + {terms['sharding']} optim_grads_params", sources["mfsdp"]
            ),
        },
        recompute={
            Recompute.NONE: offered("(no recompute)", sources["recompute_granularity"]),
            Recompute.SELECTIVE: offered(
                f"{terms['recompute_granularity']} selective", sources["recompute_granularity"]
            ),
            Recompute.FULL: offered(
                f"{terms['recompute_granularity']} full (method uniform, 1 layer)",
                sources["recompute_granularity"],
            ),
        },
        tensor_parallel=offered(terms["tp"], f"{CORE}/model_parallel_config.py:55"),
        context_parallel=offered(terms["cp"], f"{CORE}/model_parallel_config.py:100"),
        expert_parallel=offered(terms["ep"], f"{CORE}/model_parallel_config.py:127"),
        sequence_parallel=offered(terms["sp"], f"{CORE}/model_parallel_config.py:94"),
        uneven_stages=offered(
            f"{terms['first']}/{terms['last']}, {terms['account_embedding']} and "
            f"{terms['account_loss']}, or {terms['layout']}",
            f"{CORE}/transformer/transformer_config.py:2229-2414; "
            f"{CORE}/transformer/pipeline_parallel_layer_layout.py:25-107",
        ),
    )


def moe_layers(m: TransformerSpec) -> list[int] | None:
    """Each layer MoE (1) or dense (0), the list form of TransformerConfig's moe_layer_freq
    (transformer_config.py, moe_layer_freq: an int or a list of num_layers); None when every
    layer is MoE. An interval n puts MoE at layers n-1, 2n-1, ... (TransformerSpec)."""
    n, layers = m.moe_layer_interval, range(m.num_layers)
    if n > 1:
        return [int((i + 1) % n == 0) for i in layers]
    if m.dense_layers:
        return [int(i >= m.dense_layers) for i in layers]
    return None


# --- how Megatron-Core synchronises gradients -----------------------------------------

_FP32_GRADS = (
    "fp32 reduce: --bf16 switches on accumulate_allreduce_grads_in_fp32 unless "
    f"--grad-reduce-in-bf16 ({MLM} megatron/training/arguments.py:1204-1217); with --fp16 "
    "the flag stays at its default, off, so fp16 gradients are reduced (l.1195-1203); "
    f"buffer dtype {CORE}/distributed/param_and_grad_buffer.py:924"
)
# the flag is bf16's alone: fp16 training reduces in fp16
FP16_REDUCE_BYTES = 2
_ONCE_PER_STEP = (
    f"micro-batches 0..n-2 run under no_sync ({CORE}/pipeline_parallel/schedules.py:814-839; "
    "1F1B and interleaved: disable_grad_sync/enable_grad_sync, L1127-1134, L2253-2260); "
    f"grads registered ready only on the last micro-batch ({CORE}/distributed/"
    "param_and_grad_buffer.py:863-885)"
)
_FSDP_DOC = f"{MLM} docs/user-guide/features/megatron_fsdp.md"


def gradient_sync() -> tuple[GradientSync, ...]:
    collective = f"{CORE}/distributed/param_and_grad_buffer.py:710-733"
    return (
        sync(
            0,
            "per_step",
            "all-reduce",
            4,
            "none",
            f"{_ONCE_PER_STEP}; all-reduce {collective}; {_FP32_GRADS}",
            fp16_reduce_bytes_per_value=FP16_REDUCE_BYTES,
        ),
        sync(
            1,
            "per_step",
            "reduce-scatter",
            4,
            "per_step",
            f"{_ONCE_PER_STEP}; reduce-scatter {collective}; updated params all-gathered after "
            f"the step ({MLM} docs/user-guide/features/dist_optimizer.md:39-48); {_FP32_GRADS}",
            fp16_reduce_bytes_per_value=FP16_REDUCE_BYTES,
        ),
        sync(
            2,
            "per_micro_batch",
            "reduce-scatter",
            4,
            "per_step",
            f"{_FSDP_DOC}:447-449 (reduce-scatter 'accumulated during every backward pass'); "
            "reduce precision UNVERIFIED: --megatron-fsdp-grad-comm-dtype 'auto' follows the "
            "main-grads dtype (arguments.py:3691-3698)",
        ),
        sync(
            3,
            "per_micro_batch",
            "reduce-scatter",
            4,
            "per_micro_batch",
            f"{_FSDP_DOC}:450-452; params all-gathered for forward and backward; reduce "
            "precision UNVERIFIED as for ZeRO-2",
        ),
    )


# --cp-comm-type defaults to p2p (megatron/training/arguments.py:3221): ring attention, whose
# "P2P is async and can be overlapped with attention compute", unlike all_gather
# (megatron/core/transformer/transformer_config.py:1030-1040)
RING_ATTENTION = CpExchange(
    "p2p",
    overlaps_attention=True,
    source=f"{MLM} megatron/training/arguments.py:3221; {CORE}/transformer/"
    "transformer_config.py:1030-1040",
)


def runtime(
    overlaps: tuple[Overlap, ...],
    loss_bytes_per_logit: float | None = None,
    fp8_params: bool = False,
) -> EngineRuntime:
    return EngineRuntime(
        gradient_sync=gradient_sync(),
        overlaps=overlaps,
        cp_exchange=RING_ATTENTION,
        loss_bytes_per_logit=loss_bytes_per_logit,
        fp8_params=fp8_params,
        # selective recompute as the exports write it, unless a request names its modules
        selective_recompute_modules=ENGINE_SELECTIVE_MODULES,
        # TEGroupedMLP weights each routed copy in its activation; the dispatcher's unpermute
        # takes no probabilities (MLM megatron/core/transformer/moe/experts.py l.943-980,
        # token_dispatcher.py l.891-899 and 1460-1467)
        moe_combine_saves_expert_outputs=False,
        # both exports turn on --overlap-grad-reduce (and --overlap-param-gather with the
        # distributed optimizer), and Megatron-LM aligns both across the pipeline by default
        # (megatron/training/training.py l.4356-4363)
        dp_sync_per_chunk=True,
    )
