"""Profile `standard`, precision: what training in FP8, MXFP8 or NVFP4 changes
(docs/cost-model.md, "Precision").

Under `training.precision` fp8, mxfp8 or nvfp4 the transformer layers' GEMMs run at the GPU's
dense peak in that format (compute.py carries the kernel efficiency to it), their operands
are quantised from bf16 through HBM (kernels.py), and below ZeRO-3 a quantised copy of each
layer weight sits beside the bf16 one (or replaces it, where the engine keeps its weights in
FP8). Transformer Engine's recipes run all three GEMMs of a linear layer (fprop, dgrad and
wgrad) in the format: Float8CurrentScaling names an MMParams for each, and
NVFP4BlockScaling quantises the forward input, the weight and the backward gradient
(fp4_quant_fwd_inp, fp4_quant_fwd_weight, fp4_quant_bwd_grad), the random Hadamard transform
and stochastic rounding applying inside those quantisations, with attention left unquantised
('Not applying quantization to attention for now': NVIDIA/TransformerEngine@000b637
transformer_engine/common/recipe/__init__.py, Float8CurrentScaling, MXFP8BlockScaling,
NVFP4BlockScaling). Megatron-Bridge's bf16_with_mxfp8_mixed and bf16_with_nvfp4_mixed keep no
layer in bf16 (first_last_layers_bf16 False); its FP8 current-scaling recipe and the
Nemotron-3 Super NVFP4 one keep some (NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/
training/mixed_precision.py), which the price does not.
Attention's softmax and batched matmuls stay in bf16 (Megatron-Core's
`fp8_dot_product_attention` defaults to False: NVIDIA/Megatron-LM@d98e8a6
megatron/core/transformer/transformer_config.py l.640), and so does the output head
(Megatron-Core builds it as its own `tensor_parallel.ColumnParallelLinear`, not a Transformer
Engine module, unless an MXFP8 output projection is asked for: megatron/core/models/gpt/
gpt_model.py l.271-275). MFU stays against the bf16 dense peak, as Megatron-LM and
torchtitan report it; the figure against the format's peak is reported beside it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.errors import InvalidSpec
from models.hardware import GpuSpec
from models.transformer import TransformerSpec
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard.recompute_modules import module_drop

Number = Any
BF16, FP8, MXFP8, NVFP4 = "bf16", "fp8", "mxfp8", "nvfp4"


@dataclass(frozen=True)
class GemmFormat:
    """How a GEMM operand is stored in one of Transformer Engine's low-precision recipes:
    bytes of one value, and one scale of `scale_bytes` for every `block_values` values
    (0 for a per-tensor scale, whose 4 bytes a tensor are left out)."""

    value_bytes: float
    block_values: int
    scale_bytes: float
    peak_field: str  # the GpuSpec field holding the format's dense peak, TFLOP/s


FORMATS = {
    # per-tensor scaling: one FP32 scale a tensor (DelayedScaling, Float8CurrentScaling)
    FP8: GemmFormat(1.0, 0, 0.0, "fp8_peak_tflops"),
    # 'each group of 32 consecutive values is scaled together ... E8M0' (MXFP8BlockScaling)
    MXFP8: GemmFormat(1.0, 32, 1.0, "mxfp8_peak_tflops"),
    # E2M1, two values a byte; 'each group of 16 consecutive values ... E4M3', plus 'a global
    # per tensor FP32 scaling factor' (NVFP4BlockScaling)
    NVFP4: GemmFormat(0.5, 16, 1.0, "nvfp4_peak_tflops"),
}


def gemm_format(precision: str) -> GemmFormat | None:
    """The format the layers' GEMMs run in under `precision`; None in bf16."""
    return FORMATS.get(precision)


def is_fp8(precision: str) -> bool:
    """Whether the layers' GEMMs run quantised (fp8, mxfp8 or nvfp4), not in bf16."""
    return gemm_format(precision) is not None


def stored_bytes_per_value(fmt: GemmFormat) -> float:
    """Bytes one quantised value takes with its share of its block's scale: FP8 1, MXFP8
    1 + 1/32 = 1.03125, NVFP4 0.5 + 1/16 = 0.5625."""
    return fmt.value_bytes + (fmt.scale_bytes / fmt.block_values if fmt.block_values else 0.0)


def format_peak_flop_s(gpu: GpuSpec, precision: str) -> float | None:
    """The GPU's dense peak in `precision`: bf16's, or the format's (None where it has none)."""
    fmt = FORMATS.get(precision)
    if fmt is None:
        return gpu.peak_flop_s
    tflops = getattr(gpu, fmt.peak_field)
    return None if tflops is None else tflops * 1e12


def fp8_peak_flop_s(gpu: GpuSpec, precision: str) -> float:
    """The GPU's dense peak in the quantised `precision`; a GPU without one cannot train in
    it, and says so (no such tensor cores, as A100 has no FP8 and Hopper no MXFP8 or NVFP4)."""
    peak = format_peak_flop_s(gpu, precision)
    if peak is None:
        field = FORMATS[precision].peak_field
        raise InvalidSpec(
            f"precision {precision} needs the GPU's dense {precision.upper()} peak, and "
            f"{gpu.name} has none (no such tensor cores, or no figure in its preset): train "
            f"in another precision, or give cluster.gpu.{field}",
            "training.precision",
        )
    return peak


def layer_gemm_peak_flop_s(gpu: GpuSpec, precision: str) -> float:
    """The peak the transformer layers' GEMMs run against: the format's, else bf16's."""
    return fp8_peak_flop_s(gpu, precision) if is_fp8(precision) else gpu.peak_flop_s


def fp8_ceiling_ratio(gpu: GpuSpec, precision: str) -> float:
    """A quantised GEMM's measured ceiling (share of its format's peak) over a bf16 GEMM's
    (share of the bf16 peak), both from the same shape search: FP8's measured ratio for fp8
    and mxfp8 (none measured MXFP8's: a judgement that the block scales, applied inside the
    MMA, cost no more of the peak); 1 for nvfp4 and where either figure is missing, i.e. the
    GEMMs reach the bf16 share (a judgement)."""
    if precision == NVFP4:
        return 1.0
    if gpu.fp8_matmul_efficiency is None or gpu.matmul_efficiency is None:
        return 1.0
    return gpu.fp8_matmul_efficiency / gpu.matmul_efficiency


def reduction_depth_factor(precision: str) -> float:
    """How many more values of the reduction a GEMM tile holds than in bf16: its bytes are
    fixed, so 2 in FP8 and MXFP8, 4 in NVFP4 (half a byte a value); 1 in bf16."""
    fmt = gemm_format(precision)
    return 1.0 if fmt is None else mem.BF16_BYTES / fmt.value_bytes


def cast_bytes_per_value(precision: str, fp8_cast_bytes_per_value: float) -> float:
    """HBM bytes per value of a GEMM operand's quantisation from bf16: the stated
    `fp8_cast_bytes_per_value` under fp8; under mxfp8 and nvfp4, read 2 and write both copies Transformer Engine makes
    from the bf16 input, rowwise and columnwise ('when Transformer Engine needs both the
    tensor and its transpose ... both versions are computed from the high precision input':
    MXFP8BlockScaling, NVFP4BlockScaling), each with its scales: MXFP8 2 + 2 x 1.03125 =
    4.0625, NVFP4 2 + 2 x 0.5625 = 3.125. The random Hadamard transform and stochastic
    rounding run inside NVFP4's quantisation kernel (no bytes of their own); its per-tensor
    scale needs the tensor's amax first, a separate read of 2 UNVERIFIED whether fused, left
    out as fp8's current scaling leaves it. 0 in bf16."""
    fmt = gemm_format(precision)
    if fmt is None:
        return 0.0
    if precision == FP8:
        return fp8_cast_bytes_per_value
    return mem.BF16_BYTES + 2 * stored_bytes_per_value(fmt)


def weight_copy_bytes_per_param(
    precision: str, fp8_gemm_tn_only: bool, stated_fp8_bytes_per_param: float | None
) -> float:
    """Bytes per layer weight of its quantised copy, kept for the step: FP8 1, or 2 where the
    GPU's FP8 GEMMs take only TN and the transpose is kept too (or the request's
    fp8_weight_copy_bytes_per_param, `stated_fp8_bytes_per_param`); MXFP8 2 x 1.03125 = 2.0625 and NVFP4 2 x 0.5625 = 1.125,
    the rowwise copy fprop reads and the columnwise one dgrad reads, each with its scales
    (NVFP4's 16 x 16 weight blocks share a scale, kept in the 1 x 16 layout: UNVERIFIED)."""
    fmt = gemm_format(precision)
    if fmt is None:
        return 0.0
    if precision == FP8:
        if stated_fp8_bytes_per_param is not None:
            return stated_fp8_bytes_per_param
        return 2.0 if fp8_gemm_tn_only else 1.0
    return 2 * stored_bytes_per_value(fmt)


def fp8_weight_copy_bytes_per_param(
    precision: str, copy_bytes_per_param: float, fp8_params: bool, zero: Number
) -> Number:
    """Bytes per transformer-layer parameter the quantised weights add to the bf16 ones: the
    copy (`copy_bytes_per_param`, weight_copy_bytes_per_param) beside each bf16 weight, or,
    with `fp8_params`, in its place from ZeRO-1 on (then the net is the copy less the bf16
    weight's 2 bytes: -1 on Blackwell, 0 on Hopper in FP8): Megatron-LM takes
    --fp8-param-gather only with the distributed optimizer (NVIDIA/Megatron-LM@d98e8a6
    megatron/training/arguments.py l.1095-1097). Which formats an engine keeps its weights
    alone in is the engine's (optimizer.engines.pricing: not NVFP4). Nothing at ZeRO-3 or in
    bf16."""
    if not is_fp8(precision):
        return 0.0
    zero = np.asarray(zero)
    net = np.where(
        fp8_params & (zero >= 1), copy_bytes_per_param - mem.BF16_BYTES, copy_bytes_per_param
    )
    return np.where(zero >= 3, 0.0, net)


def mfu_against_fp8_peak(gpu: GpuSpec, precision: str, mfu_bf16_peak: float) -> float | None:
    """The same model FLOPs over the format's dense peak instead of the bf16 one (fp8,
    mxfp8, nvfp4; None in bf16)."""
    if not is_fp8(precision):
        return None
    return mfu_bf16_peak * gpu.peak_flop_s / fp8_peak_flop_s(gpu, precision)


def fp8_saved_input_bytes_per_token(
    model: TransformerSpec,
    precision: str,
    recompute: Number,
    fp8_saved_inputs: bool,
    modules: Collection[str] | None,
) -> Number:
    """Bytes per token and layer that a quantised recipe takes off
    `mem.layer_activation_bytes_per_token`: Transformer Engine saves a GEMM's input for its
    weight gradient as the quantised copy it made (FP8 1 byte a value, MXFP8 1.03125, NVFP4
    0.5625: stored_bytes_per_value), not in bf16 (NVIDIA/TransformerEngine@0004dbd0
    transformer_engine/pytorch/module/linear.py, _Linear.forward: saved_inputmat = the FP8
    inputmat when fp8; layernorm_linear.py saves its ln_out quantized the same way). The
    norm outputs feeding QKV and the MLP (2 x h) and the MLP-down input (f, each expert
    copy's f_e) shrink to it; the attention output stays in bf16 for FlashAttention's
    backward and gains a quantised copy for the output projection (+q). Selective recompute
    drops the norm and activation outputs anyway (only the copy remains); full recompute
    keeps the layer input alone (nothing changes). Under Megatron-Core's module list,
    selective shrinks what the modules leave saved: the norm outputs a GEMM still reads and
    the activation outputs (the recomputed `modules`). Zero unless the job trains quantised
    with `fp8_saved_inputs`."""
    fmt = gemm_format(precision)
    if fmt is None or not fp8_saved_inputs:
        return 0.0
    copy = stored_bytes_per_value(fmt)
    none = _saved_bytes_per_token(model, (), copy)  # no module recomputed: all stay saved
    selective = (
        -copy * model.q_width if modules is None else _saved_bytes_per_token(model, modules, copy)
    )
    return np.where(
        recompute == mem.RECOMPUTE_NONE,
        none,
        np.where(recompute == mem.RECOMPUTE_SELECTIVE, selective, 0.0),
    )


def _saved_bytes_per_token(
    model: TransformerSpec, modules: Collection[str], copy_bytes: float
) -> float:
    """What a quantised copy of `copy_bytes` a value takes off a layer's saved inputs while
    `modules` are recomputed: bf16's 2 less the copy for each value of the norm outputs GEMMs
    still read and of the activation outputs, less the attention output's copy."""
    kept = module_drop(model, modules)
    values = kept.kept_norm_outputs_feeding_gemms * model.hidden_size + kept.kept_activation_width
    return (mem.BF16_BYTES - copy_bytes) * values - copy_bytes * model.q_width
