"""The Megatron-Core settings one layout asks for, before either engine spells them.

Megatron-LM writes them as command-line flags, Megatron-Bridge as recipe overrides; both
start from the same values here so the two exports cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.job import TrainingJob
from models.layout import Layout, Recompute
from models.transformer import TransformerSpec
from optimizer.costmodel import layout_degrees, paired_overlap_on

from .mcore import DEFAULT_RECOMPUTE_MODULES, FSDP_STRATEGY
from .settings import PAIRED_OVERLAP_DISPATCHERS, moe_dispatcher
from .stages import McoreSplit, mcore_split, plan_split


@dataclass(frozen=True)
class McoreSettings:
    tp: int
    pp: int
    cp: int
    ep: int
    sequence_parallel: bool
    vpp: int | None  # None when not interleaved: Megatron-Core's "no VPP"
    split: McoreSplit
    micro_batch: int
    global_batch: int
    seq_len: int
    use_distributed_optimizer: bool
    use_megatron_fsdp: bool
    sharding_strategy: str  # Megatron-FSDP's; "no_shard" when Megatron-FSDP is off
    recompute_granularity: str | None
    recompute_method: str | None
    recompute_modules: tuple[str, ...] | None  # None: Megatron-Core's default list
    recompute_num_layers: int | None
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    # the engine's settings in force (optimizer.engines.settings), where they are not the
    # engine's own default and so must be written
    tp_comm_overlap: bool
    grad_reduce_in_fp32: bool
    fp8_param_gather: bool
    overlap_p2p_comm: bool
    attention_backend: str | None
    cuda_graph_impl: str | None
    ddp_bucket_size: int | None
    moe_token_dispatcher_type: str
    overlap_moe_expert_parallel_comm: bool


def mcore_settings(
    job: TrainingJob,
    layout: Layout,
    rank_layers: tuple[int, ...] | None = None,
    recompute_modules: tuple[str, ...] | None = None,
    in_force: Mapping[str, object] | None = None,
) -> McoreSettings:
    """Settings for a resolved layout the engine's rules accept; `rank_layers`, a stage
    plan's layers per pipeline rank, replaces the split the layout implies;
    `recompute_modules`, selective recompute's module list where it is not the default;
    `in_force`, the engine's named settings (its version's and the request's)."""
    named = dict(in_force or {})
    fsdp = layout.zero >= 2
    granularity, method, count = _recompute(layout.recompute)
    if recompute_modules is not None:
        recompute_modules = applicable_recompute_modules(job.model, recompute_modules)
    if granularity != "selective" or recompute_modules == DEFAULT_RECOMPUTE_MODULES:
        recompute_modules = None
    return McoreSettings(
        tp=layout.tp,
        pp=layout.pp,
        cp=layout.cp,
        ep=layout.ep,
        # Sequence parallelism is dropped with a warning at tp 1 (arguments.py:1431-1440)
        # and an error in core (model_parallel_config.py:502-504): only asked for at tp > 1.
        sequence_parallel=layout.tp > 1 and bool(named.get("sequence_parallel", True)),
        vpp=layout.vpp if layout.vpp > 1 else None,
        split=mcore_split(job.model.num_layers, layout.pp, layout.vpp)
        if rank_layers is None
        else plan_split(rank_layers, layout.vpp),
        micro_batch=layout.micro_batch,
        global_batch=job.training.global_batch,
        seq_len=job.training.seq_len,
        # Megatron-FSDP v1 requires (and switches on) the distributed optimizer
        # (arguments.py:1124-1135; Megatron-Bridge config.py:1079-1085).
        use_distributed_optimizer=layout.zero >= 1,
        use_megatron_fsdp=fsdp,
        sharding_strategy=FSDP_STRATEGY.get(layout.zero, "no_shard"),
        recompute_granularity=granularity,
        recompute_method=method,
        recompute_num_layers=count,
        recompute_modules=recompute_modules,
        overlap_grad_reduce=bool(named.get("overlap_grad_reduce", True)),
        # --overlap-param-gather needs a distributed optimizer and --overlap-grad-reduce
        # (arguments.py:1025-1029).
        overlap_param_gather=layout.zero >= 1
        and bool(named.get("overlap_grad_reduce", True))
        and bool(named.get("overlap_param_gather", True)),
        # userbuffers overlap needs sequence parallelism (arguments.py:1441-1442)
        tp_comm_overlap=layout.tp > 1 and bool(named.get("tp_comm_overlap", False)),
        # Megatron-Bridge's field, or Megatron-LM's --grad-reduce-in-bf16
        grad_reduce_in_fp32=bool(
            named.get("grad_reduce_in_fp32", not named.get("grad_reduce_in_bf16", False))
        ),
        # FP8 parameters need the distributed optimizer (arguments.py:1095-1097)
        fp8_param_gather=job.training.precision in ("fp8", "mxfp8")
        and layout.zero >= 1
        and bool(named.get("fp8_param_gather", True)),
        overlap_p2p_comm=bool(named.get("overlap_p2p_comm", True)),
        attention_backend=_optional(named.get("attention_backend"), str),
        cuda_graph_impl=_optional(named.get("cuda_graph_impl"), str),
        ddp_bucket_size=_optional(named.get("ddp_bucket_size"), int),
        moe_token_dispatcher_type=moe_dispatcher(named),
        # Megatron-Bridge's performance scripts spell it moe_a2a_overlap
        overlap_moe_expert_parallel_comm=bool(
            named.get("overlap_moe_expert_parallel_comm", False)
            or named.get("moe_a2a_overlap", False)
        )
        and _moe_overlap_runs(job, layout, moe_dispatcher(named)),
    )


def _moe_overlap_runs(job: TrainingJob, layout: Layout, dispatcher: str) -> bool:
    """Where --overlap-moe-expert-parallel-comm runs: where the cost model prices the expert
    all-to-all paired (ranks.paired_overlap_on: expert parallelism, 1F1B, interleaving with a
    pipeline, no full recompute, streams apart), beside a dispatcher Megatron-Core takes it
    with (settings.PAIRED_OVERLAP_DISPATCHERS). Elsewhere the exports leave it off."""
    streams_apart = job.cluster.gpu.streams_run_apart
    runs = paired_overlap_on(layout_degrees(layout), streams_apart)
    return dispatcher in PAIRED_OVERLAP_DISPATCHERS and bool(np.asarray(runs).item())


def _optional(value: object, kind: type) -> Any:
    """A setting a version may leave unset (None: the engine's own default applies)."""
    return None if value is None else kind(value)


def applicable_recompute_modules(
    model: TransformerSpec, modules: tuple[str, ...]
) -> tuple[str, ...]:
    """The modules that exist in the model's layers: Megatron-Core refuses moe_act without
    grouped GEMM experts and mla_up_proj without multi-latent attention
    (transformer_config.py:1964-1973), and layernorm frees nothing where both norms are fused
    into their linears (a dense layer of ordinary attention). Pricing them frees nothing
    either (costmodel/standard/recompute_modules.py), so dropping them changes no figure."""
    absent = set()
    if not model.is_moe:
        absent |= {"moe_act", "moe", "shared_experts"}
    if not model.is_mla:
        absent.add("mla_up_proj")
        if not model.is_moe:
            absent.add("layernorm")
    if model.is_moe and model.num_moe_layers == model.num_layers:
        absent.add("mlp")  # no dense layer
    return tuple(m for m in modules if m not in absent)


def _recompute(mode: Recompute) -> tuple[str | None, str | None, int | None]:
    """Full recompute needs a method and a layer count, selective neither
    (arguments.py:1425-1429; transformer_config.py:1901-1932). `uniform` with 1 layer
    recomputes every layer from its input: the project's `full`."""
    if mode == Recompute.FULL:
        return "full", "uniform", 1
    if mode == Recompute.SELECTIVE:
        return "selective", None, None
    return None, None, None
