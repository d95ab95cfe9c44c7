"""Which fused attention kernel an engine version runs (Transformer Engine from 1.2 takes
cuDNN's over FlashAttention on Hopper) and what it makes of an attention's time, against the
figures NVIDIA's benchmark printed (NVIDIA/cudnn-frontend@b740542
benchmark/benchmark_results.csv: bf16, head dim 128, causal, 16,384 tokens, forward plus
backward: PyTorch's flash SDPA 310.5321955338218 TFLOP/s, cuDNN 9.1 520.2583778032041)."""

from __future__ import annotations

from typing import Any

import pytest

from models.layout import Layout
from models.presets import gpu_preset
from optimizer.costmodel import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.engines import engine_assumptions, get_engine
from tests.helpers import plate_job

CUDNN_OVER_FLASH2 = 520.2583778032041 / 310.5321955338218  # 1.6754 by hand
LAYOUT = Layout(tp=8, pp=1, cp=1, vpp=1, micro_batch=1)


def priced(spec: str, settings: dict[str, Any] | None = None, **stated: Any) -> CostAssumptions:
    """The assumptions `spec` with `settings` prices a request stating `stated` under."""
    return engine_assumptions(get_engine(spec, settings), CostAssumptions(**stated))


def attention_s(gpu: str, assumptions: CostAssumptions) -> float:
    job = plate_job(64, "llama3-70b")
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


def test_cudnns_attention_runs_at_its_measured_rate_over_flashattention_2_on_hopper() -> None:
    cudnn = priced("nemo@24.09", {"nvte_fused_attn": True})
    flash = priced("nemo@24.09", {"nvte_fused_attn": False})
    for gpu in ("h100-sxm", "h200-sxm"):
        assert attention_s(gpu, flash) / attention_s(gpu, cudnn) == pytest.approx(CUDNN_OVER_FLASH2)
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
