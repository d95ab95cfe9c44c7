"""Small builders shared by the tests."""

from __future__ import annotations

import pytest

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from optimizer.costmodel import CostAssumptions
from optimizer.engines import Engine, get_engine

# No CUDA context or NCCL buffers beside the tensors: for tests whose memory limits were set
# for the tensors alone (the oracle's stage plans at 8 and 9 GB)
NO_RUNTIME = CostAssumptions(cuda_context_gb=0, nccl_buffers_gb_per_group=0)


def plate_job(
    gpus: int = 16384, model: str | TransformerSpec = "llama3-405b", **training: int
) -> TrainingJob:
    """The workshop plate's setting: a Llama 3 model on H100s, 2,048 x 8,192 tokens by default."""
    spec = model_preset(model) if isinstance(model, str) else model
    return TrainingJob(
        model=spec,
        cluster=ClusterSpec(gpus=gpus, gpu=gpu_preset("h100-sxm"), gpus_per_node=8),
        training=TrainingSpec(**training),
    )


def engine_or_none(name: str | None) -> Engine | None:
    """The engine of that name; None (no engine's rules, the engine-agnostic figures) for None."""
    return None if name is None else get_engine(name)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`layoutopt ARGV` in this process: its exit status, stdout and stderr."""
    from api.cli import main

    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err
