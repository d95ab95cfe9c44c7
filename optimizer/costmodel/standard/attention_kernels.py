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

cuDNN's rate over FlashAttention-2's is NVIDIA's own measurement of both on one Hopper GPU,
bf16, head dim 128, causal, forward plus backward (NVIDIA/cudnn-frontend@b740542, 2024-05-07,
benchmark/benchmark_results.csv, cuDNN 9.1 against PyTorch's flash SDPA, which runs
FlashAttention-2's kernels): at 16,384 tokens, the length at which the presets' efficiency is
held (attention_table.REFERENCE_LENGTH), 520.26 against 310.53 TFLOP/s. How the rate falls on
shorter sequences is attention_table's, which applies to either kernel alike (its runs are
cuDNN's; the benchmark's ratio is 1.77 at 4,096 tokens and 1.68 at 16,384, so applying the
16,384-token ratio at every length under-states cuDNN on short sequences slightly).

Only Hopper is priced so: the measurement is Hopper's, and Transformer Engine's preference was
sm90's alone until 1.8. On other GPUs the factor is 1.
"""

from __future__ import annotations

from models.job import TrainingJob
from optimizer.costmodel.assumptions import CostAssumptions

# NVIDIA/cudnn-frontend@b740542 benchmark/benchmark_results.csv, the row 1,16,16384,128,True:
# TFLOP/s forward plus backward, PyTorch's flash SDPA (FlashAttention-2) and cuDNN 9.1 BF16.
FLASH2_TFLOPS_AT_REFERENCE = 310.5321955338218
CUDNN_TFLOPS_AT_REFERENCE = 520.2583778032041
CUDNN_OVER_FLASH2 = CUDNN_TFLOPS_AT_REFERENCE / FLASH2_TFLOPS_AT_REFERENCE
# The architecture the measurement and Transformer Engine's preference are Hopper's: the GPU
# presets name it by their GEMM table (gpus.json `gemm_table`).
HOPPER_TABLE = "sm_90"


def attention_kernel_factor(job: TrainingJob, a: CostAssumptions) -> float:
    """What the attention kernel that runs makes of the GPU preset's FlashAttention-2
    efficiency: cuDNN's rate over FlashAttention-2's where the engine runs cuDNN's kernel
    (`cudnn_fused_attention`) on Hopper, else 1."""
    if a.cudnn_fused_attention and job.cluster.gpu.gemm_table == HOPPER_TABLE:
        return CUDNN_OVER_FLASH2
    return 1.0
