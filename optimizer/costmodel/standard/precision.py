"""Profile `standard`, precision: what training in FP8 changes (docs/cost-model.md,
"Precision").

Under `training.precision` fp8 the transformer layers' GEMMs run at the GPU's FP8 dense peak
(compute.py carries the kernel efficiency to it), their operands are cast from bf16 through
HBM (kernels.py), and below ZeRO-3 an FP8 copy of each layer weight sits beside the bf16 one
(or replaces it, where the engine keeps its weights in FP8).
Attention's softmax and batched matmuls stay in bf16 (Megatron-Core's
`fp8_dot_product_attention` defaults to False: NVIDIA/Megatron-LM@d98e8a6
megatron/core/transformer/transformer_config.py l.640), and so does the output head
(Megatron-Core builds it as its own `tensor_parallel.ColumnParallelLinear`, not a Transformer
Engine module, unless an MXFP8 output projection is asked for: megatron/core/models/gpt/
gpt_model.py l.271-275). MFU stays against the bf16 dense peak, as Megatron-LM and
torchtitan report it; the figure against the FP8 peak is reported beside it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.transformer import TransformerSpec
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard.recompute_modules import module_drop

Number = Any
FP8 = "fp8"


def is_fp8(job: TrainingJob) -> bool:
    return job.training.precision == FP8


def fp8_peak_flop_s(job: TrainingJob) -> float:
    """The GPU's dense FP8 peak; a GPU without one cannot train in FP8, and says so."""
    gpu = job.cluster.gpu
    if gpu.fp8_peak_flop_s is None:
        raise InvalidSpec(
            f"precision fp8 needs the GPU's dense FP8 peak, and {gpu.name} has none "
            "(no FP8 tensor cores, or no figure in its preset): train in bf16, or give "
            "cluster.gpu.fp8_peak_tflops",
            "training.precision",
        )
    return gpu.fp8_peak_flop_s


def layer_gemm_peak_flop_s(job: TrainingJob) -> float:
    """The peak the transformer layers' GEMMs run against: FP8's under fp8, else bf16's."""
    return fp8_peak_flop_s(job) if is_fp8(job) else job.cluster.gpu.peak_flop_s


def fp8_ceiling_ratio(job: TrainingJob) -> float:
    """An FP8 GEMM's measured ceiling (share of the FP8 peak) over a bf16 GEMM's (share of
    the bf16 peak), both from the same shape search; 1 where either is missing, i.e. FP8
    GEMMs reach the bf16 share (a judgement)."""
    gpu = job.cluster.gpu
    if gpu.fp8_matmul_efficiency is None or gpu.matmul_efficiency is None:
        return 1.0
    return gpu.fp8_matmul_efficiency / gpu.matmul_efficiency


def fp8_weight_copy_bytes_per_param(job: TrainingJob, a: CostAssumptions, zero: Number) -> Number:
    """Bytes per transformer-layer parameter the FP8 weights add to the bf16 ones: the FP8
    cast (and its transpose where the GPU's FP8 GEMMs are TN-only) beside each bf16 weight,
    or, with `fp8_params`, in its place (then the net is the cast less the bf16 weight's 2
    bytes: -1 on Blackwell, 0 on Hopper), from ZeRO-1 on: Megatron-LM takes --fp8-param-gather
    only with the distributed optimizer (NVIDIA/Megatron-LM@d98e8a6 megatron/training/
    arguments.py l.1095-1097). Nothing at ZeRO-3 or outside fp8."""
    if not is_fp8(job):
        return 0.0
    cast = a.fp8_weight_copy_bytes_per_param
    if cast is None:
        cast = 2.0 if job.cluster.gpu.fp8_gemm_tn_only else 1.0
    zero = np.asarray(zero)
    net = np.where(a.fp8_params & (zero >= 1), cast - mem.BF16_BYTES, cast)
    return np.where(zero >= 3, 0.0, net)


def mfu_against_fp8_peak(job: TrainingJob, mfu_bf16_peak: float) -> float | None:
    """The same model FLOPs over the FP8 dense peak instead of the bf16 one (fp8 only)."""
    if not is_fp8(job):
        return None
    return mfu_bf16_peak * job.cluster.gpu.peak_flop_s / fp8_peak_flop_s(job)


def fp8_saved_input_bytes_per_token(
    job: TrainingJob, a: CostAssumptions, recompute: Number
) -> Number:
    """Bytes per token and layer that FP8 takes off `mem.layer_activation_bytes_per_token`:
    Transformer Engine saves a GEMM's input for its weight gradient as the FP8 cast it made
    (1 byte a value), not in bf16 (NVIDIA/TransformerEngine@0004dbd0
    transformer_engine/pytorch/module/linear.py, _Linear.forward: saved_inputmat = the FP8
    inputmat when fp8; layernorm_linear.py saves its ln_out quantized the same way). The
    norm outputs feeding QKV and the MLP (2 x h) and the MLP-down input (f, each expert
    copy's f_e) halve; the attention output stays in bf16 for FlashAttention's backward and
    gains an FP8 copy for the output projection (+q). Selective recompute drops the norm and
    activation outputs anyway (only the copy remains); full recompute keeps the layer input
    alone (nothing changes). Under Megatron-Core's module list, selective halves what the
    modules leave saved: the norm outputs a GEMM still reads and the activation outputs.
    Zero unless the job trains in FP8 with `fp8_saved_inputs`."""
    if not is_fp8(job) or not a.fp8_saved_inputs:
        return 0.0
    model, modules = job.model, a.selective_recompute_modules
    none = _fp8_halved_bytes_per_token(model, ())  # no module recomputed: all stay saved
    selective = -model.q_width if modules is None else _fp8_halved_bytes_per_token(model, modules)
    return np.where(
        recompute == mem.RECOMPUTE_NONE,
        none,
        np.where(recompute == mem.RECOMPUTE_SELECTIVE, selective, 0.0),
    )


def _fp8_halved_bytes_per_token(model: TransformerSpec, modules: Collection[str]) -> float:
    """What FP8 takes off a layer's saved inputs while `modules` are recomputed: a byte a
    value of the norm outputs GEMMs still read and of the activation outputs, less the
    attention output's FP8 copy."""
    kept = module_drop(model, modules)
    halved = kept.kept_norm_outputs_feeding_gemms * model.hidden_size + kept.kept_activation_width
    return halved - model.q_width
