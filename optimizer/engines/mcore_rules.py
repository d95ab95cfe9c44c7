"""The rules Megatron-Core enforces itself, so in both engines built on it (Megatron-LM and
Megatron-Bridge): each an EngineRule with its source line (docs/engines.md, "Rules")."""

from __future__ import annotations

import math

import numpy as np

from models.job import TrainingJob
from models.layout import Layout
from models.transformer import TransformerSpec
from optimizer.costmodel import LayoutGrid

from . import stages
from .base import EngineRule
from .mcore import CORE, MLM
from .rules import batch_identity, experts_divisible_by_ep, heads_divisible_by_tp


def rules(label: str, interleaving_source: str = "") -> tuple[EngineRule, ...]:
    """Megatron-Core's own checks; `interleaving_source` adds the engine's own check of the
    interleaved schedule, if it has one."""
    return (
        heads_divisible_by_tp(
            label,
            f"{CORE}/transformer/transformer_config.py:1446-1450 (ValueError; core_v0.16.1 L926)",
        ),
        _query_groups(label),
        _mlp_split(label),
        experts_divisible_by_ep(
            label,
            f"{CORE}/transformer/moe/moe_layer.py:186 (assert num_moe_experts % ep_size == 0); "
            f"{CORE}/transformer/transformer_config.py:1595-1596 (experts needed when ep > 1)",
        ),
        _expert_grid(label),
        batch_identity(
            label,
            "global_batch % (micro_batch * dp) == 0 (dp without cp)",
            f"{CORE}/num_microbatches_calculator.py:381-391",
        ),
        _sequence_parallel_split(label),
        _fp8_dims(label),
        _interleaving_needs_pp(label, interleaving_source),
        _interleaving_micro_batch_groups(label),
        _layer_split(label),
        _megatron_fsdp_without_pp(label),
    )


def _query_groups(label: str) -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        groups = job.model.num_kv_heads
        return np.asarray((groups % grid.tp == 0) | (grid.tp % groups == 0))

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"num_query_groups {job.model.num_kv_heads}, tp {layout.tp}"

    return EngineRule(
        "query_groups_vs_tp",
        f"{label} requires num_query_groups (KV heads) to be a multiple or divisor of tp",
        f"{CORE}/transformer/transformer_config.py:1458-1468 (ValueError; core_v0.16.1 L944)",
        check,
        detail,
    )


def _mlp_widths(model: TransformerSpec) -> list[int]:
    """The MLP widths a layer splits over tp: the dense MLP's, a routed expert's and the
    shared experts' together (expert tensor parallelism defaults to tp)."""
    widths = [model.ffn_hidden_size] if model.moe_layer_share < 1 else []
    if model.is_moe and model.expert_ffn_hidden_size:
        widths.append(model.expert_ffn_hidden_size)
        if model.num_shared_experts:
            widths.append(model.num_shared_experts * model.expert_ffn_hidden_size)
    return widths


def _mlp_split(label: str) -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        width = math.gcd(*_mlp_widths(job.model))
        return np.asarray(width % grid.tp == 0)

    def detail(job: TrainingJob, layout: Layout) -> str:
        widths = _mlp_widths(job.model)
        return f"MLP widths {widths} over tp {layout.tp}"

    return EngineRule(
        "mlp_divisible_by_tp",
        f"{label} requires each MLP width (ffn_hidden_size; an MoE model's expert and shared "
        "expert widths, split over expert tensor parallelism, tp by default) to divide by tp",
        f"{CORE}/tensor_parallel/layers.py:1038, 1408 (divide, an assert: {CORE}/utils.py:"
        f"590-599); {CORE}/model_parallel_config.py:130 (expert tp defaults to tp)",
        check,
        detail,
    )


def _expert_grid(label: str) -> EngineRule:
    """The expert grid uses cp = 1 and etp = tp by default, so CP ranks fold into expert-DP."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        product = grid.tp * grid.expert_parallel * grid.pp
        return np.asarray(job.cluster.gpus % product == 0)

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"{job.cluster.gpus} % ({layout.tp} * {layout.ep} * {layout.pp}) != 0"

    return EngineRule(
        "expert_grid",
        f"{label} requires world % (etp * ep * pp) == 0 with etp = tp (the default)",
        f"{CORE}/parallel_state.py:868-884; etp default: {CORE}/model_parallel_config.py:130",
        check,
        detail,
    )


def _sequence_parallel_split(label: str) -> EngineRule:
    """The exports turn sequence parallelism on with tp > 1 (mcore_settings), which scatters
    each cp rank's share of the sequence over tp."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        seq_len = job.training.seq_len
        per_cp_rank = seq_len // grid.cp
        return np.asarray(
            (grid.tp == 1) | ((seq_len % grid.cp == 0) & (per_cp_rank % grid.tp == 0))
        )

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"seq_len {job.training.seq_len} / cp {layout.cp} over tp {layout.tp}"

    return EngineRule(
        "sequence_parallel_split",
        f"{label} requires seq_len / cp to divide by tp when tp > 1: sequence parallelism, "
        "which the exports turn on with tensor parallelism, splits it over tp",
        f"{CORE}/tensor_parallel/mappings.py:60-74 (_split_along_first_dim, an assert)",
        check,
        detail,
    )


# The rows and reduction width a quantised GEMM's operands must divide by, per recipe: FP8's
# TN GEMM (assert_dim_for_fp8_exec, 8 rows, 16 wide), and the block scales' lengths, along
# rows for the columnwise copy and along the width for the rowwise one (MXFP8 32, NVFP4 16:
# is_quantizable of MXFP8Quantizer and NVFP4Quantizer, NVIDIA/TransformerEngine
# transformer_engine/pytorch/tensor/mxfp8_tensor.py and nvfp4_tensor.py).
QUANTISED_DIMS = {"fp8": (8, 16), "mxfp8": (32, 32), "nvfp4": (16, 16)}


def _fp8_dims(label: str) -> EngineRule:
    """Transformer Engine runs a quantised GEMM only on inputs whose rows and reduction width
    divide by its recipe's figures (QUANTISED_DIMS): a rank's tokens (each cp rank's, split
    over tp by sequence parallelism) against the hidden size, and MLP-down's input, ffn / tp
    wide."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        dims = QUANTISED_DIMS.get(job.training.precision)
        if dims is None:
            return np.asarray(True)
        rows, width = dims
        model = job.model
        rows_ok = (job.training.seq_len * grid.micro_batch) % (rows * grid.cp * grid.tp) == 0
        widths_ok = model.hidden_size % width == 0
        if model.moe_layer_share < 1:
            widths_ok = widths_ok & ((model.ffn_hidden_size // grid.tp) % width == 0)
        return np.asarray(rows_ok & widths_ok)

    def detail(job: TrainingJob, layout: Layout) -> str:
        tokens = job.training.seq_len * layout.micro_batch / (layout.cp * layout.tp)
        rows, width = QUANTISED_DIMS[job.training.precision]
        return (
            f"{job.training.precision}: {tokens:g} tokens a rank (a multiple of {rows}?), "
            f"hidden {job.model.hidden_size} and ffn {job.model.ffn_hidden_size} over tp "
            f"{layout.tp} (multiples of {width}?)"
        )

    return EngineRule(
        "fp8_dims",
        f"{label} in FP8 requires a rank's tokens (seq_len * micro_batch / (cp * tp)) to divide "
        "by 8, and the hidden size and ffn_hidden_size / tp to divide by 16; in MXFP8 both by "
        "32, in NVFP4 both by 16",
        "NVIDIA/TransformerEngine@d0067d0 transformer_engine/pytorch/utils.py:614-624 "
        "(assert_dim_for_fp8_exec, ValueError; called by module/linear.py:376, "
        "layernorm_linear.py:184, layernorm_mlp.py:356); MXFP8Quantizer.is_quantizable and "
        "NVFP4Quantizer.is_quantizable (transformer_engine/pytorch/tensor/mxfp8_tensor.py, "
        "nvfp4_tensor.py: both dimensions by the block, 32 and 16)",
        check,
        detail,
    )


def _interleaving_needs_pp(label: str, engine_source: str) -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray((grid.vpp == 1) | (grid.pp > 1))

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"vpp {layout.vpp} with pp {layout.pp}"

    return EngineRule(
        "interleaving_needs_pp",
        f"{label} requires pp > 1 for the interleaved schedule (vpp > 1)",
        "; ".join(filter(None, [f"{CORE}/parallel_state.py:827-831", engine_source])),
        check,
        detail,
    )


def _interleaving_micro_batch_groups(label: str) -> EngineRule:
    """The interleaved schedule runs micro-batches in groups of pp on each chunk (the group
    size defaults to pp) and refuses a step whose last group is short: every published
    interleaved Megatron layout in the validation data keeps it."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        per_group = grid.micro_batch * grid.dp * grid.pp
        return np.asarray((grid.vpp == 1) | (job.training.global_batch % per_group == 0))

    def detail(job: TrainingJob, layout: Layout) -> str:
        batch, dp = job.training.global_batch, layout.data_parallel_size
        return (
            f"{batch} sequences in micro-batches of {layout.micro_batch} over dp {dp}: "
            f"not a multiple of pp {layout.pp}"
        )

    return EngineRule(
        "interleaving_micro_batch_groups",
        f"{label} requires the micro-batches a step, global_batch / (micro_batch * dp), to be "
        "a multiple of pp for the interleaved schedule (vpp > 1)",
        f"{CORE}/pipeline_parallel/schedules.py:1160-1180 (ValueError, RuntimeError); "
        f"{CORE}/model_parallel_config.py:567-568 (microbatch_group_size_per_vp_stage = pp); "
        "core_r0.8.0 megatron/core/pipeline_parallel/schedules.py:613-616",
        check,
        detail,
    )


def _layer_split(label: str) -> EngineRule:
    """Any split is accepted through a layout string; the others are checked as written."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        layers, pp, vpp = job.model.num_layers, grid.pp, grid.vpp
        by_flags = (
            stages.mcore_even(layers, pp, vpp)
            | stages.mcore_first_last(layers, pp, vpp)
            | stages.mcore_account_for(layers, pp, vpp)
        )
        by_layout = pp * vpp <= layers  # the layout string takes any split with a layer a chunk
        return np.asarray(by_flags | by_layout)

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"{job.model.num_layers} layers on {layout.pp * layout.vpp} chunks"

    return EngineRule(
        "layer_split",
        f"{label} requires the layers to split over pp * vpp chunks: evenly (layers % pp == 0 "
        "and per rank % vpp == 0), with uneven first/last stages (each > 0 and % vpp == 0, the "
        "middle % (pp - 2) == 0 and per middle rank % vpp == 0), with embedding and loss counted "
        "as layers ((layers + 2) % (pp * vpp) == 0), or by an explicit pipeline layout",
        f"{CORE}/transformer/transformer_block.py:76-178; "
        f"{CORE}/transformer/transformer_config.py:2229-2414; "
        f"{CORE}/transformer/pipeline_parallel_layer_layout.py:41-45, 86-107",
        check,
        detail,
    )


def _megatron_fsdp_without_pp(label: str) -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray((grid.zero < 2) | (grid.pp == 1))

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"zero {layout.zero} with pp {layout.pp}"

    return EngineRule(
        "megatron_fsdp_without_pp",
        f"{label} shards gradients (ZeRO-2/3) only through Megatron-FSDP, which this project "
        "exports only at pp == 1",
        "UNVERIFIED for Megatron-FSDP v1 with pp > 1: no check in megatron/training/arguments.py "
        "(L1118-1191) forbids it, but every Megatron-FSDP functional test runs pp 1 "
        f"({MLM} tests/functional_tests/test_cases/*fsdp*/model_config.yaml) and v2 refuses "
        f"pp > 1 ({CORE}/distributed/fsdp/mcore_fsdp_adapter.py:627-638)",
        check,
        detail,
    )
