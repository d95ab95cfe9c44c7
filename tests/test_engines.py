"""Engine exports read back in each engine's own format, and checked against the layout that
produced them: degrees, the dp each engine derives, vpp, the layer split, the batch
identity. The engines' real parsers check the same artefacts in test_engines_parsers.py
(skipped where the engine is not installed); the rules, one by one, in test_engines_rules.py."""

from __future__ import annotations

import argparse
import math

import pytest

from models.errors import InvalidSpec
from models.layout import Layout, Recompute, resolve_layout
from optimizer.engines import ENGINES, export, get_engine, violations
from optimizer.engines.base import ZERO_STAGES
from optimizer.engines.stages import layout_string_chunks, titan_stage_layers
from tests.engine_cases import (
    CASES,
    PLATE,
    Case,
    _llama70b,
    _mixtral,
    _plate,
    case_id,
    command_line,
    deepspeed_config,
    megatron_parser,
    overrides,
    torchtitan_parser,
)


def parsed(args: argparse.Namespace, name: str) -> object:
    return vars(args)[name]


# --- each engine's artefact against its layout ----------------------------------------


def check_megatron(case: Case, layout: Layout) -> None:
    args = megatron_parser().parse_args(
        command_line(export(get_engine("megatron"), case.job, layout).text)
    )
    layers, world = case.job.model.num_layers, case.job.cluster.gpus
    tp, pp, cp = (
        args.tensor_model_parallel_size,
        args.pipeline_model_parallel_size,
        args.context_parallel_size,
    )
    # dp as validate_args derives it (arguments.py:441-448): world // (tp * pp * cp).
    assert (tp, pp, cp, world // (tp * pp * cp)) == (layout.tp, layout.pp, layout.cp, layout.dp)
    assert args.expert_model_parallel_size == layout.ep
    assert args.sequence_parallel == (layout.tp > 1)
    assert megatron_vpp(args, layers) == layout.vpp
    assert megatron_chunk_peak(args, layers) == math.ceil(layers / (layout.pp * layout.vpp))
    assert (args.micro_batch_size, args.global_batch_size) == (
        layout.micro_batch,
        case.job.training.global_batch,
    )
    assert args.use_distributed_optimizer == (layout.zero >= 1)
    assert args.use_megatron_fsdp == (layout.zero >= 2)
    if layout.zero >= 2:
        assert (
            args.data_parallel_sharding_strategy
            == {2: "optim_grads", 3: "optim_grads_params"}[layout.zero]
        )
    granularity = None if layout.recompute == Recompute.NONE else layout.recompute.value
    assert args.recompute_granularity == granularity
    # Full recompute needs a method and a layer count, selective neither (arguments.py:1425-1429).
    assert (args.recompute_method is not None) == (layout.recompute == Recompute.FULL)
    assert (args.num_layers, args.hidden_size, args.seq_length) == (
        layers,
        case.job.model.hidden_size,
        case.job.training.seq_len,
    )
    assert args.num_query_groups == case.job.model.num_kv_heads and args.group_query_attention
    # experts as grouped GEMMs, as they are priced
    assert args.moe_grouped_gemm == case.job.model.is_moe
    # FP8 as the engine is priced: TE's per-tensor current scaling, hybrid formats
    fp8 = case.job.training.precision == "fp8"
    assert args.bf16
    assert (args.fp8_format, args.fp8_recipe) == (("hybrid", "tensorwise") if fp8 else (None, None))
    # FP8-only weights, as the engine is priced, where Megatron-LM takes them (ZeRO-1 on)
    assert args.fp8_param_gather == (fp8 and layout.zero >= 1)


def megatron_vpp(args: argparse.Namespace, layers: int) -> int:
    """VPP as validate_args derives it (arguments.py:941-977): at most one form given."""
    forms = [
        args.num_layers_per_virtual_pipeline_stage,
        args.num_virtual_stages_per_pipeline_rank,
        args.pipeline_model_parallel_layout,
    ]
    assert sum(form is not None for form in forms) <= 1
    pp = args.pipeline_model_parallel_size
    if args.pipeline_model_parallel_layout is not None:
        return len(layout_string_chunks(args.pipeline_model_parallel_layout)) // pp
    if args.num_layers_per_virtual_pipeline_stage is not None:
        assert layers % pp == 0 and args.decoder_first_pipeline_num_layers is None
        return layers // pp // args.num_layers_per_virtual_pipeline_stage
    return args.num_virtual_stages_per_pipeline_rank or 1


def megatron_chunk_peak(args: argparse.Namespace, layers: int) -> int:
    """The largest chunk, recomputed from the split flags as Megatron-Core would build it."""
    pp = args.pipeline_model_parallel_size
    vpp = megatron_vpp(args, layers)
    if args.pipeline_model_parallel_layout is not None:
        chunks = layout_string_chunks(args.pipeline_model_parallel_layout)
        assert sum(chunks) == layers and len(chunks) == pp * vpp
        return max(chunks)
    if args.decoder_first_pipeline_num_layers is not None:
        first, last = args.decoder_first_pipeline_num_layers, args.decoder_last_pipeline_num_layers
        middle, remainder = divmod(layers - first - last, pp - 2)
        assert remainder == 0 and first % vpp == last % vpp == middle % vpp == 0
        return max(first, last, middle) // vpp
    if args.account_for_embedding_in_pipeline_split:
        assert args.account_for_loss_in_pipeline_split and (layers + 2) % (pp * vpp) == 0
        return (layers + 2) // (pp * vpp)
    assert layers % (pp * vpp) == 0
    return layers // (pp * vpp)


def check_torchtitan(case: Case, layout: Layout) -> None:
    args = torchtitan_parser().parse_args(
        command_line(export(get_engine("torchtitan"), case.job, layout).text)
    )
    p = {
        k.removeprefix("parallelism."): v
        for k, v in vars(args).items()
        if k.startswith("parallelism.")
    }
    world, layers = case.job.cluster.gpus, case.job.model.num_layers
    # ParallelDims: dp_replicate * dp_shard * cp * tp * pp == world (parallel_dims.py:186-189).
    dp = p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"]
    assert (
        dp
        * p["context_parallel_degree"]
        * p["tensor_parallel_degree"]
        * p["pipeline_parallel_degree"]
        == world
    )
    assert dp == layout.dp
    assert (p["data_parallel_shard_degree"] > 1) == (layout.zero >= 2 and layout.dp > 1)
    local, batch = (
        parsed(args, "training.local_batch_size"),
        parsed(args, "training.global_batch_size"),
    )
    accumulation = batch // (local * dp)  # trainer.py:430-431
    pipeline_micro = local // p["pipeline_parallel_microbatch_size"] if layout.pp > 1 else 1
    assert accumulation * pipeline_micro == layout.micro_batches(batch)
    stages = layout.pp * layout.vpp
    lps = p["pipeline_parallel_layers_per_stage"]
    if lps is not None:  # pipeline_parallel.py:223-225
        assert math.ceil((layers + 2) / lps) == stages
    assert max(titan_stage_layers(layers, stages)) <= math.ceil((layers + 2) / stages)
    assert args.activation_checkpoint == f"activation_checkpoint:{layout.recompute.value}"
    assert parsed(args, "training.disable_cuda_graphs") == (layout.pp > 1 or layout.ep > 1)


def check_deepspeed(case: Case, layout: Layout) -> None:
    config = deepspeed_config(export(get_engine("deepspeed"), case.job, layout).text)
    world = case.job.cluster.gpus
    dp = world // (layout.tp * layout.pp * layout.cp)  # the mpu's data-parallel size
    micro, accumulation = (
        config["train_micro_batch_size_per_gpu"],
        config["gradient_accumulation_steps"],
    )
    assert config["train_batch_size"] == micro * accumulation * dp == case.job.training.global_batch  # type: ignore[operator]
    assert config["zero_optimization"]["stage"] == layout.zero  # type: ignore[index]
    assert config.get("pipeline", {}).get("stages", 1) == layout.pp  # type: ignore[attr-defined]
    assert config.get("tensor_parallel", {}).get("autotp_size", 1) == layout.tp  # type: ignore[attr-defined]
    assert config.get("expert_parallel", {}).get("autoep_size", 1) == layout.ep  # type: ignore[attr-defined]
    assert config["bf16"] == {"enabled": True}


def check_nemo(case: Case, layout: Layout) -> None:
    values = overrides(export(get_engine("nemo"), case.job, layout).text)
    world, layers = case.job.cluster.gpus, case.job.model.num_layers
    tp, pp, cp = (
        values[f"model.{k}_parallel_size"] for k in ("tensor_model", "pipeline_model", "context")
    )
    assert (tp, pp, cp) == (layout.tp, layout.pp, layout.cp)
    assert world // (tp * pp * cp) == layout.dp  # config.py:1013-1027
    chunks = values["model.pipeline_model_parallel_layout"]
    vpp = values["model.virtual_pipeline_model_parallel_size"] or 1
    if (
        chunks is not None
    ):  # the layout string's stage count sets VPP (transformer_config.py:2271-2286)
        assert len(layout_string_chunks(str(chunks))) == layout.pp * vpp
    assert vpp == layout.vpp
    first, account = (
        values["model.num_layers_in_first_pipeline_stage"],
        values["model.account_for_embedding_in_pipeline_split"],
    )
    assert (
        sum(x is not None and x is not False for x in (chunks, first, account)) <= 1
    )  # transformer_config.py:2229-2258
    if first is not None:
        assert layers - first - values["model.num_layers_in_last_pipeline_stage"] >= 0  # type: ignore[operator]
    assert (values["train.micro_batch_size"], values["train.global_batch_size"]) == (
        layout.micro_batch,
        case.job.training.global_batch,
    )
    assert (
        values["ddp.use_distributed_optimizer"]
        == values["optimizer.use_distributed_optimizer"]
        == (layout.zero >= 1)
    )
    assert values["dataset.seq_length"] == case.job.training.seq_len
    # FP8: Bridge's current-scaling preset, whose fp8_param_gather the nemo engine prices
    fp8 = case.job.training.precision == "fp8"
    preset = values.get("mixed_precision")
    assert preset == ("bf16_with_fp8_current_scaling_mixed" if fp8 else None)


def check_generic(case: Case, layout: Layout) -> None:
    body = deepspeed_config(export(get_engine("generic"), case.job, layout).text)
    assert Layout.model_validate(body["layout"]) == layout


CHECKS = {
    "megatron": check_megatron,
    "torchtitan": check_torchtitan,
    "deepspeed": check_deepspeed,
    "nemo": check_nemo,
    "generic": check_generic,
}


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_artefact_reads_back_as_its_layout(case: Case) -> None:
    layout = resolve_layout(case.layout, case.job)
    assert violations(get_engine(case.engine), case.job, layout) == []
    CHECKS[case.engine](case, layout)


def test_every_engine_has_an_export_case() -> None:
    assert {case.engine for case in CASES} == set(ENGINES)


# --- what the engines refuse, and say ---------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        # Megatron-Core's ZeRO-2 is Megatron-FSDP, exported at pp 1 only.
        ("megatron", ["Megatron-FSDP", "zero 2 with pp 16"]),
        ("nemo", ["Megatron-FSDP", "zero 2 with pp 16"]),
        # DeepSpeed: TrainSchedule does not interleave; PipelineEngine refuses ZeRO-2.
        ("deepspeed", ["vpp 4 interleaves", "zero 2 with pp 16"]),
    ],
)
def test_the_plate_is_refused_with_the_rules_it_breaks(engine: str, expected: list[str]) -> None:
    with pytest.raises(InvalidSpec) as refused:
        export(get_engine(engine), _plate(), PLATE)
    assert refused.value.field == "engine"
    for text in expected:
        assert text in refused.value.message


def test_torchtitans_llama3_model_has_no_experts_for_mixtral() -> None:
    layout = Layout(pp=4, vpp=2, ep=8, zero=3)
    broken = violations(get_engine("torchtitan"), _mixtral(), layout)
    assert any("llama3 model" in b and "has mixture-of-experts layers" in b for b in broken)


def test_torchtitan_cannot_build_five_stages_a_rank_for_70b() -> None:
    # 80 layers + 2 = 82 effective; 20 stages need lps = ceil(82 / 20) = 5, which builds
    # ceil(82 / 5) = 17 stages; no lps builds 20 (19 * 5 = 95 >= 82).
    broken = violations(get_engine("torchtitan"), _llama70b(), Layout(tp=8, pp=4, vpp=5, zero=3))
    assert broken == [
        "torchtitan requires more than 2 stages a rank to come from a layers-per-stage: "
        "ceil((layers + 2) / layers_per_stage) == pp * vpp: ceil((80 + 2) / 5) = 17 stages, not 20"
    ]


def test_messages_name_the_engine_and_the_numbers() -> None:
    # Llama 3 8B on 24 GPUs, tp 8 x cp 3 (dp 1), seq 4095 = 3 x 1365: 4095 % 6 = 3.
    from tests.helpers import plate_job

    job = plate_job(24, "llama3-8b", seq_len=4095)
    broken = violations(get_engine("megatron"), job, Layout(tp=8, cp=3))
    assert "Megatron-LM requires seq_len % (2 * cp) == 0 when cp > 1: 4095 % 6 != 0" in broken


def test_unknown_engine_is_a_domain_error() -> None:
    with pytest.raises(InvalidSpec, match="unknown engine 'colossal'"):
        get_engine("colossal")


# --- offers, rules and runtime as data ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_fact_has_a_source(name: str) -> None:
    engine = ENGINES[name]
    offers = engine.offers
    features = [
        *offers.schedules.values(),
        *offers.zero.values(),
        *offers.recompute.values(),
        offers.interleaving,
        offers.tensor_parallel,
        offers.context_parallel,
        offers.expert_parallel,
        offers.sequence_parallel,
        offers.uneven_stages,
        *offers.unmapped,
    ]
    assert all(f.source and (f.engine_term or not f.offered) for f in features)
    assert all(r.source and r.description.startswith(engine.label) for r in engine.rules)
    assert len({r.name for r in engine.rules}) == len(engine.rules)
    runtime = engine.runtime
    assert all(s.source for s in runtime.gradient_sync) and all(o.source for o in runtime.overlaps)
    assert sorted(o.name for o in runtime.overlaps) == [
        "grad_reduce",
        "p2p",
        "param_gather",
        "tp_comm",
    ]
    # A gradient synchronisation for every ZeRO stage offered, and none for the others.
    offered_stages = [z for z in ZERO_STAGES if offers.zero[z].offered]
    assert [s.zero for s in runtime.gradient_sync] == offered_stages


def test_gradient_sync_where_engines_differ() -> None:
    megatron = get_engine("megatron").runtime
    # Distributed optimizer: one fp32 reduce-scatter a step (param_and_grad_buffer.py:710-733).
    zero1 = megatron.sync_for(1)
    assert zero1 is not None
    assert (zero1.timing, zero1.collective, zero1.reduce_bytes_per_value) == (
        "per_step",
        "reduce-scatter",
        4,
    )
    # DeepSpeed ZeRO-2: an all-reduce after every backward, in bf16 (#2252, #5758).
    zero2 = get_engine("deepspeed").runtime.sync_for(2)
    assert zero2 is not None
    assert (zero2.timing, zero2.collective, zero2.reduce_bytes_per_value) == (
        "per_micro_batch",
        "all-reduce",
        2,
    )
    # torchtitan FSDP2: every micro-batch without pp, once a step with it (torch stage.py).
    fsdp = get_engine("torchtitan").runtime.sync_for(3)
    assert fsdp is not None
    assert (fsdp.timing_at(1), fsdp.timing_at(16)) == ("per_micro_batch", "per_step")
    assert get_engine("torchtitan").runtime.sync_for(1) is None
    # Megatron-LM's overlaps are off unless asked for; the export asks.
    grad = megatron.overlap("grad_reduce")
    assert (grad.default_on, grad.exported_on) == (False, True)


def test_docs_list_every_rule() -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[1] / "docs" / "engines.md").read_text()
    for engine in ENGINES.values():
        assert f"(`{engine.name}`)" in docs
        for rule in engine.rules:
            assert f"`{rule.name}`" in docs, (engine.name, rule.name)


def test_megatron_writes_which_layers_are_moe_where_the_hf_model_puts_them() -> None:
    # --moe-layer-freq takes a Python list expression, 1 an MoE layer (arguments.py:327-345);
    # its integer form N would put MoE at layers 0, N, 2N, where Llama 4 Maverick's config
    # puts it at 1, 3, ..., 47 (moe_layers = range(step - 1, layers, step))
    from models.hf_config import from_hf_config
    from tests.test_hf_import_families import LLAMA4_SCOUT

    text = {**LLAMA4_SCOUT["text_config"], "interleave_moe_layer_step": 2, "num_hidden_layers": 7}
    job = _mixtral()
    job = job.model_copy(update={"model": from_hf_config(text)})
    layout = Layout(tp=1, pp=1, cp=1, vpp=1, micro_batch=1, ep=8)
    args = megatron_parser().parse_args(
        command_line(export(get_engine("megatron"), job, layout).text)
    )
    pattern = eval(args.moe_layer_freq, {"__builtins__": {}})  # as Megatron-LM evaluates it
    assert pattern == [int((i + 1) % 2 == 0) for i in range(7)] == [0, 1, 0, 1, 0, 1, 0]
    every = job.model_copy(update={"model": from_hf_config(LLAMA4_SCOUT)})
    args = megatron_parser().parse_args(
        command_line(export(get_engine("megatron"), every, layout).text)
    )
    assert args.moe_layer_freq is None  # every layer MoE: Megatron's default
