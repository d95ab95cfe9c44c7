"""The exported artefacts through the engines' own parsers and validators, on CPU.

Each test is skipped only when its engine is not importable: the project's environment has
none of them (they need torch). They run in a throwaway environment with torchtitan 0.3.0,
deepspeed 0.19.8, hydra-core and Megatron-LM's source on PYTHONPATH (docs/engines.md,
"Checking exports against the engines"). test_engines.py checks the same artefacts with
plain argparse/json and always runs.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import typing

import pytest

from models.layout import Layout, resolve_layout
from optimizer.engines import Engine, export, get_engine
from optimizer.engines.stages import titan_stage_layers
from tests.engine_cases import CASES, Case, case_id, command_line, overrides


def cases(engine: str) -> list[Case]:
    return [case for case in CASES if case.engine == engine]


def resolved(case: Case) -> Layout:
    return resolve_layout(case.layout, case.job)


# --- torchtitan 0.3.0: ConfigManager (tyro), ParallelDims, the pipeline's stage split ----


@pytest.mark.parametrize("case", cases("torchtitan"), ids=case_id)
def test_torchtitan_parses_and_builds_the_export(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torchtitan.config")
    if case.job.model.name == "llama3-405b":
        # llama3_405b's registry config converts linears to float8 when loaded, which needs
        # torchao and an SM89+ GPU (components/quantization/float8.py:74-96): pretend one.
        pytest.importorskip("torchao")
        float8 = importlib.import_module("torchtitan.components.quantization.float8")
        monkeypatch.setattr(float8, "has_cuda_capability", lambda *_: True)
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import pipeline_parallel
    from torchtitan.distributed.parallel_dims import ParallelDims

    layout = resolved(case)
    config = ConfigManager().parse_args(
        command_line(export(get_engine("torchtitan"), case.job, layout).text)
    )
    dims = ParallelDims.from_config(config.parallelism, case.job.cluster.gpus)
    assert dims.dp_replicate * dims.dp_shard == layout.dp
    model = config.model_spec.model
    assert (len(model.layers), model.dim, model.vocab_size) == (
        case.job.model.num_layers,
        case.job.model.hidden_size,
        case.job.model.vocab_size,
    )
    if layout.pp > 1:
        stages, layers, *_ = pipeline_parallel._get_pipeline_metadata(
            dims, config.parallelism, model
        )
        assert stages == layout.pp * layout.vpp
        parts = pipeline_parallel._generate_llm_fqn_per_model_part(stages, layers)
        built = tuple(sum(name.startswith("layers.") for name in part) for part in parts)
        assert built == titan_stage_layers(layers, stages)


# --- DeepSpeed 0.19.8: DeepSpeedConfig checks the batch identity at the mpu's dp ------------


@pytest.fixture(scope="module")
def deepspeed_world() -> typing.Iterator[None]:
    """A one-process gloo group, so that DeepSpeedConfig asks the mpu for dp instead of
    falling back to a world of 1 (runtime/config.py:456-474)."""
    deepspeed = pytest.importorskip("deepspeed")
    import torch.distributed as dist

    with pytest.MonkeyPatch.context() as env:
        world = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517", "RANK": "0"}
        for name, value in {**world, "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
            env.setenv(name, value)
        deepspeed.init_distributed(dist_backend="gloo")
        yield
        dist.destroy_process_group()


@pytest.mark.parametrize("case", cases("deepspeed"), ids=case_id)
def test_deepspeed_config_accepts_the_export(case: Case, deepspeed_world: None) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig

    layout = resolved(case)

    class Mpu:  # the data-parallel size PipelineModule's topology would report
        def get_data_parallel_world_size(self) -> int:
            return layout.data_parallel_size

    import json

    config = DeepSpeedConfig(
        json.loads(export(get_engine("deepspeed"), case.job, layout).text), mpu=Mpu()
    )
    assert config.train_batch_size == case.job.training.global_batch
    assert config.gradient_accumulation_steps == layout.micro_batches(
        case.job.training.global_batch
    )
    assert config.zero_optimization_stage == layout.zero
    assert config.pipeline.get("stages", "auto") in ("auto", layout.pp)


# --- Megatron-LM at d98e8a6: parse_args, validate_args, TransformerConfig -----------------


def megatron_arguments(monkeypatch: pytest.MonkeyPatch) -> typing.Any:
    if not hasattr(typing, "override"):  # d98e8a6 uses 3.12's typing.override
        monkeypatch.setattr(typing, "override", lambda f: f, raising=False)
    arguments = pytest.importorskip("megatron.training.arguments")
    # tp > 1 asks the GPU's architecture (arguments.py:1453-1454): pretend Hopper.
    monkeypatch.setattr(arguments, "get_device_arch_version", lambda: 9)
    monkeypatch.setattr(arguments.torch.cuda, "get_device_capability", lambda *_: (9, 0))
    return arguments


def parsed_megatron_args(case: Case, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> typing.Any:
    """The export's flags as Megatron-LM's parse_args and validate_args take them."""
    arguments = megatron_arguments(monkeypatch)
    layout = resolved(case)
    argv = command_line(export(engine, case.job, layout).text)
    # --no-rope-fusion: the fused kernel is Transformer Engine's, absent on a CPU test machine
    extra = "--train-iters 10 --lr 1e-4 --mock-data --tokenizer-type NullTokenizer --no-rope-fusion"
    vocab = ["--vocab-size", str(case.job.model.vocab_size)]
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *argv, *extra.split(), *vocab])
    monkeypatch.setenv("WORLD_SIZE", str(case.job.cluster.gpus))
    monkeypatch.setenv("RANK", "0")
    # TP wants one CUDA connection (arguments.py:1476-1479), Megatron-FSDP more (L1166-1167).
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8" if layout.zero >= 2 else "1")
    args = arguments.parse_args()
    arguments.validate_args(args)
    return args


@pytest.mark.parametrize("case", cases("megatron"), ids=case_id)
def test_megatron_validates_the_export(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    args = parsed_megatron_args(case, get_engine("megatron"), monkeypatch)
    arguments = megatron_arguments(monkeypatch)
    layout = resolved(case)
    assert args.data_parallel_size == layout.dp
    assert (args.virtual_pipeline_model_parallel_size or 1) == layout.vpp
    config = arguments.core_transformer_config_from_args(args)
    assert config.num_query_groups == case.job.model.num_kv_heads
    # the architecture priced, not Megatron-LM's defaults (LayerNorm, learned absolute
    # positions, biased linears, a plain MLP, tied embeddings)
    model = case.job.model
    assert (config.normalization, args.position_embedding_type) == ("RMSNorm", "rope")
    assert config.add_bias_linear is False
    assert config.gated_linear_unit == model.gated_mlp
    assert args.untie_embeddings_and_output_weights == (not model.tied_embeddings)
    assert (config.num_layers, config.hidden_size) == (model.num_layers, model.hidden_size)
    assert config.ffn_hidden_size == model.ffn_hidden_size


@pytest.mark.parametrize("case", cases("megatron")[:2], ids=case_id)
def test_megatron_takes_the_settings_the_export_writes(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {
        "overlap_grad_reduce": False,
        "overlap_p2p_comm": False,
        "ddp_bucket_size": 40_000_000,
        "attention_backend": "flash",
    }
    args = parsed_megatron_args(case, get_engine("megatron", settings), monkeypatch)
    assert (args.overlap_grad_reduce, args.overlap_param_gather) == (False, False)
    assert args.ddp_bucket_size == 40_000_000
    assert args.attention_backend.name == "flash"
    assert args.overlap_p2p_comm is False or (resolved(case).vpp == 1)


# --- Megatron-Bridge: Hydra's override grammar, and the fields Megatron-Core defines --------


@pytest.mark.parametrize("case", cases("nemo"), ids=case_id)
def test_bridge_overrides_parse_as_hydra_reads_them(case: Case) -> None:
    pytest.importorskip("hydra")
    from hydra.core.override_parser.overrides_parser import OverridesParser

    layout = resolved(case)
    text = export(get_engine("nemo"), case.job, layout).text
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(lines)}
    assert parsed == overrides(text)


MCORE_SECTIONS = {  # Bridge section -> the Megatron-Core / Megatron-LM dataclass behind it
    "model": "megatron.core.transformer.transformer_config:TransformerConfig",
    "train": "megatron.training.config.training_config:TrainingConfig",
    "ddp": "megatron.core.distributed.distributed_data_parallel_config:DistributedDataParallelConfig",
    "optimizer": "megatron.core.optimizer.optimizer_config:OptimizerConfig",
    "checkpoint": "megatron.training.config.training_config:CheckpointConfig",
}


def test_bridge_override_fields_exist_in_megatron_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bridge's sections subclass these (config.py:90, 121, 442, 497); `dataset.seq_length`
    is Bridge's own GPTDatasetConfig field (config.py:231), not checked here."""
    megatron_arguments(monkeypatch)
    for case in cases("nemo"):
        for key in overrides(export(get_engine("nemo"), case.job, resolved(case)).text):
            if key == "mixed_precision":  # Bridge's own preset name (config.py:1008)
                continue
            section, name = key.split(".", 1)
            # Bridge's own sections: GPTDatasetConfig (config.py:231) and CommOverlapConfig
            # (training/comm_overlap.py), not Megatron-Core's
            if section in ("dataset", "comm_overlap"):
                continue
            module, cls = MCORE_SECTIONS[section].split(":")
            fields = {
                f.name for f in dataclasses.fields(getattr(importlib.import_module(module), cls))
            }
            assert name in fields, key


def test_torchtitan_builds_the_custom_models_config_module(
    tmp_path: typing.Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shape no flavor has: the exported module, imported by ConfigManager as --module,
    builds that shape (config/manager.py:125-158)."""
    pytest.importorskip("torchtitan.config")
    import ast

    from torchtitan.config import ConfigManager

    from models.transformer import TransformerSpec
    from tests.helpers import plate_job

    model = TransformerSpec(
        name="custom-13b", num_layers=40, hidden_size=5120, ffn_hidden_size=13824,
        num_attention_heads=40, num_kv_heads=8, vocab_size=100_352,
    )  # fmt: skip
    job = plate_job(64, "llama3-8b", global_batch=256).model_copy(update={"model": model})
    artefact = export(get_engine("torchtitan"), job, Layout(tp=8, zero=3))
    (tmp_path / artefact.filename).write_text(artefact.text)
    monkeypatch.syspath_prepend(str(tmp_path))
    (args,) = [
        ast.literal_eval(n.value)
        for n in ast.parse(artefact.text).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "ARGS"
    ]
    module = artefact.filename.removesuffix(".py")
    config = ConfigManager().parse_args(["--module", module, "--config", "layoutopt_model", *args])
    built = config.model_spec.model
    assert (len(built.layers), built.dim, built.vocab_size) == (40, 5120, 100_352)
    assert config.parallelism.tensor_parallel_degree == 8
