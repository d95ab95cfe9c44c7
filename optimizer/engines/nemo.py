"""NeMo 2 / Megatron-Bridge: NVIDIA's recipes on Megatron-Core, run by
`scripts/training/run_recipe.py` with trailing Hydra-style `KEY=VALUE` ConfigContainer
overrides. Megatron-Core's rules apply (the deferred `TransformerConfig.__post_init__` runs
at `finalize()`); Megatron-LM's own `validate_args` does not run here.

Read at NVIDIA-NeMo/Megatron-Bridge 067f987df03b8355b03192d88d70f1709fedf51a (0.7.0,
2026-08-22); PyPI lists megatron-bridge 0.3.1, whose run_recipe.py takes other options (not
compared). NeMo 2's own NeMo-Run recipes (NVIDIA/NeMo 8cfedd72) set the same Megatron-Core
fields under `trainer.strategy.*` and are not exported here.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.job import TrainingJob
from models.layout import Layout
from models.transformer import TransformerSpec

from . import mcore, mcore_rules
from .base import Artefact, Engine, Overlap, model_named
from .catalogue import config_for, lacking, model_code_rule
from .mcore_settings import McoreSettings, mcore_settings
from .mcore_versions import NEMO_VERSIONS
from .rules import offer_rules, seq_len_divisible_by_2cp
from .settings import (
    BRIDGE_SETTINGS,
    MCORE_SETTINGS,
    NEMO1_SETTINGS,
    TE_FUSED_LOSS_BYTES_PER_LOGIT,
)

LABEL = "NeMo (Megatron-Bridge)"
BRIDGE = "NVIDIA-NeMo/Megatron-Bridge@067f987"
CONFIG = f"{BRIDGE} src/megatron/bridge/training/config.py"
RUN_RECIPE = f"{BRIDGE} scripts/training/run_recipe.py"

# Megatron-Core's knobs as ConfigContainer fields: `model.*` are TransformerConfig /
# ModelParallelConfig fields (recipes set them directly, src/megatron/bridge/recipes/llama/
# h100/llama3.py:1217-1228), `train.*` TrainingConfig (config.py:442), `ddp.*` Megatron-Core's
# DistributedDataParallelConfig (config.py:90).
FIELDS = {
    "tp": "model.tensor_model_parallel_size",
    "pp": "model.pipeline_model_parallel_size",
    "cp": "model.context_parallel_size",
    "ep": "model.expert_model_parallel_size",
    "sp": "model.sequence_parallel",
    "vpp": "model.virtual_pipeline_model_parallel_size",
    "first": "model.num_layers_in_first_pipeline_stage",
    "last": "model.num_layers_in_last_pipeline_stage",
    "account_embedding": "model.account_for_embedding_in_pipeline_split",
    "account_loss": "model.account_for_loss_in_pipeline_split",
    "layout": "model.pipeline_model_parallel_layout",
    "dist_opt": "ddp.use_distributed_optimizer",
    "mfsdp": "ddp.use_megatron_fsdp",
    "sharding": "ddp.data_parallel_sharding_strategy",
    "recompute_granularity": "model.recompute_granularity",
    "micro": "train.micro_batch_size",
    "global": "train.global_batch_size",
}
SOURCES = {
    "vpp": f"{RUN_RECIPE}:45-46 (-vp sets {FIELDS['vpp']})",
    "dist_opt": f"{CONFIG}:2101-2124 (ddp.* and optimizer.* kept in sync)",
    "mfsdp": f"{CONFIG}:1065-1125, 1484-1486",
    "recompute_granularity": f"{mcore.CORE}/transformer/transformer_config.py:532-560 "
    "(field names; no Bridge recipe line for recompute was read: path UNVERIFIED beyond them)",
}

# Recipe -> the preset it trains (recipes/llama/llama3.py aliases of recipes/llama/h100/
# llama3.py:235, 717, 1200, which load meta-llama/Meta-Llama-3(.1) configs from Hugging Face).
RECIPES = {
    "llama3_8b_pretrain_config": "llama3-8b",
    "llama3_70b_pretrain_config": "llama3-70b",
    "llama31_405b_pretrain_config": "llama3-405b",
    # recipes/qwen/qwen2.py:95, alias of recipes/qwen/h100/qwen2.py:827-835, which loads
    # Qwen/Qwen2.5-72B's config from Hugging Face
    "qwen25_72b_pretrain_config": "qwen2.5-72b",
    # Published Hugging Face configs (models/presets/published_runs.json hf_configs), each
    # loaded by its recipe with AutoBridge.from_hf_pretrained: recipes/gpt_oss/gpt_oss.py:33,
    # 60 (h100/gpt_oss.py:37-45, 162-170: openai/gpt-oss-20b, -120b); recipes/qwen/
    # qwen3_moe.py:23, 32 (h100/qwen3_moe.py:28-40, 146-151, 228-238: Qwen/Qwen3-30B-A3B,
    # Qwen/Qwen3-235B-A22B); recipes/deepseek/deepseek_v3.py:27 (h100/deepseek_v3.py:105-113:
    # deepseek-ai/DeepSeek-V3)
    "gpt_oss_20b_pretrain_config": "gpt-oss-20b",
    "gpt_oss_120b_pretrain_config": "gpt-oss-120b",
    "qwen3_30b_a3b_pretrain_config": "qwen3-30b-a3b",
    "qwen3_235b_a22b_pretrain_config": "qwen3-235b-a22b",
    "deepseek_v3_pretrain_config": "deepseek-v3",
}

# A model no recipe trains is written onto the Llama 3 8B recipe (RMSNorm, RoPE, SwiGLU, no
# biases: its provider comes from meta-llama/Meta-Llama-3-8B's config, recipes/llama/h100/
# llama3.py:235-242) as model.* overrides of its GPTModelProvider's fields.
CUSTOM_RECIPE = "llama3_8b_pretrain_config"
CUSTOM_NOTE = (
    f"# No recipe trains this shape: the model.* lines below set it on {CUSTOM_RECIPE}'s "
    "model (its norm, rotary embedding and training settings kept).\n"
)

OVERLAPS = (
    Overlap(
        "grad_reduce",
        default_on=True,
        exported_on=True,
        when="dp > 1",
        source=f"{BRIDGE} src/megatron/bridge/training/comm_overlap.py:576-579; recipes set "
        "ddp.overlap_grad_reduce (recipes/llama/h100/llama3.py:1273)",
    ),
    Overlap(
        "param_gather",
        default_on=True,
        exported_on=True,
        when="dp > 1 with the distributed optimizer",
        source=f"{BRIDGE} src/megatron/bridge/training/comm_overlap.py:576-579",
    ),
    Overlap(
        "tp_comm",
        default_on=False,
        exported_on=False,
        when="the recipe's choice (not overridden): the 405B recipe turns it on with a tp 8 "
        "userbuffer config (recipes/llama/h100/llama3.py:1283-1286)",
        source=f"{BRIDGE} src/megatron/bridge/training/comm_overlap.py:434, 442-451",
    ),
    Overlap(
        "p2p",
        default_on=True,
        exported_on=True,
        when="pp > 1 with vpp > 1 (batched p2p without interleaving)",
        source=f"{BRIDGE} src/megatron/bridge/training/comm_overlap.py:454-463",
    ),
)


def export(
    job: TrainingJob,
    layout: Layout,
    rank_layers: tuple[int, ...] | None = None,
    recompute_modules: tuple[str, ...] | None = None,
    settings: Mapping[str, object] | None = None,
) -> Artefact:
    """One `KEY=VALUE` override per line: every split field written, since recipes set their
    own (the 405B recipe counts embedding and loss as layers, llama3.py:1227-1228);
    `settings`, the engine's settings in force."""
    recipe = config_for(job.model, RECIPES)
    s = mcore_settings(job, layout, rank_layers, recompute_modules, settings)
    shape = [] if recipe is not None else _model_shape(job.model)
    overrides = _overrides(s) + _precision(job) + shape
    lines = [f"{key}={_hydra(value)}" for key, value in overrides]
    header = (
        f"# {LABEL} ({BRIDGE}) overrides for {model_named(job)} on {job.cluster.gpus} GPUs: tp "
        f"{layout.tp} x pp {layout.pp} x cp {layout.cp} x dp {layout.dp}, vpp {layout.vpp}, "
        f"ZeRO-{layout.zero}, recompute {layout.recompute.value}.\n"
        "# Pass each line as one argument, e.g. mapfile -t o < <(grep -v '^#' this_file);\n"
        f"# torchrun ... scripts/training/run_recipe.py --recipe {recipe or CUSTOM_RECIPE} "
        '--mode pretrain "${o[@]}"\n' + ("" if recipe is not None else CUSTOM_NOTE)
    )
    return Artefact(
        "nemo", "hydra-overrides", "bridge_overrides.txt", header + "\n".join(lines) + "\n"
    )


Override = tuple[str, object]


def _overrides(s: McoreSettings) -> list[Override]:
    split = s.split
    overrides: list[Override] = [
        (FIELDS["tp"], s.tp),
        (FIELDS["pp"], s.pp),
        (FIELDS["cp"], s.cp),
        (FIELDS["ep"], s.ep),
        (FIELDS["sp"], s.sequence_parallel),
        (FIELDS["vpp"], s.vpp),
        (FIELDS["first"], split.first_stage_layers),
        (FIELDS["last"], split.last_stage_layers),
        (FIELDS["account_embedding"], split.method == "account_for"),
        (FIELDS["account_loss"], split.method == "account_for"),
        (FIELDS["layout"], split.layout),
        (FIELDS["recompute_granularity"], s.recompute_granularity),
        ("model.recompute_method", s.recompute_method),
        ("model.recompute_num_layers", s.recompute_num_layers),
        ("model.recompute_modules", _recompute_modules(s)),
        (FIELDS["micro"], s.micro_batch),
        (FIELDS["global"], s.global_batch),
        ("dataset.seq_length", s.seq_len),  # run_recipe.py:36-39 syncs model.seq_length from it
        (FIELDS["dist_opt"], s.use_distributed_optimizer),
        ("optimizer.use_distributed_optimizer", s.use_distributed_optimizer),
        (FIELDS["mfsdp"], s.use_megatron_fsdp),
        (FIELDS["sharding"], s.sharding_strategy),
        ("ddp.overlap_grad_reduce", s.overlap_grad_reduce),
        ("ddp.overlap_param_gather", s.overlap_param_gather),
        # Written either way: Megatron-Core's own default is False (megatron/core/
        # distributed/distributed_data_parallel_config.py:15), recipes set their own.
        ("ddp.grad_reduce_in_fp32", s.grad_reduce_in_fp32),
    ]
    if s.tp_comm_overlap:  # off: the recipe's own choice stands (comm_overlap.py:434-463)
        overrides.append(("comm_overlap.tp_comm_overlap", True))
    if s.ddp_bucket_size is not None:
        overrides.append(("ddp.bucket_size", s.ddp_bucket_size))
    if s.attention_backend is not None:
        overrides.append(("model.attention_backend", s.attention_backend))
    if s.cuda_graph_impl is not None:
        overrides.append(("model.cuda_graph_impl", s.cuda_graph_impl))
    if s.ep > 1:
        overrides.append(("model.moe_token_dispatcher_type", s.moe_token_dispatcher_type))
    if s.overlap_moe_expert_parallel_comm:  # off by default (comm_overlap.py:438 at v0.4.2)
        overrides.append(("comm_overlap.overlap_moe_expert_parallel_comm", True))
        # which Megatron-Core refuses beside the shared-expert overlap that some model
        # providers turn on (DeepSeek-V3's: deepseek_v3_bridge.py:72); Bridge's performance
        # scripts turn it off with it (scripts/performance/utils/overrides.py:197)
        overrides.append(("model.moe_shared_expert_overlap", False))
    if s.use_megatron_fsdp:  # required when saving or loading (config.py:1105-1109)
        overrides.append(("checkpoint.ckpt_format", "fsdp_dtensor"))
    return overrides


def _model_shape(m: TransformerSpec) -> list[Override]:
    """The model's shape as GPTModelProvider fields (gpt_provider.py:140, 181: tying and the
    vocabulary) and Megatron-Core's TransformerConfig fields (transformer_config.py:65-221;
    MoE :701-850), the same the Megatron-LM flags set. The activation is a field Bridge's
    overrides take by name (training/utils/omegaconf_utils.py:42-43, 269-278; utils/
    activation_map.py:41-44)."""
    shape: list[Override] = [
        ("model.num_layers", m.num_layers),
        ("model.hidden_size", m.hidden_size),
        ("model.ffn_hidden_size", m.ffn_hidden_size),
        ("model.num_attention_heads", m.num_attention_heads),
        ("model.num_query_groups", m.num_kv_heads),
        ("model.kv_channels", m.head_dim_size),
        ("model.vocab_size", m.vocab_size),
        ("model.share_embeddings_and_output_weights", m.tied_embeddings),
        ("model.gated_linear_unit", m.gated_mlp),
        ("model.activation_func", "silu" if m.gated_mlp else "gelu"),
    ]
    return shape + _moe_shape(m)


def _moe_shape(m: TransformerSpec) -> list[Override]:
    if not m.is_moe:
        return []
    moe: list[Override] = [
        ("model.num_moe_experts", m.num_experts),
        ("model.moe_router_topk", m.experts_per_token),
        ("model.moe_ffn_hidden_size", m.expert_ffn_hidden_size),
        ("model.moe_shared_expert_intermediate_size", _shared_width(m)),
        ("model.moe_layer_freq", mcore.moe_layers(m)),
        ("model.moe_grouped_gemm", True),  # the grouped GEMMs the experts are priced with
        ("model.moe_token_dispatcher_type", "alltoall"),  # the exchange priced
    ]
    return [(key, value) for key, value in moe if value is not None]  # None: Core's default


def _shared_width(m: TransformerSpec) -> int | None:
    return m.num_shared_experts * (m.expert_ffn_hidden_size or 0) or None


def _recompute_modules(s: McoreSettings) -> list[str] | None:
    """Selective recompute's module list, always written: Bridge's recipes set their own
    (the DeepSeek-V3 and GPT-OSS ones name theirs), which the price does not know."""
    if s.recompute_granularity != "selective":
        return None
    return list(s.recompute_modules or mcore.DEFAULT_RECOMPUTE_MODULES)


# Megatron-Bridge's mixed-precision recipe by name for each priced precision (the config
# takes a preset's name: src/megatron/bridge/training/config.py:1008, 2012-2014).
BRIDGE_PRECISIONS = {
    "fp8": "bf16_with_fp8_current_scaling_mixed",
    "mxfp8": "bf16_with_mxfp8_mixed",
    "nvfp4": "bf16_with_nvfp4_mixed",
}


def _precision(job: TrainingJob) -> list[Override]:
    """Under fp8, mxfp8 or nvfp4, Megatron-Bridge's recipe of that format by name
    (BRIDGE_PRECISIONS): FP8 current scaling keeps the first and last layers in bf16
    (mixed_precision.py:284-303), which the price does not; the MXFP8 and NVFP4 recipes keep
    none. fp8 and mxfp8 keep FP8-only weights (fp8_param_gather), as this engine is priced;
    nvfp4 keeps bf16 weights (FP4 parameters are refused: MixedPrecisionConfig.finalize).
    bf16: the recipe's own bf16_mixed."""
    recipe = BRIDGE_PRECISIONS.get(job.training.precision)
    return [] if recipe is None else [("mixed_precision", recipe)]


def _hydra(value: object) -> str:
    """A Hydra override value: null, true/false, numbers bare, strings quoted when they hold
    characters Hydra's grammar would read as syntax (the layout's "|" and "*")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and not value.replace("_", "").isalnum():
        return f"'{value}'"
    if isinstance(value, list):  # Hydra's list grammar: [a,b]
        return "[" + ",".join(_hydra(item) for item in value) + "]"
    return str(value)


_OFFERS = mcore.offers(FIELDS, SOURCES)

# Megatron-Bridge's models fuse the loss (GPTModelProvider cross_entropy_loss_fusion True:
# Megatron-Bridge@067f987 src/megatron/bridge/models/gpt_provider.py l.205) and its performance
# scripts pick Transformer Engine's kernel (cross_entropy_fusion_impl "te":
# scripts/performance/utils/overrides.py l.83-84): settings.TE_FUSED_LOSS_BYTES_PER_LOGIT.

NEMO = Engine(
    name="nemo",
    label=LABEL,
    version=f"{BRIDGE} (067f987df03b8355b03192d88d70f1709fedf51a, 0.7.0, 2026-08-22) on "
    f"Megatron-Core as read at {mcore.MLM}",
    offers=_OFFERS,
    rules=offer_rules(LABEL, _OFFERS)
    + mcore_rules.rules(LABEL)
    + (
        seq_len_divisible_by_2cp(LABEL, f"{CONFIG}:1574-1577"),
        model_code_rule(
            LABEL,
            f"the {CUSTOM_RECIPE} recipe, onto which the export writes a shape no recipe trains",
            lacking("mla", "window", "chunked", "glu_clamp", configs=RECIPES),
            f"{BRIDGE} src/megatron/bridge/models/gpt_provider.py:129-191 (GPTModelProvider, a "
            "TransformerConfig: MLA needs DeepSeek's MLA provider, and these overrides place no "
            "window, chunk or GLU clamp)",
        ),
    ),
    # Megatron-Bridge's FP8 recipes keep the weights in FP8 alone: every bf16_with_fp8_*
    # mixed-precision recipe sets fp8_param_gather, which sets fp8_param
    # ({BRIDGE} src/megatron/bridge/training/mixed_precision.py l.81-100, 217-302)
    runtime=mcore.runtime(OVERLAPS, TE_FUSED_LOSS_BYTES_PER_LOGIT, fp8_params=True),
    exporter=export,
    # the recipes' dist.use_tp_pp_dp_mapping (Megatron-Core's other order) is not written by
    # the export
    rank_orders=(mcore.DEFAULT_RANK_ORDER,),
    settings=MCORE_SETTINGS + NEMO1_SETTINGS + BRIDGE_SETTINGS,
    versions=NEMO_VERSIONS,
    release_months={},  # calendar releases, by date
)
