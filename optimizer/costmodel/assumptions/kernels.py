"""Assumptions about the kernels: how much of peak the matmuls, attention and HBM reach."""

from __future__ import annotations

from pydantic import BaseModel, Field

from models.strict import SPEC_CONFIG, JsonInt

from .fields import MIN_EFFICIENCY, AccumulationBytes, per_zero_stage_field


class KernelAssumptions(BaseModel):
    """The kernels: how much of peak the matmuls and attention reach."""

    model_config = SPEC_CONFIG

    kernel_efficiency: float | None = Field(
        None,
        ge=MIN_EFFICIENCY,
        le=1,
        description=(
            "Fraction of peak FLOP/s that the matmul kernels reach with no communication or "
            "bubble. Default: the workshop plate's 0.6 for H100 (profile workshop everywhere); "
            "profile standard carries it to other GPUs by their measured matmul ceiling "
            "(GpuSpec.matmul_efficiency relative to H100's: 0.6 x 0.869 / 0.803 on A100)."
        ),
    )
    attention_kernel_efficiency: float | None = Field(
        None,
        ge=MIN_EFFICIENCY,
        le=1,
        description=(
            "Fraction of peak that fused attention reaches over forward and backward (profile "
            "standard); default: the GPU preset's attention_efficiency (FlashAttention papers), "
            "else 0.35."
        ),
    )
    # What calibration writes (optimizer.calibration): a fitted efficiency as its ratio to the
    # default the runs were priced with, which multiplies whatever default a request prices
    # (the attention kernel its engine's settings choose, say); a calibration's applies only
    # within its reach (optimizer/calibration/reach.py).
    kernel_efficiency_scale: float = Field(
        1.0,
        gt=0,
        le=10,
        description=(
            "Multiplies the matmul kernel efficiency the request otherwise prices "
            "(kernel_efficiency, or the GPU's default), capped at 1: the form a calibration "
            "writes a fitted kernel efficiency in, as its ratio to the runs' GPU's default; a "
            "calibration's applies only to requests within its reach (calibrated_on)."
        ),
    )
    attention_kernel_efficiency_scale: float = Field(
        1.0,
        gt=0,
        le=10,
        description=(
            "Multiplies the fused attention efficiency the request otherwise prices "
            "(attention_kernel_efficiency, or the GPU's), capped at 1: how a calibration "
            "writes a fitted attention efficiency, as kernel_efficiency_scale."
        ),
    )

    def matmul_efficiency_or(self, default: float) -> float:
        """The matmul kernels' efficiency: the request's, else the profile's `default` for
        this GPU; times kernel_efficiency_scale, at most 1."""
        asked = default if self.kernel_efficiency is None else self.kernel_efficiency
        return min(asked * self.kernel_efficiency_scale, 1.0)

    def attention_efficiency_or(self, default: float) -> float:
        """Fused attention's efficiency, as matmul_efficiency_or."""
        asked = (
            default
            if self.attention_kernel_efficiency is None
            else self.attention_kernel_efficiency
        )
        return min(asked * self.attention_kernel_efficiency_scale, 1.0)

    cudnn_fused_attention: bool = Field(
        False,
        description=(
            "Fused attention runs cuDNN's kernel (Transformer Engine's FusedAttention) rather "
            "than FlashAttention-2, whose figure the GPU presets' attention_efficiency is: on "
            "Hopper (sm_90) profile standard prices it at cuDNN's measured rate over "
            "FlashAttention-2's on the same GPU (docs/cost-model.md, 'Attention kernels'); "
            "elsewhere, and where attention_kernel_efficiency is stated, it changes nothing. "
            "Engines that run Transformer Engine 1.2 or later set it (its default backend on "
            "Hopper), unless their attention backend says flash."
        ),
    )
    fused_attention: bool = Field(
        True,
        description=(
            "FlashAttention-style fused attention. False prices the unfused path of 2021-22 "
            "Megatron-LM: the s x s scores are stored (Korthikanti et al. 2022 eq. 2's 5as/h "
            "term) and streamed through HBM, and the masked half is computed too."
        ),
    )
    unfused_attention_bytes_per_score: float = Field(
        30.0,
        ge=0,
        le=1_000,
        description=(
            "HBM bytes per attention score of the unfused path over forward and backward: "
            "QK^T out, scale-mask-softmax in and out, dropout in, out and mask, AV in (13), and "
            "their gradients (17). Our count."
        ),
    )
    causal_attention_work_fraction: float = Field(
        0.5,
        gt=0,
        le=1,
        description=(
            "Share of the full s x s attention a causal kernel computes (FlashAttention skips the "
            "masked half); model FLOPs still count it in full, as PaLM and Megatron-LM do."
        ),
    )
    gemm_reduction_overhead_elements: float = Field(
        0.0,
        ge=0,
        le=1_000_000,
        description=(
            "A what-if (profile standard), off at 0: a GEMM tile's fixed cost (pipeline fill, "
            "epilogue) in bf16 elements of its reduction loop (FP8 stages hold twice the "
            "elements, so twice it); each pass of each GEMM then runs at depth / (depth + "
            "this) of a deep one, relative to the plate's Llama 3 405B at tp 8, where "
            "kernel_efficiency is set. 275 is half the 550 FP8 elements that fit DeepGEMM's "
            "published H800 GEMMs at M 4,096 (deepseek-ai/DeepGEMM@327ec92 README.md "
            "l.38-59). Off by default: at 275 it moved validation's mean from 5.50 to 5.37 "
            "points but took a point more off the 530B-1T rows it already under-predicts "
            "(their 2,048-token weight gradients count as short), so it does not explain "
            "the error's trend with model size (docs/cost-model.md, 'Kernels')."
        ),
    )
    gemm_shape_throughput: bool = Field(
        True,
        description=(
            "Price each GEMM pass (forward, input and weight gradient; an MoE rank's local "
            "experts as one grouped call) at its shape's measured throughput, relative to the "
            "plate's Llama 3 405B at tp 8 on 8,192 tokens where kernel_efficiency is set "
            "(profile standard, GPUs whose preset names a gemm_table: XLA's measured bf16 "
            "table for H100 and B200, models/presets/gemm_throughput.json). Off: one "
            "efficiency for every shape."
        ),
    )
    attention_length_throughput: bool = Field(
        True,
        description=(
            "Price fused attention at its measured throughput for the keys its queries attend "
            "(the sequence, a window, a chunk), relative to a 16,384-token causal sequence, "
            "where the GPU's attention efficiency is taken to hold (profile standard, GPUs "
            "whose preset names a gemm_table, the architecture measured: cuDNN's training "
            "SDPA benchmark on H200 and GB200, optimizer/costmodel/standard/"
            "attention_table.py). Off: one efficiency for every length."
        ),
    )
    gemm_wave_quantization: bool = Field(
        False,
        description=(
            "Charge each GEMM its wave quantisation on the GPU's SMs (profile standard) for one "
            "fixed tile (gemm_tile_rows x gemm_tile_cols). Off by default: cuBLAS picks among "
            "tiles (and split-K) per shape, so one fixed tile overstates the loss (it took "
            "10 points off Megatron-LM's 7.5B row on A100); a what-if for a fixed kernel."
        ),
    )
    gemm_tile_rows: JsonInt = Field(
        128,
        ge=1,
        le=4096,
        description=(
            "Rows of the output tile a GEMM kernel computes per SM pass, for wave quantisation "
            "(profile standard): cuBLAS's large bf16 tiles are 128 x 256 or 256 x 128 (NVIDIA, "
            "Matrix Multiplication Background User's Guide, section 2.3)."
        ),
    )
    gemm_tile_cols: JsonInt = Field(
        256, ge=1, le=4096, description="Columns of that tile (see gemm_tile_rows)."
    )
    elementwise_traffic: bool = Field(
        True,
        description=(
            "Charge the memory-bound elementwise kernels (norms, residual adds, rotary, the MLP "
            "activation) their HBM time beside the GEMMs (profile standard; needs the GPU's "
            "memory_bandwidth_gb_s)."
        ),
    )
    eager_norms: bool = Field(
        False,
        description=(
            "RMSNorm runs as eager fp32 PyTorch ops (x.float(), pow, mean, rsqrt, mul, "
            "type_as, weight mul), 128 bytes an element forward and backward against a fused "
            "kernel's 20 (docs/cost-model.md, 'Eager kernels'): torchtitan's norm_type "
            "'rmsnorm' without torch.compile (pytorch/torchtitan@9dec370 torchtitan/models/"
            "norms.py l.77-101). Part of the elementwise term."
        ),
    )
    eager_pointwise: bool = Field(
        False,
        description=(
            "Rotary embeddings and the SwiGLU activation run as separate eager PyTorch ops, "
            "and the attention output is copied to the projection's layout: a model written "
            "in plain PyTorch without torch.compile (torchtitan's apply_rotary_emb through "
            "fp32 complex numbers and F.silu(w1(x)) * w3(x), pytorch/torchtitan@9dec370 "
            "torchtitan/models/llama/model.py l.87-113, 209-213, 253). Part of the "
            "elementwise term."
        ),
    )
    gqa_kv_copies: bool = Field(
        False,
        description=(
            "Grouped-query attention copies K and V to the query heads' width before "
            "attention (torchtitan's repeat_kv, pytorch/torchtitan@9dec370 torchtitan/models/"
            "llama/model.py l.116-125, 201-202), and sums their gradients back; false where "
            "the attention kernel reads the shared heads itself (SDPA's enable_gqa, flash "
            "attention, Transformer Engine). Part of the elementwise term."
        ),
    )
    fused_glu_clamp: bool = Field(
        False,
        description=(
            "A model's GLU clamp (glu_clamp: GPT-OSS's swiglu_limit) runs inside the "
            "activation kernel, as Transformer Engine's fused clamped GeGLU does where "
            "Megatron-Bridge's MXFP8 recipes turn it on. False (the default): as Megatron-"
            "Core's bf16 path runs it (megatron/core/fusions/fused_bias_geglu.py, "
            "weighted_bias_quick_geglu_impl with clamp_value: chunk, a clamp of each half, "
            "torch.cat, then the fused activation) and Hugging Face's GptOssExperts, eager "
            "ops whose bytes the elementwise term charges (kernels.EAGER_GLU_CLAMP_BYTES)."
        ),
    )
    moe_host_ms_per_layer: float = Field(
        0.0,
        ge=0,
        le=1_000,
        description=(
            "Milliseconds an MoE layer leaves the GPU waiting on the host, per micro-batch, "
            "forward and backward together, when the layer runs eagerly: Megatron-Core's "
            "alltoall dispatcher waits on the host for each layer's token counts "
            "(NVIDIA/Megatron-LM@d98e8a6 megatron/core/transformer/moe/token_dispatcher.py "
            "l.921-957), after which the GPU runs only as fast as Python launches kernels. "
            "0 (the default) prices layers whose launches CUDA graphs replay, as NVIDIA's "
            "tuned MoE recipes capture them. Measured by Megatron-Bridge as the time TE-scoped "
            "graphs of attention, router and dispatch preprocessing remove (NVIDIA-NeMo/"
            "Megatron-Bridge@247a7ab docs/training/cuda-graphs.md, H100): GPT-OSS-20B at tp 2, "
            "pp 4, 2 micro-batches, 467-520 ms to 391-399 ms a step over (2 + 4 - 1) slots of 6 "
            "layers, 2.3-4.3 ms a layer (3.3 at the middle); Qwen3-30B-A3B at tp 2, pp 2, 623 "
            "to 484 ms over 3 slots of 24 layers, 1.9 ms. Charged in full, as if nothing the "
            "GPU runs hid it: an upper bound where a micro-batch's kernels are long."
        ),
    )
    optimizer_step_bytes_per_param: float = Field(
        38.0,
        ge=0,
        le=1_000,
        description=(
            "HBM bytes the optimiser step moves per parameter of the rank's optimiser shard, "
            "after the backward and before the next forward, charged at HBM bandwidth (profile "
            "standard; 0 charges nothing). Default: Megatron-Core's distributed optimizer with "
            "Transformer Engine's or Apex's FusedAdam: the gradient norm reads each fp32 "
            "gradient (4; multi_tensor_l2norm), FusedAdam reads gradient, master, both moments "
            "and writes master and moments (28), and the master is copied to the bf16 weight "
            "(6) (NVIDIA/Megatron-LM@d98e8a6 megatron/core/optimizer/optimizer.py l.816-840, "
            "clip_grads.py, distrib_optimizer.py l.2802-2850). The clip's rescale (8 more) "
            "runs only when the norm exceeds clip_grad, so it is not counted. A gradient "
            "buffer kept in bf16 is cast to fp32 first (read 2, write 4: distrib_optimizer.py "
            "l.2792), added from gradient_bytes_per_param."
        ),
    )
    gradient_buffer_zeroed: bool = Field(
        True,
        description=(
            "Each step zeroes the rank's gradient buffer, writing its gradient bytes once "
            "(Megatron-Core's contiguous buffer: param_and_grad_buffer.py grad_data.zero_(), "
            "NVIDIA/Megatron-LM@d98e8a6 megatron/core/distributed/param_and_grad_buffer.py "
            "l.1617-1623), part of the optimiser step's time. False where the gradients are "
            "freed instead (torch's zero_grad(set_to_none=True), FSDP2's sharded gradients)."
        ),
    )
    gradient_accumulation_bytes_per_param: float = Field(
        0.0,
        ge=0,
        le=64,
        description=(
            "HBM bytes each micro-batch's backward moves per parameter of the rank's layers to "
            "accumulate its gradient outside the weight-gradient GEMMs, charged at HBM "
            "bandwidth as the layer's elementwise work (profile standard). Default 0: the "
            "GEMMs accumulate into the gradient buffer themselves (Megatron's "
            "gradient_accumulation_fusion writes main_grad). DeepSpeed's BF16_Optimizer under "
            "pipeline parallelism casts each micro-batch's bf16 gradient to fp32 (read 2, "
            "write 4) and adds it into the fp32 buffer (read 4 + 4, write 4): 18 "
            "(deepspeedai/DeepSpeed@56c5223 deepspeed/runtime/pipe/engine.py l.746-761, "
            "bf16_optimizer.py l.383-397)."
        ),
    )
    pipelined_gradient_accumulation_bytes_per_param: list[AccumulationBytes] = per_zero_stage_field(
        [0.0, 0.0, 0.0],
        (
            "Per ZeRO stage 0, 1, 2: HBM bytes per parameter each micro-batch's backward adds to "
            "gradient_accumulation_bytes_per_param where pp > 1 (profile standard), where an "
            "engine's pipeline engine picks an optimiser that accumulates outside the GEMMs. "
            "DeepSpeed in bf16 runs its BF16_Optimizer with pp and ZeRO-0, whose cast to fp32 "
            "and add into the fp32 buffer move 18 (deepspeed 0.19.8 deepspeed/runtime/"
            "engine.py l.2313-2320, pipe/engine.py l.859-862, bf16_optimizer.py l.508-523): "
            "the deepspeed engine sets [18, 0, 0] in bf16."
        ),
    )
    fp8_cast_bytes_per_value: float = Field(
        4.0,
        ge=0,
        le=64,
        description=(
            "Under training.precision fp8, HBM bytes per value of each GEMM operand cast from "
            "bf16 (a layer's inputs forward, its output gradients backward): read 2, write the "
            "FP8 copy and its transpose, 1 each (Hopper's FP8 GEMMs take one layout, so "
            "Transformer Engine casts and transposes in one kernel), with the amax taken in the "
            "same pass as delayed scaling does; part of the elementwise traffic. Current "
            "scaling's separate amax pass would read 2 more (UNVERIFIED whether it is fused)."
        ),
    )
