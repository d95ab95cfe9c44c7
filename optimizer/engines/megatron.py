"""Megatron-LM (`pretrain_gpt.py`): Megatron-Core's rules plus those of its own argument
validation, and the command-line arguments that run a layout.

Read at NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553 (0.20.0). The flag set
was confirmed by building that commit's parser on CPU (877 option strings, research notes
section 1.1). The PyPI `megatron-core` wheel (0.16.1) ships only megatron/core: the training
script and its parser exist only in the git repository.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from models.job import TrainingJob
from models.layout import Dimension, Layout
from models.transformer import TransformerSpec

from . import mcore, mcore_rules
from .base import Artefact, Engine, Overlap, model_named
from .mcore import MLM
from .mcore_settings import McoreSettings, mcore_settings
from .mcore_versions import MEGATRON_RELEASED, MEGATRON_VERSIONS
from .rules import offer_rules, seq_len_divisible_by_2cp
from .settings import GRAD_REDUCE_IN_BF16, MCORE_SETTINGS

LABEL = "Megatron-LM"
ARGS = f"{MLM} megatron/training/arguments.py"
TC = f"{MLM} megatron/core/transformer/transformer_config.py"

# Megatron-Core's knobs as Megatron-LM's flags. Generated flags are "--" plus the config
# field with "_" -> "-" (argument_utils.py:97-110); fields in the exclude list
# (arguments.py:2279-2372: vpp, uneven first/last, the layout, experts) have hand-written ones.
FLAGS = {
    "tp": "--tensor-model-parallel-size",  # model_parallel_config.py:55
    "pp": "--pipeline-model-parallel-size",  # :83
    "cp": "--context-parallel-size",  # :100
    "ep": "--expert-model-parallel-size",  # :127
    "sp": "--sequence-parallel",  # :94
    "vpp": "--num-virtual-stages-per-pipeline-rank",  # arguments.py:3116
    "vpp_layers": "--num-layers-per-virtual-pipeline-stage",  # arguments.py:3114
    "first": "--decoder-first-pipeline-num-layers",  # arguments.py:3095
    "last": "--decoder-last-pipeline-num-layers",  # arguments.py:3099
    "account_embedding": "--account-for-embedding-in-pipeline-split",  # transformer_config.py:137
    "account_loss": "--account-for-loss-in-pipeline-split",  # :141
    "layout": "--pipeline-model-parallel-layout",  # arguments.py:3103
    "dist_opt": "--use-distributed-optimizer",  # arguments.py:3156
    "mfsdp": "--use-megatron-fsdp",  # megatron/training/config/common_config.py:92
    "sharding": "--data-parallel-sharding-strategy",  # arguments.py:3190-3192
    "recompute_granularity": "--recompute-granularity",  # transformer_config.py:532
    "micro": "--micro-batch-size",  # megatron/training/config/training_config.py:11
    "global": "--global-batch-size",  # training_config.py:15
}
SOURCES = {
    "vpp": f"{ARGS}:926-977 (at most one of the three VPP flags; uneven stages need "
    "--num-virtual-stages-per-pipeline-rank)",
    "dist_opt": f"{ARGS}:3156",
    "mfsdp": f"{ARGS}:1118-1191, 3190-3192; {MLM} docs/user-guide/features/megatron_fsdp.md:435-452",
    "recompute_granularity": f"{TC}:532-560; {ARGS}:1425-1429",
}

OVERLAPS = (
    Overlap(
        "grad_reduce",
        default_on=False,
        exported_on=True,
        when="always (bucketed, with the last micro-batch's backward)",
        source=f"{ARGS}:3121-3122 (--overlap-grad-reduce, default False)",
    ),
    Overlap(
        "param_gather",
        default_on=False,
        exported_on=True,
        when="distributed optimizer or Megatron-FSDP, with --overlap-grad-reduce",
        source=f"{ARGS}:3148-3149 (default False); requirements {ARGS}:1025-1029",
    ),
    Overlap(
        "tp_comm",
        default_on=False,
        exported_on=False,
        when="sequence parallelism and Transformer Engine userbuffers",
        source=f"{MLM} megatron/core/model_parallel_config.py:265; {ARGS}:1441-1442",
    ),
    Overlap(
        "p2p",
        default_on=True,
        exported_on=True,
        when="interleaved schedule only (forced off without vpp)",
        source=f"{ARGS}:3118-3120 (--no-overlap-p2p-communication turns it off), 1000-1018",
    ),
)


def export(
    job: TrainingJob,
    layout: Layout,
    rank_layers: tuple[int, ...] | None = None,
    recompute_modules: tuple[str, ...] | None = None,
    settings: Mapping[str, object] | None = None,
) -> Artefact:
    """`pretrain_gpt.py` arguments, one flag per line, shell-quoted; `rank_layers`: a stage
    plan's layers per rank, written as an explicit pipeline layout; `recompute_modules`: the
    request's selective module list; `settings`: the engine's settings in force."""
    s = mcore_settings(job, layout, rank_layers, recompute_modules, settings)
    order_pairs, order_note = _rank_order(layout)
    pairs = (
        _parallel(s)
        + order_pairs
        + _split(s, job.model.num_layers)
        + _batch_and_optimizer(s)
        + _recompute(s)
        + _precision(job, s)
        + _kernels_and_overlaps(s)
        + _model_shape(job)
    )
    body = " \\\n".join(
        flag if value is None else f"{flag} {shlex.quote(value)}" for flag, value in pairs
    )
    header = (
        (
            f"# {LABEL} ({MLM}) pretrain_gpt.py arguments for {model_named(job)} on "
            f"{job.cluster.gpus} GPUs: tp {layout.tp} x pp {layout.pp} x cp {layout.cp} x dp "
            f"{layout.dp}, vpp {layout.vpp}, ep {layout.ep}, micro-batch {layout.micro_batch}, "
            f"ZeRO-{layout.zero}, recompute {layout.recompute.value}.\n"
            "# Data, tokenizer, learning-rate and checkpoint flags are yours to add.\n"
        )
        + order_note
        + _unwritten_attention(job)
    )
    return Artefact("megatron", "megatron-args", "megatron_args.sh", header + body + "\n")


def _rank_order(layout: Layout) -> tuple[Pairs, str]:
    """The flag that lays ranks as the layout's placement does, and a header line when
    Megatron-LM lays them in neither of its orders (a placement the request fixed). Groups
    of one rank do not count: their place changes nothing."""
    placed = _effective(layout.placement, layout)
    if placed == _effective(DEFAULT_ORDER, layout):
        return [], ""
    if placed == _effective(PP_DP_ORDER, layout):
        return [(USE_PP_DP_ORDER, None)], ""
    note = (
        f"# Priced with the groups placed {'<'.join(layout.placement)} (innermost first), an "
        f"order {LABEL} does not lay ranks in (tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with "
        f"{USE_PP_DP_ORDER}): it runs tp<cp<dp<pp, whose links differ from the price.\n"
    )
    return [], note


def _effective(order: tuple[str, ...], layout: Layout) -> tuple[str, ...]:
    return tuple(dim for dim in order if getattr(layout, dim) > 1)


def _unwritten_attention(job: TrainingJob) -> str:
    """What the price counts of the model's attention that these flags do not set, said in
    the header: the spec keeps how many layers window or chunk their attention, not which,
    and Megatron-LM's --window-size and --window-attn-skip-freq name layers."""
    m, lines = job.model, ""
    if m.sliding_window is not None and m.windowed_layers:
        lines += (
            f"# Priced with {m.windowed_layers} of {m.num_layers} layers attending to a window of "
            f"{m.sliding_window} tokens: add --window-size and --window-attn-skip-freq as the "
            "model's config places them (not written here: the spec keeps their count, not "
            "which layers), or every layer attends in full and runs slower than priced.\n"
        )
    if m.attention_chunk_size is not None and m.chunked_layers:
        lines += (
            f"# Priced with {m.chunked_layers} layers attending within chunks of "
            f"{m.attention_chunk_size} tokens, which these flags do not set.\n"
        )
    return lines


Pairs = list[tuple[str, str | None]]


def _parallel(s: McoreSettings) -> Pairs:
    pairs: Pairs = [
        (FLAGS["tp"], str(s.tp)),
        (FLAGS["pp"], str(s.pp)),
        (FLAGS["cp"], str(s.cp)),
        (FLAGS["ep"], str(s.ep)),
    ]
    if (
        s.ep > 1
    ):  # the all-to-all the cost model prices (default allgather, transformer_config.py:891)
        pairs.append(("--moe-token-dispatcher-type", s.moe_token_dispatcher_type))
    if s.overlap_moe_expert_parallel_comm:
        pairs.append(("--overlap-moe-expert-parallel-comm", None))
    return pairs + ([(FLAGS["sp"], None)] if s.sequence_parallel else [])


def _split(s: McoreSettings, num_layers: int) -> Pairs:
    """The VPP and uneven-stage flags: at most one VPP form (arguments.py:926-939);
    layers-per-virtual-stage only for even splits (arguments.py:953-977)."""
    split = s.split
    if split.method == "layout":
        assert split.layout is not None
        return [(FLAGS["layout"], split.layout)]
    pairs: Pairs = []
    if s.vpp is not None:
        if split.method == "even":
            pairs.append((FLAGS["vpp_layers"], str(num_layers // (s.pp * s.vpp))))
        else:
            pairs.append((FLAGS["vpp"], str(s.vpp)))
    if split.method == "first_last":
        pairs += [(FLAGS["first"], str(split.first_stage_layers))]
        pairs += [(FLAGS["last"], str(split.last_stage_layers))]
    if split.method == "account_for":
        pairs += [(FLAGS["account_embedding"], None), (FLAGS["account_loss"], None)]
    return pairs


def _batch_and_optimizer(s: McoreSettings) -> Pairs:
    pairs: Pairs = [(FLAGS["micro"], str(s.micro_batch)), (FLAGS["global"], str(s.global_batch))]
    if s.use_distributed_optimizer:
        pairs.append((FLAGS["dist_opt"], None))
    if s.use_megatron_fsdp:
        pairs += [(FLAGS["mfsdp"], None), (FLAGS["sharding"], s.sharding_strategy)]
        # Megatron-FSDP requires the fsdp_dtensor checkpoint format (arguments.py:1169-1170).
        pairs.append(("--ckpt-format", "fsdp_dtensor"))
    if s.overlap_grad_reduce:
        pairs.append(("--overlap-grad-reduce", None))
    if s.overlap_param_gather:
        pairs.append(("--overlap-param-gather", None))
    if s.ddp_bucket_size is not None:
        pairs.append(("--ddp-bucket-size", str(s.ddp_bucket_size)))
    return pairs


def _kernels_and_overlaps(s: McoreSettings) -> Pairs:
    """The settings in force that are not Megatron-LM's own defaults (arguments.py:
    --tp-comm-overlap off, p2p overlap on with interleaving, attention backend auto)."""
    pairs: Pairs = [("--tp-comm-overlap", None)] if s.tp_comm_overlap else []
    if not s.overlap_p2p_comm and s.vpp is not None:
        pairs.append(("--no-overlap-p2p-communication", None))
    if s.attention_backend is not None:
        pairs.append(("--attention-backend", s.attention_backend))
    if s.cuda_graph_impl is not None:
        pairs.append(("--cuda-graph-impl", s.cuda_graph_impl))
    return pairs


def _recompute(s: McoreSettings) -> Pairs:
    if s.recompute_granularity is None:
        return []
    pairs: Pairs = [(FLAGS["recompute_granularity"], s.recompute_granularity)]
    if s.recompute_method is not None:  # transformer_config.py:543, 551
        pairs += [("--recompute-method", s.recompute_method)]
        pairs += [("--recompute-num-layers", str(s.recompute_num_layers))]
    if s.recompute_modules is not None:  # transformer_config.py:560-583, a list flag (nargs):
        # one word per module, names from a closed set, so written unquoted
        pairs += [(" ".join(("--recompute-modules", *s.recompute_modules)), None)]
    return pairs


# The architecture every profile prices (docs/cost-model.md: Llama-style layers, no biases,
# no position-embedding table): Megatron-LM's defaults are LayerNorm, learned absolute
# positions and biased linears (arguments.py, '--normalization', '--position-embedding-type',
# '--disable-bias-linear' dest add_bias_linear), so each is written, or a launch trains
# another model. Grouped-GEMM experts also assert that there is no bias (experts.py).
PRICED_ARCHITECTURE: Pairs = [
    ("--normalization", "RMSNorm"),
    ("--position-embedding-type", "rope"),
    ("--disable-bias-linear", None),
]


def _model_shape(job: TrainingJob) -> Pairs:
    """What the TransformerSpec determines (flags from transformer_config.py:65-221 and
    arguments.py:2382-2460, 3305, 3518-3520) and the priced architecture; the rotary base,
    tokenizer and data are not in the spec and not written, nor is a sliding window
    (docs/engines.md)."""
    m, seq = job.model, str(job.training.seq_len)
    pairs: Pairs = [
        ("--num-layers", str(m.num_layers)),
        ("--hidden-size", str(m.hidden_size)),
        ("--ffn-hidden-size", str(m.ffn_hidden_size)),
        ("--num-attention-heads", str(m.num_attention_heads)),
        *PRICED_ARCHITECTURE,
    ]
    if m.num_kv_heads != m.num_attention_heads:
        # --num-query-groups counts only with --group-query-attention (argument_utils.py).
        pairs += [("--group-query-attention", None), ("--num-query-groups", str(m.num_kv_heads))]
    if m.head_dim is not None:
        pairs.append(("--kv-channels", str(m.head_dim)))
    pairs += [("--swiglu", None)] if m.gated_mlp else []
    pairs += [] if m.tied_embeddings else [("--untie-embeddings-and-output-weights", None)]
    pairs += [("--seq-length", seq), ("--max-position-embeddings", seq)]
    return pairs + _latent_attention(m) + _moe_shape(job)


def _latent_attention(m: TransformerSpec) -> Pairs:
    """Multi-latent attention's widths (arguments.py:3546-3557; the switch is the
    TransformerConfig field multi_latent_attention, transformer_config.py:288): without them
    Megatron-Core builds ordinary attention of hidden / heads a head."""
    if not m.is_mla:
        return []
    pairs: Pairs = [("--multi-latent-attention", None)]
    if m.q_lora_rank is not None:  # None: queries without a low-rank bottleneck
        pairs.append(("--q-lora-rank", str(m.q_lora_rank)))
    return pairs + [
        ("--kv-lora-rank", str(m.kv_lora_rank)),
        ("--qk-head-dim", str(m.qk_nope_head_dim)),
        ("--qk-pos-emb-head-dim", str(m.qk_rope_head_dim)),
        ("--v-head-dim", str(m.v_head_dim_size)),
    ]


def _precision(job: TrainingJob, s: McoreSettings) -> Pairs:
    """bf16 (model_parallel_config.py:180), and Transformer Engine's recipe of the request's
    precision, the casts the cost model prices: fp8 per-tensor current scaling, hybrid e4m3
    forward and e5m2 for gradients (transformer_config.py:587-600; each field is a flag of
    its own name, argument_utils.py:45-74); mxfp8 e4m3 with the mxfp8 recipe, and nvfp4 the
    e2m1 format with the nvfp4 recipe (--fp4-format, --fp4-recipe: the fields Megatron-Bridge's
    bf16_with_mxfp8_mixed and bf16_with_nvfp4_mixed set, NVIDIA-NeMo/Megatron-Bridge
    src/megatron/bridge/training/mixed_precision.py). With the distributed optimizer, FP8-only
    weights (fp8 and mxfp8) as Megatron-LM's own FP8 recipe keeps them (--fp8-param-gather:
    examples/llama/train_llama3_8b_h100_fp8.sh l.111), which it refuses without one
    (arguments.py:1095-1097): the engine is priced so. NVFP4 keeps bf16 weights (Bridge
    refuses FP4 parameters)."""
    pairs: Pairs = [("--bf16", None)]
    if not s.grad_reduce_in_fp32:  # stated: --grad-reduce-in-bf16 (arguments.py:1213-1214)
        pairs += [("--grad-reduce-in-bf16", None)]
    precision = job.training.precision
    if precision == "fp8":
        pairs += [("--fp8-format", "hybrid"), ("--fp8-recipe", "tensorwise")]
    elif precision == "mxfp8":
        pairs += [("--fp8-format", "e4m3"), ("--fp8-recipe", "mxfp8")]
    elif precision == "nvfp4":
        pairs += [("--fp4-format", "e2m1"), ("--fp4-recipe", "nvfp4")]
    if s.fp8_param_gather:
        pairs += [("--fp8-param-gather", None)]
    return pairs


def _moe_shape(job: TrainingJob) -> Pairs:
    m = job.model
    if not m.is_moe:
        return []
    pairs: Pairs = [
        ("--num-experts", str(m.num_experts)),  # arguments.py:3518
        ("--moe-router-topk", str(m.experts_per_token)),  # transformer_config.py:760
        ("--moe-ffn-hidden-size", str(m.expert_ffn_hidden_size)),  # :740
        # the grouped GEMM the experts are priced with: the default (False, :850) runs
        # SequentialMLP, one GEMM per local expert (experts.py:1409)
        ("--moe-grouped-gemm", None),
    ]
    if m.num_shared_experts:  # :701, the shared experts' total width
        width = m.num_shared_experts * (m.expert_ffn_hidden_size or 0)
        pairs.append(("--moe-shared-expert-intermediate-size", str(width)))
    pattern = _moe_layer_pattern(m)
    if pattern is not None:  # arguments.py:327-345: a Python list expression, 0 dense, 1 MoE
        pairs.append(("--moe-layer-freq", pattern))
    return pairs


def _moe_layer_pattern(m: TransformerSpec) -> str | None:
    """Which layers are MoE, as the list expression --moe-layer-freq takes; None when every
    layer is. Its integer form N puts MoE at layers 0, N, 2N (arguments.py), where an
    interleaved Hugging Face model puts it at N-1, 2N-1, ...: written out instead."""
    n = m.moe_layer_interval
    if n > 1:
        rest = m.num_layers - m.num_moe_layers * n
        return f"([0]*{n - 1}+[1])*{m.num_moe_layers}" + (f"+[0]*{rest}" if rest else "")
    if m.dense_layers:
        return f"([0]*{m.dense_layers}+[1]*{m.num_layers - m.dense_layers})"
    return None


_OFFERS = mcore.offers(FLAGS, SOURCES)
# The rank orders of initialize.py's _initialize_distributed, innermost first.
DEFAULT_ORDER = mcore.DEFAULT_RANK_ORDER
PP_DP_ORDER: tuple[Dimension, ...] = ("tp", "cp", "pp", "dp")
USE_PP_DP_ORDER = "--use-tp-pp-dp-mapping"  # arguments.py, _add_distributed_args

# Megatron-LM states the gradient dtype its own way: fp32 under bf16 unless
# --grad-reduce-in-bf16 (settings.GRAD_REDUCE_IN_BF16), not Megatron-Bridge's field.
MEGATRON_SETTINGS = tuple(s for s in MCORE_SETTINGS if s.name != "grad_reduce_in_fp32") + (
    GRAD_REDUCE_IN_BF16,
)


MEGATRON = Engine(
    name="megatron",
    label=LABEL,
    version=f"{MLM} (d98e8a64ddf34856e74b24714e3bedb2f5a39553, 0.20.0, 2026-08-22); "
    "assertion texts cross-checked at core_v0.16.1",
    offers=_OFFERS,
    rules=offer_rules(LABEL, _OFFERS)
    + mcore_rules.rules(
        LABEL,
        interleaving_source=f"{ARGS}:1000-1018: pp > 1 with p2p overlap on (the default with "
        "vpp), pp > 2 with --no-overlap-p2p-communication",
    )
    + (seq_len_divisible_by_2cp(LABEL, f"{ARGS}:1335-1338"),),
    # under fp8 the export writes Megatron-LM's FP8 recipe's --fp8-param-gather (_precision)
    runtime=mcore.runtime(OVERLAPS, fp8_params=True),
    exporter=export,
    # megatron/training/initialize.py _initialize_distributed (d98e8a6): order
    # 'tp-cp-ep-dp-pp', or 'tp-cp-ep-pp-dp' with --use-tp-pp-dp-mapping
    rank_orders=(DEFAULT_ORDER, PP_DP_ORDER),
    settings=MEGATRON_SETTINGS,
    versions=MEGATRON_VERSIONS,
    release_months=MEGATRON_RELEASED,
)
