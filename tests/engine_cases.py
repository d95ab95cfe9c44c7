"""The exports the engine tests check: the plate and two other runs, a sensible layout per
engine for each, and what each engine's artefact says once read back."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from dataclasses import dataclass

from models.job import TrainingJob
from models.layout import Layout, Recompute
from tests.helpers import plate_job


@dataclass(frozen=True)
class Case:
    name: str
    engine: str
    job: TrainingJob
    layout: Layout


def _plate() -> TrainingJob:  # Llama 3 405B on 16,384 H100, 2,048 x 8,192 tokens
    return plate_job()


def _mixtral() -> TrainingJob:  # Mixtral 8x7B on 256 H100
    return plate_job(256, "mixtral-8x7b", global_batch=1024, seq_len=4096)


def _llama70b() -> TrainingJob:  # Llama 3 70B on 1,024 H100
    return plate_job(1024, "llama3-70b", global_batch=1024)


def _llama70b_fp8() -> TrainingJob:  # the same in FP8
    job = _llama70b()
    return job.model_copy(update={"training": job.training.model_copy(update={"precision": "fp8"})})


# The plate's layout: tp 8, pp 16, vpp 4, ZeRO-2 (dp = 16384 / 128 = 128, 16 micro-batches).
PLATE = Layout(tp=8, pp=16, vpp=4, zero=2)

CASES = [
    # Plate as drawn: torchtitan runs ZeRO-2 as FSDP2 without resharding after forward.
    Case("plate", "torchtitan", _plate(), PLATE),
    Case("plate", "generic", _plate(), PLATE),
    # Megatron-Core engines run the plate with the distributed optimizer (ZeRO-1) instead:
    # their ZeRO-2 is Megatron-FSDP, exported only at pp 1.
    Case("plate-zero1", "megatron", _plate(), PLATE.model_copy(update={"zero": 1})),
    Case("plate-zero1", "nemo", _plate(), PLATE.model_copy(update={"zero": 1})),
    # DeepSpeed: no interleaving and ZeRO <= 1 with a pipeline.
    Case("plate-zero1-vpp1", "deepspeed", _plate(), Layout(tp=8, pp=16, zero=1)),
    # Mixtral: 32 layers, pp 4 x vpp 2 = 8 chunks of 4; ep 8 over dp 64 (256 / 4).
    Case(
        "mixtral",
        "megatron",
        _mixtral(),
        Layout(pp=4, vpp=2, ep=8, zero=1, recompute=Recompute.SELECTIVE),
    ),
    Case("mixtral", "deepspeed", _mixtral(), Layout(pp=4, ep=8, zero=1, recompute=Recompute.FULL)),
    Case("mixtral", "generic", _mixtral(), Layout(pp=4, vpp=2, ep=8, zero=1)),
    # Llama 3 70B: 80 layers, tp 8 x pp 4 (dp 32); vpp 5 = 20 chunks of 4.
    Case("llama70b", "megatron", _llama70b(), Layout(tp=8, pp=4, vpp=5, zero=1)),
    Case("llama70b", "nemo", _llama70b(), Layout(tp=8, pp=4, vpp=5, zero=1)),
    # torchtitan: vpp 5 cannot come from a layers-per-stage (ceil(82 / 5) = 17 != 20 stages);
    # its looped default, 2 stages a rank, with FSDP (ZeRO-3).
    Case("llama70b", "torchtitan", _llama70b(), Layout(tp=8, pp=4, vpp=2, zero=3)),
    Case(
        "llama70b",
        "deepspeed",
        _llama70b(),
        Layout(tp=8, pp=4, zero=1, recompute=Recompute.FULL),
    ),
    # Uneven splits: 126 layers on pp 16 (first/last 7 + 14 x 8), 80 on pp 4 x vpp 3 (layout).
    Case("405b-first-last", "megatron", plate_job(2048), Layout(tp=8, pp=16, zero=1)),
    Case("405b-first-last", "nemo", plate_job(2048), Layout(tp=8, pp=16, zero=1)),
    Case("70b-layout", "megatron", _llama70b(), Layout(tp=8, pp=4, vpp=3, zero=1)),
    Case("70b-layout", "nemo", _llama70b(), Layout(tp=8, pp=4, vpp=3, zero=1)),
    # ZeRO-3 without a pipeline: Megatron-FSDP (Megatron) and FSDP2 (torchtitan); cp 2.
    Case("8b-zero3-cp2", "megatron", plate_job(64, "llama3-8b"), Layout(tp=2, cp=2, zero=3)),
    Case("8b-zero3-cp2", "torchtitan", plate_job(64, "llama3-8b"), Layout(tp=2, cp=2, zero=3)),
    Case("8b-zero2", "deepspeed", plate_job(64, "llama3-8b"), Layout(tp=1, zero=2, micro_batch=2)),
    # FP8: Transformer Engine's per-tensor current scaling, as the engines are priced.
    Case("70b-fp8", "megatron", _llama70b_fp8(), Layout(tp=4, pp=4, vpp=5, zero=1)),
    Case("70b-fp8", "nemo", _llama70b_fp8(), Layout(tp=4, pp=4, vpp=5, zero=1)),
]


def case_id(case: Case) -> str:
    return f"{case.engine}-{case.name}"


# --- reading artefacts back ------------------------------------------------------------


def command_line(text: str) -> list[str]:
    """A flag-per-line shell fragment (comments, continuations) as argv."""
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return shlex.split(" ".join(line.removesuffix("\\") for line in lines))


def overrides(text: str) -> dict[str, object]:
    """`KEY=VALUE` lines as Hydra reads their values: null, true/false, ints, quoted strings."""
    values: dict[str, object] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        key, raw = line.split("=", 1)
        values[key] = _hydra_value(raw)
    return values


def _hydra_value(raw: str) -> object:
    if raw in ("null", "true", "false"):
        return {"null": None, "true": True, "false": False}[raw]
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    return raw.strip("'")


def deepspeed_config(text: str) -> dict[str, object]:
    return dict(json.loads(text))


# --- parsers built from the flag names the exporters write, typed as the engines declare them


def megatron_parser() -> argparse.ArgumentParser:
    """Megatron-LM's flags as its parser types them (arguments.py, argument_utils.py)."""
    parser = argparse.ArgumentParser(allow_abbrev=False)
    ints = (
        "tensor-model-parallel-size pipeline-model-parallel-size context-parallel-size "
        "expert-model-parallel-size num-layers-per-virtual-pipeline-stage "
        "num-virtual-stages-per-pipeline-rank decoder-first-pipeline-num-layers "
        "decoder-last-pipeline-num-layers micro-batch-size global-batch-size "
        "recompute-num-layers num-layers hidden-size ffn-hidden-size num-attention-heads "
        "num-query-groups kv-channels seq-length max-position-embeddings num-experts "
        "moe-router-topk moe-ffn-hidden-size moe-shared-expert-intermediate-size q-lora-rank "
        "kv-lora-rank qk-head-dim qk-pos-emb-head-dim v-head-dim"
    )
    strings = (
        "pipeline-model-parallel-layout data-parallel-sharding-strategy ckpt-format "
        "recompute-granularity recompute-method moe-token-dispatcher-type moe-layer-freq"
    )
    choices = {
        "fp8-format": ["e4m3", "hybrid"],
        "fp8-recipe": ["tensorwise", "delayed"],
        "normalization": ["LayerNorm", "RMSNorm"],
        "position-embedding-type": ["learned_absolute", "rope", "mrope", "relative", "none"],
    }
    switches = (
        "sequence-parallel account-for-embedding-in-pipeline-split "
        "account-for-loss-in-pipeline-split use-distributed-optimizer use-megatron-fsdp "
        "overlap-grad-reduce overlap-param-gather bf16 group-query-attention swiglu "
        "untie-embeddings-and-output-weights moe-grouped-gemm multi-latent-attention "
        "use-tp-pp-dp-mapping fp8-param-gather overlap-moe-expert-parallel-comm"
    )
    for name in ints.split():
        parser.add_argument(f"--{name}", type=int)
    for name in strings.split():
        parser.add_argument(f"--{name}")
    for name in switches.split():
        parser.add_argument(f"--{name}", action="store_true")
    for name, allowed in choices.items():  # transformer_config.py:587-597
        parser.add_argument(f"--{name}", choices=allowed)
    parser.add_argument("--recompute-modules", nargs="*")  # transformer_config.py:560
    parser.add_argument("--disable-bias-linear", action="store_false", dest="add_bias_linear")
    return parser


def torchtitan_parser() -> argparse.ArgumentParser:
    """torchtitan 0.3.0's fields (configs.py) with the activation-checkpoint subcommand."""
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--module")
    parser.add_argument("--config")
    for name in [
        "data_parallel_replicate_degree",
        "data_parallel_shard_degree",
        "tensor_parallel_degree",
        "pipeline_parallel_degree",
        "context_parallel_degree",
        "expert_parallel_degree",
        "pipeline_parallel_microbatch_size",
        "pipeline_parallel_layers_per_stage",
    ]:
        parser.add_argument(f"--parallelism.{name}", type=int)
    parser.add_argument(
        "--parallelism.pipeline_parallel_schedule", choices=["1F1B", "Interleaved1F1B"]
    )
    parser.add_argument(
        "--parallelism.fsdp_reshard_after_forward", choices=["default", "always", "never"]
    )
    for name in ("local_batch_size", "global_batch_size", "seq_len"):
        parser.add_argument(f"--training.{name}", type=int)
    parser.add_argument("--training.disable_cuda_graphs", action="store_true")
    modes = [f"activation_checkpoint:{m.value}" for m in Recompute]
    parser.add_argument("activation_checkpoint", choices=modes)
    return parser
