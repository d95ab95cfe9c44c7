"""torchtitan 0.3.0 (the release on PyPI): Python config registry plus tyro command-line
overrides (`--parallelism.tensor_parallel_degree 8`), FSDP2 for data parallelism, PyTorch's
pipelining schedules.

Read from the PyPI wheel torchtitan==0.3.0 (its config files are byte-identical to branch
release/0.3 at 4f9e9a47d49dfbcac960857dd67748c67aecd2e5) with torch 2.13.0's pipelining.
0.3.0 has no TOML job config (dropped in pytorch/torchtitan #2386, after 0.2.2) and main has
since renamed the batch fields (research notes section 2.6): this targets 0.3.0 only.
"""

from __future__ import annotations

import numpy as np

from models.job import TrainingJob
from models.layout import Layout, Recompute, Schedule
from optimizer.costmodel import LayoutGrid

from . import stages
from .base import (
    Artefact,
    Engine,
    EngineRule,
    Offers,
    absent,
    model_named,
    offered,
)
from .catalogue import config_for, lacking, model_code_rule
from .rules import batch_identity, heads_divisible_by_tp, kv_heads_divisible_by_tp, offer_rules
from .torchtitan_module import custom_module
from .torchtitan_runtime import CONFIGS, FSDP, RUNTIME, TT
from .torchtitan_versions import TORCHTITAN_SETTINGS, TORCHTITAN_VERSIONS

LABEL = "torchtitan"
PIPE = f"{TT}/distributed/pipeline_parallel.py"
DIMS = f"{TT}/distributed/parallel_dims.py"
TORCH_PIPE = "torch 2.13.0 torch/distributed/pipelining/schedules.py"

# Registry function (`--config`, module llama3) -> the preset it trains: the shapes in
# models/llama3/__init__.py:236, 277, 318 (checked against the installed wheel by the tests).
CONFIGS_BY_NAME = {
    "llama3_8b": "llama3-8b",
    "llama3_70b": "llama3-70b",
    "llama3_405b": "llama3-405b",
}
MODULE = "llama3"
FP8_NOTE = (
    "Priced in FP8 (torchao's Float8Linear): these arguments do not switch it on; a registry "
    "config that converts its linears to float8 does (llama3_405b, config_registry.py:295-310)."
)

OFFERS = Offers(
    schedules={
        Schedule.ONE_F_ONE_B: offered("1F1B", f"{TORCH_PIPE}:3620-3644; {PIPE}:205-206"),
        Schedule.ZERO_BUBBLE: absent(
            f"{TORCH_PIPE}:3620-3644 has no single-stage zero-bubble (ZB-H1) schedule: "
            "InterleavedZeroBubble is looped (>= 2 stages a rank) and ZBVZeroBubble V-shaped "
            f"(2 a rank, {PIPE}:559-572)"
        ),
        Schedule.DUALPIPE: absent(
            f"DualPipeV ({TORCH_PIPE}:3393) puts two stages of one model copy on each rank in a "
            "V; the project's dualpipe is DeepSeek-V3's two-direction DualPipe (two copies)"
        ),
    },
    interleaving=offered(
        "Interleaved1F1B with --parallelism.pipeline_parallel_layers_per_stage",
        f"{PIPE}:204-264; {CONFIGS}:203-219",
    ),
    zero={
        0: offered(
            "dp_replicate = dp (FSDP2 over a mesh of 1 installs only mixed precision)",
            f"{TT}/models/llama3/parallelize.py:69-90; {CONFIGS}:113-133",
        ),
        1: absent(
            f"no optimizer-only sharding: FSDP2's fully_shard shards parameters, gradients and "
            f"optimizer state together ({FSDP}; {TT}/models/llama3/parallelize.py:80-90)"
        ),
        2: offered("dp_shard = dp, --parallelism.fsdp_reshard_after_forward never", FSDP),
        3: offered("dp_shard = dp, --parallelism.fsdp_reshard_after_forward always", FSDP),
    },
    recompute={
        Recompute.NONE: offered("activation_checkpoint:none", f"{TT}/trainer.py:108-110"),
        Recompute.SELECTIVE: offered(
            "activation_checkpoint:selective (saves compute and communication ops except every "
            "second matmul, not Megatron's attention-only recompute)",
            f"{TT}/distributed/activation_checkpoint.py:185-287",
        ),
        Recompute.FULL: offered(
            "activation_checkpoint:full", f"{TT}/distributed/activation_checkpoint.py:332-337"
        ),
    },
    tensor_parallel=offered("--parallelism.tensor_parallel_degree", f"{CONFIGS}:157"),
    context_parallel=offered("--parallelism.context_parallel_degree", f"{CONFIGS}:232"),
    expert_parallel=offered("--parallelism.expert_parallel_degree", f"{CONFIGS}:279"),
    sequence_parallel=offered(
        "--parallelism.enable_sequence_parallel (default True)", f"{CONFIGS}:160"
    ),
    uneven_stages=offered(
        "stages differ by at most one layer; embedding and head weigh one layer each",
        f"{PIPE}:366-477; {CONFIGS}:191-201 (module_fqns_per_model_part, L181, would take any "
        "split: not exported, its command-line form UNVERIFIED)",
    ),
    unmapped=(
        offered(
            "GPipe, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV",
            f"{TORCH_PIPE}:3620-3644",
        ),
        offered("HSDP: dp_replicate > 1 with dp_shard > 1", f"{CONFIGS}:113-133"),
        offered("activation_checkpoint:memory-budget (needs compile)", f"{TT}/trainer.py:170-177"),
    ),
)


def _stages_rule() -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray(stages.titan_stages_ok(job.model.num_layers, grid.pp, grid.vpp))

    def detail(job: TrainingJob, layout: Layout) -> str:
        layers, chunks = job.model.num_layers, layout.pp * layout.vpp
        lps = stages.titan_layers_per_stage(layers, layout.pp, layout.vpp)
        got = -(-(layers + stages.TITAN_END_WEIGHTS) // lps)
        return f"ceil(({layers} + 2) / {lps}) = {got} stages, not {chunks}"

    return EngineRule(
        "stages_from_layers_per_stage",
        f"{LABEL} requires more than 2 stages a rank to come from a layers-per-stage: "
        "ceil((layers + 2) / layers_per_stage) == pp * vpp",
        f"{PIPE}:219-264",
        check,
        detail,
    )


def _interleaved_rounds_rule() -> EngineRule:
    """Interleaved1F1B runs the step's micro-batches in max(1, m // pp) equal rounds."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        m = np.maximum(job.training.global_batch // (grid.micro_batch * grid.dp), 1)
        return np.asarray((grid.vpp == 1) | (m % np.maximum(m // grid.pp, 1) == 0))

    def detail(job: TrainingJob, layout: Layout) -> str:
        m = max(layout.micro_batches(job.training.global_batch), 1)
        return f"{m} micro-batches in {max(m // layout.pp, 1)} rounds of pp {layout.pp}"

    return EngineRule(
        "interleaved_rounds",
        f"{LABEL} runs Interleaved1F1B (vpp > 1), which needs the micro-batches a step "
        "(local batch / pipeline_parallel_microbatch_size) to split into max(1, m // pp) "
        "equal rounds",
        f"{TORCH_PIPE}:2935-2941 (ScheduleInterleaved1F1B, ValueError); {PIPE}:303-311",
        check,
        detail,
    )


DECODER = f"{TT}/models/common/decoder.py"


def _sequence_split_rule() -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        divisor = grid.tp * np.where(grid.cp > 1, 2 * grid.cp, 1)
        return np.asarray(job.training.seq_len % divisor == 0)

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"seq_len {job.training.seq_len} over tp {layout.tp} and cp {layout.cp}"

    return EngineRule(
        "seq_len_divisible_by_tp_and_2cp",
        f"{LABEL} requires seq_len % (tp * 2 cp) == 0 (tp alone without cp): sequence "
        "parallelism (on by default) splits the sequence over tp, load-balanced context "
        "parallelism over 2 cp",
        f"{TT}/trainer.py:306-315; {CONFIGS} enable_sequence_parallel (default True)",
        check,
        detail,
    )


def _tied_embeddings_rule() -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray((grid.pp == 1) | (not job.model.tied_embeddings))

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"tied embeddings with pp {layout.pp}"

    return EngineRule(
        "no_tied_embeddings_with_pp",
        f"{LABEL} does not tie the input and output embeddings across pipeline stages: a "
        "model with tied embeddings needs pp == 1",
        f"{DECODER}:139-142 (NotImplementedError)",
        check,
        detail,
    )


def _fsdp_over_cp_rule() -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray((grid.cp == 1) | (grid.zero >= 2))

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"cp {layout.cp} with zero {layout.zero}"

    return EngineRule(
        "fsdp_over_cp",
        f"{LABEL} always shards parameters over the cp ranks (its FSDP axis is dp_shard * cp): "
        "cp > 1 needs zero 2 or 3",
        f"{DIMS}:222-225, 278; {TT}/distributed/full_dtensor.py:93-95",
        check,
        detail,
    )


def _dp_shard(grid_zero: np.ndarray, dp: np.ndarray) -> np.ndarray:
    return np.where(grid_zero >= 2, dp, 1)


def _expert_mesh_rule() -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        region = _dp_shard(grid.zero, grid.dp) * grid.cp * grid.tp
        return np.asarray(region % grid.expert_parallel == 0)

    def detail(job: TrainingJob, layout: Layout) -> str:
        dp_shard = layout.dp if layout.zero >= 2 else 1
        return f"ep {layout.ep} vs dp_shard {dp_shard} * cp {layout.cp} * tp {layout.tp}"

    return EngineRule(
        "ep_divides_dp_shard_cp_tp",
        f"{LABEL} requires ep to divide dp_shard * cp * tp (EP borrows from FSDP and TP; in 0.3.0 "
        "only the device mesh fails, ParallelDims does not check it)",
        f"{DIMS}:277-279, 336-340; {CONFIGS}:279 (docstring)",
        check,
        detail,
    )


def _no_expert_tp_rule() -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray((grid.expert_parallel == 1) | (grid.tp == 1))

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"ep {layout.ep} with tp {layout.tp}"

    return EngineRule(
        "experts_without_tp",
        f"{LABEL} 0.3.0 runs experts without tensor parallelism (ETP 1, the sparse mesh is pp x "
        "dp_replicate x efsdp x ep), while this project prices experts split by tp: ep > 1 "
        "needs tp == 1",
        f"{DIMS}:336-340; expert_tensor_parallel_degree exists in 0.2.2 (job_config.py:464) and "
        "not in 0.3.0 (the command line rejects it, research notes section 2.2)",
        check,
        detail,
    )


def export(job: TrainingJob, layout: Layout) -> Artefact:
    """`torchrun ... -m torchtitan.train` arguments for 0.3.0's ConfigManager, on the registry
    config that trains the job's model; for a model no flavor has, a config module of its
    own carrying the same arguments (torchtitan_module.py)."""
    config = config_for(job.model, CONFIGS_BY_NAME)
    pairs = _parallelism(layout, job.model.num_layers) + _training(job, layout)
    subcommand = f"activation_checkpoint:{layout.recompute.value}"  # trainer.py:108-110
    summary = (
        f"{LABEL} 0.3.0 arguments for {model_named(job)} on {job.cluster.gpus} GPUs: tp "
        f"{layout.tp} x pp {layout.pp} x cp {layout.cp} x dp {layout.data_parallel_size}, vpp "
        f"{layout.vpp}, ZeRO-{layout.zero}, recompute {layout.recompute.value}."
    )
    notes = [FP8_NOTE] if job.training.precision == "fp8" else []
    if config is None:
        args = [word for pair in pairs for word in pair if word is not None] + [subcommand]
        return custom_module(job, [summary, *notes], args)
    body = " \\\n".join(flag if value is None else f"{flag} {value}" for flag, value in pairs)
    header = "".join(
        f"# {line}\n"
        for line in [
            summary,
            "Launch (run_train.sh, release/0.3 L42-47): torchrun --nproc_per_node=8 -m "
            "torchtitan.train followed by these lines.",
            "The registry config keeps its own precision and compile settings (llama3_405b "
            "converts linears to float8, config_registry.py:295-310).",
            *notes,
        ]
    )
    lead = f"--module {MODULE} \\\n--config {config} \\\n"
    return Artefact(
        "torchtitan",
        "torchtitan-cli",
        "torchtitan_args.sh",
        f"{header}{lead}{body} \\\n{subcommand}\n",
    )


Pairs = list[tuple[str, str | None]]


def _parallelism(layout: Layout, num_layers: int) -> Pairs:
    p, dp = "--parallelism.", layout.data_parallel_size
    sharded = layout.zero >= 2
    reshard = {2: "never", 3: "always"}.get(layout.zero, "default")
    pairs: Pairs = [
        (f"{p}data_parallel_replicate_degree", str(1 if sharded else dp)),
        (f"{p}data_parallel_shard_degree", str(dp if sharded else 1)),
        (f"{p}fsdp_reshard_after_forward", reshard),
        (f"{p}tensor_parallel_degree", str(layout.tp)),
        (f"{p}pipeline_parallel_degree", str(layout.pp)),
        (f"{p}context_parallel_degree", str(layout.cp)),
        (f"{p}expert_parallel_degree", str(layout.ep)),
    ]
    if layout.pp > 1:
        schedule = "Interleaved1F1B" if layout.vpp > 1 else "1F1B"
        pairs += [(f"{p}pipeline_parallel_schedule", schedule)]
        pairs += [(f"{p}pipeline_parallel_microbatch_size", str(layout.micro_batch))]
    if layout.vpp > 2:  # 1 and 2 stages a rank are the defaults (pipeline_parallel.py:258-264)
        lps = stages.titan_layers_per_stage(num_layers, layout.pp, layout.vpp)
        pairs += [(f"{p}pipeline_parallel_layers_per_stage", str(lps))]
    return pairs


def _training(job: TrainingJob, layout: Layout) -> Pairs:
    """With pp, one schedule step runs all the step's micro-batches (local batch = dp's
    share); without, each accumulation step is one micro-batch. trainer.py:414-433."""
    batch, dp = job.training.global_batch, layout.data_parallel_size
    local = batch // dp if layout.pp > 1 else layout.micro_batch
    pairs: Pairs = [
        ("--training.local_batch_size", str(local)),
        ("--training.global_batch_size", str(batch)),
        ("--training.seq_len", str(job.training.seq_len)),
    ]
    if layout.pp > 1 or layout.ep > 1:  # CUDA graphs refuse pp, and most EP dispatchers
        pairs.append(("--training.disable_cuda_graphs", None))  # trainer.py:179-210
    return pairs


TORCHTITAN = Engine(
    name="torchtitan",
    label=LABEL,
    version="torchtitan 0.3.0 (PyPI wheel; = release/0.3 @ 4f9e9a47) with torch 2.13.0",
    offers=OFFERS,
    rules=offer_rules(LABEL, OFFERS)
    + (
        batch_identity(
            LABEL,
            "global_batch_size % (local_batch_size * dp) == 0, dp = dp_replicate * dp_shard",
            f"{TT}/trainer.py:419-431",
        ),
        heads_divisible_by_tp(LABEL, f"{DECODER}:149-153 (ValueError)"),
        kv_heads_divisible_by_tp(LABEL, f"{DECODER}:154-158 (ValueError)"),
        _sequence_split_rule(),
        _tied_embeddings_rule(),
        _stages_rule(),
        _interleaved_rounds_rule(),
        _fsdp_over_cp_rule(),
        _expert_mesh_rule(),
        _no_expert_tp_rule(),
        model_code_rule(
            LABEL,
            f"its llama3 model ({TT}/models/llama3), the one the export builds",
            lacking("moe", "mla", "gelu_mlp", "head_dim", "window", "chunked", "glu_clamp"),
            f"{TT}/models/llama3/__init__.py:69-111 (_build_llama3_layers: GQA with RoPE, "
            "dim / n_heads a head, a SwiGLU FeedForward, full causal attention); torchtitan's "
            "MoE and MLA models (deepseek_v3, qwen3, gpt_oss) are other modules, not exported",
        ),
    ),
    runtime=RUNTIME,
    exporter=export,
    # parallel_dims.py builds its mesh pp, dp_replicate, dp_shard, cp, tp, outermost first
    rank_orders=(("tp", "cp", "dp", "pp"),),
    settings=TORCHTITAN_SETTINGS,
    versions=TORCHTITAN_VERSIONS,
)
