"""Fused attention's throughput by attended length (optimizer/costmodel/standard/
attention_table.py): the runs copied from cuDNN's training SDPA benchmark give back the
TFLOP/s its CSVs print, and the relative rates follow from them by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset
from models.transformer import TransformerSpec
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.costmodel.standard import attention_table as table
from tests.helpers import plate_job


def printed_tflops(run: table.SdpaRun) -> tuple[float, float]:
    """The benchmark's own count: 4 x scores x head dim x heads x sequences forward, 2.5 times
    that backward, over each pass's time."""
    forward = 4 * run.scores * run.head_dim * run.heads * run.batch
    return forward / run.forward_ms / 1e9, 2.5 * forward / run.backward_ms / 1e9


@pytest.mark.parametrize(
    ("arch", "seq_len", "window", "forward_tflops", "backward_tflops"),
    [
        # the fwd_tflops and bwd_tflops (or tflops) columns of the CSVs the module names
        ("sm_90", 32768, None, 688, 581),
        ("sm_90", 2048, None, 484, 370),
        ("sm_90", 32768, 1024, 358, 299),
        ("sm_100", 16384, None, 1708, 1328),
        ("sm_100", 4096, None, 1408, 1148),
        ("sm_100", 32768, 128, 104, 186),
    ],
)
def test_the_runs_give_back_the_benchmarks_printed_rates(
    arch: str, seq_len: int, window: int | None, forward_tflops: float, backward_tflops: float
) -> None:
    (run,) = [r for r in table.MEASURED[arch] if r.seq_len == seq_len and r.window == window]
    forward, backward = printed_tflops(run)
    assert forward == pytest.approx(forward_tflops, rel=5e-3)
    assert backward == pytest.approx(backward_tflops, rel=5e-3)


def test_relative_rates_by_hand() -> None:
    def rate(scores: float, work: float, ms: float) -> float:
        return scores * work / ms

    reference = rate(16384 * 16385 / 2, 128 * 64, 6.531 + 19.002)
    short = rate(2048 * 2049 / 2, 128 * 64, 0.142 + 0.464) / reference
    # a 1,024-token window over 32,768 tokens, head dim 64, two sequences
    window = rate(1024 * 32768 - 1024 * 1023 / 2, 64 * 64 * 2, 3.021 + 9.045) / reference
    assert table.relative_rate("sm_90", 16384) == pytest.approx(1.0)
    assert table.relative_rate("sm_90", 2048) == pytest.approx(short)
    assert table.relative_rate("sm_90", 1024) == pytest.approx(window)
    assert short == pytest.approx(0.658, abs=1e-3) and window == pytest.approx(0.521, abs=1e-3)
    # between runs, linear in the log of the length: halfway (in the log) is the mean
    between = table.relative_rate("sm_90", math.sqrt(2048 * 4096))
    assert between == pytest.approx(
        (table.relative_rate("sm_90", 2048) + table.relative_rate("sm_90", 4096)) / 2
    )
    # below the shortest run a query takes the shortest's time: the rate falls with the keys
    assert table.relative_rate("sm_90", 128) == pytest.approx(window * 128 / 1024)
    # above the longest, the longest's rate holds
    assert table.relative_rate("sm_100", 131072) == table.relative_rate("sm_100", 32768)


def test_rates_rise_with_the_keys_up_to_the_reference() -> None:
    for arch in table.MEASURED:
        lengths = np.geomspace(64, table.REFERENCE_LENGTH, 40)
        rates = table.relative_rate(arch, lengths)
        assert np.all(np.diff(rates) > 0) and rates[-1] == pytest.approx(1.0)


def test_a_window_costs_its_keys_rate_and_a_gpu_without_runs_is_unchanged() -> None:
    # Llama 3 8B (8,192 tokens, H100: sm_90) with 16 of its 32 layers windowed to 128 keys:
    # each kind's work over its rate, against the same work at one rate
    plate = plate_job(64, "llama3-8b")
    spec = plate.model.model_copy(update={"sliding_window": 128, "sliding_window_layers": 16})
    job = plate.model_copy(update={"model": TransformerSpec.model_validate(spec.model_dump())})
    layout = Layout(tp=1, pp=1, cp=1, vpp=1, micro_batch=1, zero=1)
    off = CostAssumptions(attention_length_throughput=False)

    def attention(j: TrainingJob, assumptions: CostAssumptions | None = None) -> float:
        return float(evaluate(j, layout, "standard", assumptions).times_s["attention"])

    s, w = 8192, 128
    full, band = 0.5, 0.5 * (w * s - w * (w - 1) / 2) / (s * (s + 1) / 2)
    r_full, r_band = table.relative_rate("sm_90", s), table.relative_rate("sm_90", w)
    ratio = (full / r_full + band / r_band) / (full + band)
    assert attention(job) / attention(job, off) == pytest.approx(ratio)
    # the windows hold 3% of the work at 0.065 of the reference rate, the rest runs at 0.94:
    # (0.5 / 0.940 + 0.0155 / 0.0651) / 0.5155 = 1.49
    assert ratio == pytest.approx(1.49, abs=0.01)
    a100 = job.model_copy(
        update={"cluster": job.cluster.model_copy(update={"gpu": gpu_preset("a100-80gb")})}
    )
    assert attention(a100) == attention(a100, off)
