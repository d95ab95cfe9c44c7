"""How an engine runs what it offers, as the cost model's assumptions: the data-parallel
traffic of each ZeRO stage (when gradients cross the data group, in which precision, and
whether the updated parameters are gathered), read off the engine's `EngineRuntime`.

A request's own assumptions win: a field the request sets is left as it is; below them, the
engine's settings in force (optimizer.engines.settings), below those what its version's code
did that no setting names (EngineVersion.assumptions), below those its runtime. The `generic`
engine's runtime gives the cost model's defaults, so it prices exactly as before engines.
"""

from __future__ import annotations

from models.errors import InvalidSpec
from optimizer.costmodel import CostAssumptions

from .base import Engine, GradientSync
from .settings import settings_assumptions

BF16_BYTES = 2
# The ZeRO stages whose sync the assumptions describe; ZeRO-3 is priced apart (its gathers).
SYNCED_STAGES = (0, 1, 2)


def stage_volumes(
    sync: GradientSync, with_pp: bool, precision: str = "bf16"
) -> tuple[float, float]:
    """(per step, per micro-batch) volumes of the stage's bf16 parameters one sync sends:
    an all-reduce is two ring passes, a reduce-scatter one, each scaled by the reduce
    precision against bf16; an all-gather of the parameters is one pass in bf16."""
    pp = 2 if with_pp else 1
    passes = 2 if sync.collective == "all-reduce" else 1
    gradients = passes * sync.reduce_bytes_for(precision) / BF16_BYTES
    gather = sync.param_gather_at(pp)
    per_step = (gradients if sync.timing_at(pp) == "per_step" else 0.0) + (
        1.0 if gather == "per_step" else 0.0
    )
    per_micro_batch = (gradients if sync.timing_at(pp) == "per_micro_batch" else 0.0) + (
        1.0 if gather == "per_micro_batch" else 0.0
    )
    return per_step, per_micro_batch


def engine_traffic(engine: Engine, precision: str = "bf16") -> dict[str, object]:
    """The engine's data-parallel traffic as assumption values for training in `precision`
    (bf16, or fp16 where the engine reduces differently); a stage the engine does not offer
    keeps the default (its rules bar it anyway)."""
    defaults = CostAssumptions()
    per_step = list(defaults.gradient_volumes_per_step)
    per_micro_batch = list(defaults.gradient_volumes_per_micro_batch)
    all_reduce = list(defaults.gradient_sync_all_reduce)
    gathers = list(defaults.param_gather_volumes_per_step)
    deferred: set[bool] = set()  # per stage that syncs every micro-batch: does pp defer it?
    for stage in SYNCED_STAGES:
        sync = engine.runtime.sync_for(stage)
        if sync is None:
            continue
        alone = stage_volumes(sync, with_pp=False, precision=precision)
        per_step[stage], per_micro_batch[stage] = alone
        # the step's sync: an all-reduce every micro-batch (DeepSpeed's ZeRO-2) leaves the
        # step only its parameters' all-gather
        all_reduce[stage] = sync.collective == "all-reduce" and sync.timing_at(1) == "per_step"
        gathers[stage] = 1.0 if sync.param_gather_at(1) == "per_step" else 0.0
        with_pp = stage_volumes(sync, with_pp=True, precision=precision)
        moved = (alone[0] + alone[1], 0.0)
        if with_pp not in (alone, moved):
            raise ValueError(f"{engine.name} ZeRO-{stage}: pp changes more than the sync's timing")
        if alone[1] > 0:
            deferred.add(with_pp == moved)
    if len(deferred) > 1:
        raise ValueError(f"{engine.name}: pp defers some stages' per-micro-batch sync, not all")
    traffic: dict[str, object] = {
        "gradient_volumes_per_step": per_step,
        "gradient_volumes_per_micro_batch": per_micro_batch,
        "gradient_sync_all_reduce": all_reduce,
        "param_gather_volumes_per_step": gathers,
        "per_micro_batch_sync_with_pp": not any(deferred),
    }
    accumulation = engine.runtime.bf16_pipelined_accumulation_bytes
    # DeepSpeed's BF16_Optimizer runs whenever its bf16 is on, FP8 GEMMs (Transformer
    # Engine's autocast) or not; fp16 runs its FP16 optimizer instead
    if accumulation is not None and precision != "fp16":
        traffic["pipelined_gradient_accumulation_bytes_per_param"] = list(accumulation)
    return traffic | runtime_choices(engine)


def runtime_choices(engine: Engine) -> dict[str, object]:
    """The engine's context-parallel exchange (ring attention that overlaps its steps with
    attention hides under all of it: each step's chunk arrives while the previous one's
    attention runs), what one ZeRO-3 gather covers, which matmuls its selective recompute
    replays, what its loss holds per logit and whether its pointwise ops run eager."""
    exchange = engine.runtime.cp_exchange
    values: dict[str, object] = {
        "cp_exchange": exchange.kind,
        "zero3_gather_unit": engine.runtime.zero3_gather_unit,
        "selective_recompute_matmuls": engine.runtime.selective_recompute_matmuls,
        "eager_pointwise": engine.runtime.eager_pointwise,
        "fp8_saved_inputs": engine.runtime.fp8_saved_inputs,
        "zero3_fp32_shards": engine.runtime.zero3_fp32_shards,
        "fp8_params": engine.runtime.fp8_params,
        "selective_recompute_modules": _modules(engine.runtime.selective_recompute_modules),
        "moe_combine_saves_expert_outputs": engine.runtime.moe_combine_saves_expert_outputs,
        "gradient_buffer_zeroed": engine.runtime.gradient_buffer_zeroed,
        "zero3_recompute_regathers": engine.runtime.zero3_recompute_regathers,
        "zero3_reuse_distance_params": engine.runtime.zero3_reuse_distance_params,
        "dp_sync_per_chunk": engine.runtime.dp_sync_per_chunk,
    }
    if exchange.overlaps_attention:
        values["cp_overlap_fraction"] = 1.0
    if engine.runtime.overlap("p2p").default_on:  # with vpp only (pp_p2p_interleaved_...)
        values["pp_p2p_interleaved_overlap_fraction"] = 1.0
    if engine.runtime.logits_bytes_per_value is not None:
        values["logits_bytes_per_value"] = engine.runtime.logits_bytes_per_value
    if engine.runtime.loss_bytes_per_logit is not None:
        values["loss_bytes_per_logit"] = engine.runtime.loss_bytes_per_logit
    if engine.runtime.optimizer_step_bytes_per_param is not None:
        values["optimizer_step_bytes_per_param"] = engine.runtime.optimizer_step_bytes_per_param
    if engine.runtime.zero3_overlap_fraction is not None:
        values["zero3_overlap_fraction"] = engine.runtime.zero3_overlap_fraction
    return values


# The formats whose casts no engine keeps in place of the bf16 weights (fp8_params): NVFP4's
# bf16 weights stay, as Megatron-Bridge refuses FP4 parameters ('fp4_param and
# fp4_param_gather are not supported for now', MixedPrecisionConfig.finalize) and Megatron-LM's
# export writes --fp8-param-gather under fp8 and mxfp8 only (mcore_settings).
NO_WEIGHTS_ALONE = ("nvfp4",)


def weights_alone(values: dict[str, object], stated: bool, precision: str) -> dict[str, object]:
    """`values` with fp8_params off in a format whose weights no engine keeps alone; a
    request that states it there is refused rather than priced as something no engine runs
    (or silently ignored)."""
    if precision not in NO_WEIGHTS_ALONE:
        return values
    if stated:
        raise InvalidSpec(
            f"fp8_params keeps the layers' weights only as their quantised casts, which no "
            f"engine does in {precision} (Megatron-Bridge refuses FP4 parameters): drop it, "
            "or train in fp8 or mxfp8",
            "assumptions.fp8_params",
        )
    return values | {"fp8_params": False}


def engine_assumptions(
    engine: Engine,
    assumptions: CostAssumptions,
    precision: str = "bf16",
) -> CostAssumptions:
    """`assumptions` with the engine's way of running in every field they leave unset: its
    data-parallel traffic and kernels, then what its version's code did that no setting
    names, then what its settings in force set (its version's defaults and the request's
    `engine_settings`). `precision` is the job's format (the weights it keeps and how it
    reduces depend on it), or fp16 for a run that trained in it (a training spec cannot say
    fp16: published and measured runs can)."""
    traffic = engine_traffic(engine, precision)
    if engine.release is not None:
        traffic |= engine.release.assumptions
    traffic |= settings_assumptions(engine.settings, engine.settings_in_force)
    fp8_params_stated = "fp8_params" in assumptions.model_fields_set and assumptions.fp8_params
    traffic = weights_alone(traffic, fp8_params_stated, precision)
    stated = set(assumptions.model_fields_set)
    if "dp_overlap_microbatches" in stated:  # a request that says how the step's sync hides
        stated.add("dp_sync_per_chunk")
    unset = {name: value for name, value in traffic.items() if name not in stated}
    priced = assumptions.model_copy(update=unset)
    if priced.selective_recompute_matmuls != "none" and priced.selective_recompute_modules:
        raise InvalidSpec(
            f"{engine.name}'s selective recompute is op-level checkpointing, not Megatron-Core's "
            "module list: drop selective_recompute_modules, or price the layout under an "
            "engine that takes one (megatron, nemo, generic)",
            "assumptions.selective_recompute_modules",
        )
    return priced


def _modules(modules: tuple[str, ...] | None) -> list[str] | None:
    """The engine's module list as the assumption's field holds one."""
    return None if modules is None else list(modules)
