"""Which fused attention kernel an engine version runs (Transformer Engine from 1.2 takes
cuDNN's over FlashAttention on Hopper) and what it makes of an attention's time, against the
figures NVIDIA's benchmark printed (NVIDIA/cudnn-frontend@b740542
benchmark/benchmark_results.csv l.7-11: bf16, head dim 128, causal, forward plus backward,
TFLOP/s of PyTorch's flash SDPA and of cuDNN 9.1, by sequence length)."""

from __future__ import annotations

from typing import Any

import pytest

from models.layout import Layout
from models.presets import gpu_preset
from optimizer.costmodel import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.costmodel.standard.attention_kernels import cudnn_over_flash2
from optimizer.engines import engine_assumptions, get_engine
from tests.helpers import plate_job

# cuDNN over FlashAttention-2, the benchmark's causal rows copied by hand
AT_4096 = 467.9392251734923 / 264.4746092756496  # 1.7693
AT_8192 = 490.27251570807965 / 289.5800342073893  # 1.6930
AT_16384 = 520.2583778032041 / 310.5321955338218  # 1.6754
AT_65536 = 520.3824870851007 / 328.50319349561096  # 1.5841
LAYOUT = Layout(tp=8, pp=1, cp=1, vpp=1, micro_batch=1)


def priced(spec: str, settings: dict[str, Any] | None = None, **stated: Any) -> CostAssumptions:
    """The assumptions `spec` with `settings` prices a request stating `stated` under."""
    return engine_assumptions(get_engine(spec, settings), CostAssumptions(**stated))


def attention_s(gpu: str, assumptions: CostAssumptions, seq_len: int = 8192) -> float:
    job = plate_job(64, "llama3-70b", seq_len=seq_len)
    job = job.model_copy(
        update={"cluster": job.cluster.model_copy(update={"gpu": gpu_preset(gpu)})}
    )
    return evaluate(job, LAYOUT, "standard", assumptions).times_s["attention"]


@pytest.mark.parametrize(
    ("spec", "settings", "cudnn"),
    [
        ("nemo@24.09", {"nvte_fused_attn": True}, True),  # NVTE_FUSED_ATTN=1
        ("nemo@24.09", {"nvte_fused_attn": False}, False),  # NVTE_FUSED_ATTN=0
        ("megatron", {"attention_backend": "flash"}, False),
        ("megatron", {"attention_backend": "fused"}, True),
        ("megatron@23.04", {"use_flash_attn": True}, False),  # the flash-attn package
        ("megatron@core_r0.8.0", {"transformer_impl": "local"}, False),
    ],
)
def test_the_settings_that_name_the_attention_kernel(
    spec: str, settings: dict[str, Any], cudnn: bool
) -> None:
    assert priced(spec, settings).cudnn_fused_attention is cudnn
    # auto leaves Transformer Engine its choice: the version's
    auto = priced("megatron", {"attention_backend": "auto"}).cudnn_fused_attention
    assert auto is priced("megatron").cudnn_fused_attention


@pytest.mark.parametrize(
    ("length", "ratio"),
    [
        (4096, AT_4096),
        (8192, AT_8192),
        (16384, AT_16384),
        (65536, AT_65536),
        # halfway between two measured lengths in the log: halfway between their ratios
        (4096 * 2**0.5, (AT_4096 + AT_8192) / 2),
        # outside the measured lengths, the nearest one's ratio
        (1024, AT_4096),
        (262144, AT_65536),
    ],
)
def test_cudnns_rate_over_flashattention_2_by_length(length: float, ratio: float) -> None:
    assert float(cudnn_over_flash2(length)) == pytest.approx(ratio, rel=1e-12)


def test_cudnns_attention_runs_at_its_measured_rate_for_the_length_on_hopper() -> None:
    cudnn = priced("nemo@24.09", {"nvte_fused_attn": True})
    flash = priced("nemo@24.09", {"nvte_fused_attn": False})
    # full causal layers: the length table's shape is both kernels', so the times differ by
    # the ratio measured at the sequence's length (held at 4,096's below it)
    for gpu in ("h100-sxm", "h200-sxm"):
        for seq_len, ratio in ((8192, AT_8192), (16384, AT_16384), (2048, AT_4096)):
            speedup = attention_s(gpu, flash, seq_len) / attention_s(gpu, cudnn, seq_len)
            assert speedup == pytest.approx(ratio)
    # one efficiency for every length: the reference length's ratio
    flat = {"attention_length_throughput": False}
    cudnn_flat = priced("nemo@24.09", {"nvte_fused_attn": True}, **flat)
    flash_flat = priced("nemo@24.09", {"nvte_fused_attn": False}, **flat)
    speedup = attention_s("h100-sxm", flash_flat) / attention_s("h100-sxm", cudnn_flat)
    assert speedup == pytest.approx(AT_16384)
    # measured on Hopper only: Blackwell and A100 keep their preset's efficiency
    for gpu in ("b200", "a100-80gb"):
        assert attention_s(gpu, flash) == pytest.approx(attention_s(gpu, cudnn))
    # an attention efficiency the request states is the kernel's own: not carried again
    stated = {"attention_kernel_efficiency": 0.5}
    on = priced("nemo@24.09", {"nvte_fused_attn": True}, **stated)
    assert attention_s("h100-sxm", on) == pytest.approx(
        attention_s("h100-sxm", priced("nemo@24.09", {"nvte_fused_attn": False}, **stated))
    )


def test_nemo_24_09_takes_nvte_fused_attn_and_the_bridge_releases_refuse_it() -> None:
    from models.errors import InvalidSpec

    with pytest.raises(InvalidSpec) as refused:
        get_engine("nemo@26.04.01", {"nvte_fused_attn": False})
    assert refused.value.field == "engine_settings.nvte_fused_attn"
