"""DeepSpeed 0.19.8 (the release on PyPI): a JSON config for batch, ZeRO, precision,
checkpointing and its automatic tensor/expert parallelism; pipeline stages come from the
model code (`PipelineModule(num_stages=...)`).

Read from the PyPI sdist deepspeed-0.19.8.tar.gz (version.txt 0.19.8); line numbers are that
sdist's (git HEAD edaa722 differs).
"""

from __future__ import annotations

import json

import numpy as np

from models.job import TrainingJob
from models.layout import Layout, Recompute, Schedule
from optimizer.costmodel import LayoutGrid

from .base import (
    Artefact,
    Engine,
    EngineRule,
    EngineRuntime,
    Offers,
    Overlap,
    absent,
    offered,
    sync,
)
from .deepspeed_versions import DEEPSPEED_SETTINGS, DEEPSPEED_VERSIONS
from .rules import batch_identity, experts_divisible_by_ep, offer_rules

LABEL = "DeepSpeed"
DS = "deepspeed 0.19.8 (PyPI sdist) deepspeed"
RT = f"{DS}/runtime"
PIPE_SCHEDULE = f"{RT}/pipe/schedule.py"

OFFERS = Offers(
    schedules={
        Schedule.ONE_F_ONE_B: offered(
            "PipelineModule + TrainSchedule",
            f"{PIPE_SCHEDULE}:189-299; {RT}/pipe/engine.py:500-501",
        ),
        Schedule.ZERO_BUBBLE: absent(
            f"no zero-bubble schedule in {PIPE_SCHEDULE} (Inference, Train, DataParallel, "
            "DualPipeV); DualPipeVSchedule keeps weight gradients inside BackwardPass (L327-345)"
        ),
        Schedule.DUALPIPE: absent(
            f"DualPipeV ({RT}/pipe/dualpipev.py:30-47): each rank holds two stages of one model "
            "copy in a V, not DualPipe's two directions with two copies"
        ),
    },
    interleaving=absent(
        f"TrainSchedule runs one stage a rank ({PIPE_SCHEDULE}:189-299); the only schedule with "
        "two stages a rank is DualPipeV"
    ),
    zero={
        0: offered('"zero_optimization": {"stage": 0}', f"{RT}/zero/config.py:81-87"),
        1: offered('"zero_optimization": {"stage": 1}', f"{RT}/zero/config.py:81-87"),
        2: offered('"zero_optimization": {"stage": 2}', f"{RT}/zero/config.py:81-87"),
        3: offered('"zero_optimization": {"stage": 3}', f"{RT}/zero/config.py:81-87"),
    },
    recompute={
        Recompute.NONE: offered(
            "(no checkpointing)", f"{RT}/activation_checkpointing/config.py:27-47"
        ),
        Recompute.SELECTIVE: absent(
            "DeepSpeed recomputes what the model wraps in deepspeed.checkpointing.checkpoint or "
            "every activation_checkpoint_interval layers of a PipelineModule; its config has no "
            f"selective mode ({RT}/activation_checkpointing/config.py:27-47)"
        ),
        Recompute.FULL: offered(
            '"pipeline": {"activation_checkpoint_interval": 1} (or model code)',
            f"{RT}/pipe/engine.py:217-218",
        ),
    },
    tensor_parallel=offered(
        '"tensor_parallel": {"autotp_size": tp} (AutoTP); with a PipelineModule UNVERIFIED',
        f"{RT}/tensor_parallel/config.py:38-47; {RT}/engine.py:595-604",
    ),
    context_parallel=absent(
        "DeepSpeed's sequence parallelism is Ulysses (an all-to-all of attention heads, set "
        f"through the mpu or sequence_parallel_size, {RT}/engine.py:2172-2187; {RT}/config.py:"
        "457-470), not the K/V exchange this project prices as cp"
    ),
    expert_parallel=offered(
        '"expert_parallel": {"autoep_size": ep} (AutoEP)',
        f"{DS}/module_inject/auto_ep_config.py:42-49",
    ),
    sequence_parallel=absent(
        f"no sequence parallelism in AutoTP's config ({RT}/tensor_parallel/config.py:38-60)"
    ),
    uneven_stages=offered(
        "PipelineModule(partition_method='parameters') balances stages by parameter count",
        f"{RT}/pipe/module.py:125-133",
    ),
    unmapped=(
        offered(
            "DualPipeVModule / DualPipeVEngine",
            f"{RT}/pipe/dualpipev.py:30-110; {DS}/__init__.py:586",
        ),
        offered("Ulysses sequence parallelism", f"{RT}/engine.py:2172-2187"),
    ),
)


def _pipeline_refuses_sharded_gradients() -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray((grid.pp == 1) | (grid.zero < 2))

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"zero {layout.zero} with pp {layout.pp}"

    return EngineRule(
        "pipeline_zero_below_2",
        f"{LABEL}'s pipeline engine refuses ZeRO-2 and ZeRO-3: pp > 1 needs zero 0 or 1",
        f'{RT}/pipe/engine.py:76-77 ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism")',
        check,
        detail,
    )


def _expert_dp() -> EngineRule:
    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray(grid.dp % grid.expert_parallel == 0)

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"dp {layout.dp} % ep {layout.ep} != 0"

    return EngineRule(
        "ep_divides_dp",
        f"{LABEL} requires ep to divide the data-parallel size world / (tp * pp)",
        f"{DS}/utils/groups.py:563-565 (_ensure_divisibility(dp_world_size, expert_parallel_size_))",
        check,
        detail,
    )


_BF16_COMM = (
    f"reduce dtype bf16 under bf16 unless communication_data_type is set ({RT}/engine.py:1718-1730)"
)

RUNTIME = EngineRuntime(
    # ZeRO-3 fetches each submodule's parameters as it runs, one all_gather_coalesced per
    # submodule (deepspeedai/DeepSpeed@edaa72212 deepspeed/runtime/zero/
    # partitioned_param_coordinator.py:310-315, 582-609)
    zero3_gather_unit="module",
    # each submodule's forward hook fetches its parameters, so a checkpointed layer's replay
    # gathers them again; a parameter reused within stage3_max_reuse_distance (1e9 by
    # default, {RT}/zero/config.py:244) is kept, not released
    # ({RT}/zero/partitioned_param_coordinator.py:634-663)
    zero3_recompute_regathers=True,
    zero3_reuse_distance_params=1e9,
    # bf16 with pp and ZeRO-0 runs the BF16_Optimizer (grad_accum_dtype defaults to the
    # model's: runtime/engine.py:2313-2320); after each micro-batch's backward it casts the
    # gradients to fp32 and adds them into its fp32 buffer, 2 + 4 read and written, then
    # 4 + 4 read and 4 written (runtime/pipe/engine.py:859-862, bf16_optimizer.py:508-523).
    # ZeRO-1 takes it only with an fp32 grad_accum_dtype, which the export does not set
    bf16_pipelined_accumulation_bytes=(18.0, 0.0, 0.0),
    gradient_sync=(
        sync(
            0,
            "per_step",
            "all-reduce",
            2,
            "none",
            f"at the accumulation boundary ({RT}/engine.py:3088-3095; with pp the schedule's "
            f"ReduceGrads, {PIPE_SCHEDULE}:189-299); {_BF16_COMM}; with bf16 and pp the "
            f"BF16_Optimizer is used ({RT}/engine.py:2316-2320): its reduce dtype UNVERIFIED",
        ),
        sync(
            1,
            "per_step",
            "all-reduce",
            2,
            "per_step",
            f"at the accumulation boundary ({RT}/engine.py:3088-3092); all-reduce, not "
            "reduce-scatter (deepspeedai/DeepSpeed #5758; use_multi_rank_bucket_allreduce "
            f"default True, {RT}/zero/config.py:119, {RT}/zero/stage_1_and_2.py:1706-1711); "
            f"updated params all-gathered ({RT}/zero/stage_1_and_2.py:3155); {_BF16_COMM}",
        ),
        sync(
            2,
            "per_micro_batch",
            "all-reduce",
            2,
            "per_step",
            f"every backward, also between boundaries ({RT}/engine.py:3084-3086; maintainer in "
            "deepspeedai/DeepSpeed #2252); all-reduce as ZeRO-1 (#5758); "
            f"{_BF16_COMM}",
        ),
        sync(
            3,
            "per_micro_batch",
            "reduce-scatter",
            2,
            "per_micro_batch",
            f"every backward ({RT}/engine.py:3084-3086); reduce_scatter_coalesced "
            f"({RT}/zero/stage3.py:1931); {_BF16_COMM}",
        ),
    ),
    overlaps=(
        Overlap(
            "grad_reduce",
            default_on=False,
            exported_on=True,
            when="ZeRO 1-3 (zero_optimization.overlap_comm; default on only for stage 3)",
            source=f"{RT}/zero/config.py:138, 384-387",
        ),
        Overlap(
            "param_gather",
            default_on=True,
            exported_on=True,
            when="ZeRO-3 prefetch (overlap_comm)",
            source=f"{RT}/zero/config.py:384-387",
        ),
        Overlap(
            "tp_comm",
            default_on=False,
            exported_on=False,
            when="AutoTP all-reduces only",
            source=f"{RT}/tensor_parallel/config.py:48-49 (tp_overlap_comm)",
        ),
        Overlap(
            "p2p",
            False,
            False,
            "UNVERIFIED",
            "UNVERIFIED: PipelineEngine's send/recv overlap not read",
        ),
    ),
)


def export(job: TrainingJob, layout: Layout) -> Artefact:
    """The JSON config. train_batch_size = micro * accumulation * dp (config.py:590-605),
    all three written so that DeepSpeed checks the identity rather than infers it."""
    config: dict[str, object] = {
        "train_batch_size": job.training.global_batch,
        "train_micro_batch_size_per_gpu": layout.micro_batch,
        "gradient_accumulation_steps": layout.micro_batches(job.training.global_batch),
        "bf16": {"enabled": True},  # runtime/precision_config.py:41-46
        "zero_optimization": _zero(layout.zero),
    }
    if layout.pp > 1:
        # `stages` is a key DeepSpeed's parser keeps (runtime/config.py:272-285) but the
        # engine takes the degree from PipelineModule(num_stages=...) (pipe/module.py:110-111):
        # written for the launcher to pass on.
        full = layout.recompute == Recompute.FULL
        config["pipeline"] = {"stages": layout.pp, "activation_checkpoint_interval": int(full)}
    if layout.tp > 1:
        config["tensor_parallel"] = {"autotp_size": layout.tp}
    if layout.ep > 1:
        config["expert_parallel"] = {"autoep_size": layout.ep}
    if layout.recompute == Recompute.FULL:
        config["activation_checkpointing"] = {
            "partition_activations": False,
            "contiguous_memory_optimization": False,
            "cpu_checkpointing": False,
        }
    return Artefact(
        "deepspeed", "deepspeed-json", "ds_config.json", json.dumps(config, indent=2) + "\n"
    )


def _zero(stage: int) -> dict[str, object]:
    section: dict[str, object] = {"stage": stage}
    if stage >= 1:  # keys: zero/config.py:95-138
        section |= {"overlap_comm": True, "contiguous_gradients": True}
    return section


DEEPSPEED = Engine(
    name="deepspeed",
    label=LABEL,
    version="DeepSpeed 0.19.8 (PyPI sdist)",
    offers=OFFERS,
    rules=offer_rules(LABEL, OFFERS)
    + (
        _pipeline_refuses_sharded_gradients(),
        batch_identity(
            LABEL,
            "train_batch_size == train_micro_batch_size_per_gpu * gradient_accumulation_steps * dp",
            f"{RT}/config.py:590-605",
        ),
        experts_divisible_by_ep(
            LABEL,
            f"{DS}/module_inject/auto_ep_config.py:369-383; {DS}/moe/layer.py:59",
        ),
        _expert_dp(),
    ),
    runtime=RUNTIME,
    exporter=export,
    # PipeModelDataParallelTopology's axes pipe, data, model, outermost first (no cp here)
    rank_orders=(("tp", "cp", "dp", "pp"),),
    settings=DEEPSPEED_SETTINGS,
    versions=DEEPSPEED_VERSIONS,
)
