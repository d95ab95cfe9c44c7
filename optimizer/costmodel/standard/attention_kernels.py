"""Profile `standard`: which fused attention kernel runs, and what it makes of the GPU's
attention efficiency (docs/cost-model.md, "Attention kernels").

The GPU presets' `attention_efficiency` is FlashAttention-2's (H100 and H200: about 35% of
peak, Shah et al., FlashAttention-3, arXiv 2407.08608, abstract). Transformer Engine from 1.2
on (2023-12, NVIDIA/TransformerEngine@32db39288 'Integrate cuDNN frontend v1 to fused
attention') runs cuDNN's fused attention instead wherever both are available on Hopper:
'Select FusedAttention on sm90 and FlashAttention on others for performance'
(transformer_engine/pytorch/attention.py, DotProductAttention.forward, at v1.2 l.2383-2388 and
on to v1.7; v1.8's get_attention_backend keeps it, 'Disabling FlashAttention to give
FusedAttention preference on Hopper+'). Before 1.2 it took FlashAttention first when installed
(v0.12 and v1.1: use_flash_attention is tried before use_fused_attention).
`NVTE_FUSED_ATTN=0` (or Megatron-Core's `--attention-backend flash`) keeps FlashAttention.

cuDNN's rate over FlashAttention-2's, by sequence length, is NVIDIA's own measurement of both
on one Hopper GPU (NVIDIA/cudnn-frontend@b740542, benchmark/benchmark_results.csv
l.7-11, the causal rows; the README's clock example is H200's, the file does not name the GPU):
bf16, 16 heads of dim 128, causal, forward plus backward, cuDNN 9.1 against PyTorch's flash
SDPA, which runs FlashAttention-2's kernels, in TFLOP/s:

    tokens     4,096   8,192  16,384  32,768  65,536
    FA-2       264.5   289.6   310.5   324.8   328.5
    cuDNN      467.9   490.3   520.3   519.6   520.4
    ratio      1.769   1.693   1.675   1.600   1.584

The ratio falls with the length: FlashAttention-2 gains more from long sequences than cuDNN's
kernel does. Its rerun at cudnn-frontend@de355c7 (the NGC PyTorch 24.07 container, l.7-11 of the
same file) agrees in shape: 1.851, 1.750, 1.690, 1.651, 1.640. `cudnn_over_flash2`
interpolates the first in the log of the attended keys and holds the end points outside them:
below 4,096 tokens no forward-plus-backward Hopper measurement of both was found (the benchmark
script's 512-2,048 rows are commented out; FlashAttention-3's paper, arXiv 2407.08608, compares
cuDNN with FlashAttention-2 on H100 from 512 tokens only in figures, forward alone), so the
4,096-token ratio stands there (UNVERIFIED). The GPU presets' FlashAttention-2 efficiency
holds at 16,384 tokens (attention_table.REFERENCE_LENGTH), where the ratio is 1.675; the length
table (attention_table) gives both kernels its shape by length, and cuDNN's kernel takes, at
each length, the ratio measured there.

Only Hopper is priced so: the measurement is Hopper's, and Transformer Engine's preference was
sm90's alone until 1.8. On other GPUs the factor is 1. Blackwell's presets name no
FlashAttention-2 figure of their own (attention.DEFAULT_ATTENTION_EFFICIENCY, H100's), and the
one measurement of both there (cudnn-frontend@9793df5 benchmark/sdpa_benchmark_training/
artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv: cuDNN 9.10.2 against flash-attn 2.7.4,
whose Ampere kernels B200 runs) puts cuDNN 1.32 times FlashAttention-2 at 512 tokens and 3.06 at
16,384: a ratio to a figure the presets do not hold.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from models.job import TrainingJob
from optimizer.costmodel.assumptions import CostAssumptions

Number = Any

# NVIDIA/cudnn-frontend@b740542 benchmark/benchmark_results.csv l.7-11, the causal rows:
# (sequence length, PyTorch's flash SDPA (FlashAttention-2) TFLOP/s, cuDNN 9.1 BF16 TFLOP/s),
# forward plus backward.
MEASURED_TFLOPS: tuple[tuple[int, float, float], ...] = (
    (4096, 264.4746092756496, 467.9392251734923),
    (8192, 289.5800342073893, 490.27251570807965),
    (16384, 310.5321955338218, 520.2583778032041),
    (32768, 324.81276931149955, 519.6405324459428),
    (65536, 328.50319349561096, 520.3824870851007),
)
# The architecture the measurement and Transformer Engine's preference are Hopper's: the GPU
# presets name it by their GEMM table (gpus.json `gemm_table`).
HOPPER_TABLE = "sm_90"


@cache
def _measured_ratios() -> tuple[np.ndarray, np.ndarray]:
    """(log of the measured lengths, cuDNN's rate over FlashAttention-2's at each); read once
    (callers must not write to the arrays)."""
    log_lengths = np.log([length for length, _, _ in MEASURED_TFLOPS])
    ratios = np.array([cudnn / flash for _, flash, cudnn in MEASURED_TFLOPS])
    return log_lengths, ratios


def cudnn_over_flash2(length: Number) -> Number:
    """cuDNN's fused attention rate over FlashAttention-2's at `length` attended keys (bf16,
    head dim 128, causal, forward plus backward, on Hopper: MEASURED_TFLOPS): interpolated in
    the log of the length between the measured lengths, the nearest one's outside them."""
    log_lengths, ratios = _measured_ratios()
    keys = np.maximum(np.asarray(length, dtype=float), 1.0)
    return np.interp(np.log(keys), log_lengths, ratios)


def runs_cudnn(job: TrainingJob, a: CostAssumptions) -> bool:
    """Whether the attention priced is cuDNN's against the preset's FlashAttention-2 figure:
    the engine runs cuDNN's kernel (`cudnn_fused_attention`) on Hopper and the request states
    no attention efficiency of its own (a stated one is the kernel's own)."""
    hopper = job.cluster.gpu.gemm_table == HOPPER_TABLE
    return a.cudnn_fused_attention and hopper and a.attention_kernel_efficiency is None


def attention_kernel_factor(job: TrainingJob, a: CostAssumptions, length: Number) -> Number:
    """What the attention kernel that runs makes of the GPU preset's FlashAttention-2
    efficiency at `length` attended keys: cuDNN's rate over FlashAttention-2's there
    (cudnn_over_flash2) where it runs cuDNN's (runs_cudnn), else 1."""
    if runs_cudnn(job, a):
        return cudnn_over_flash2(length)
    return np.ones_like(np.asarray(length, dtype=float))
