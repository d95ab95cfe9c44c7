"""Assumptions about what a device keeps: sequence parallelism, bytes per parameter and logit."""

from __future__ import annotations

from pydantic import BaseModel, Field

from models.strict import SPEC_CONFIG


class MemoryAssumptions(BaseModel):
    """What a device keeps: sequence parallelism and the bytes per parameter and logit."""

    model_config = SPEC_CONFIG

    sequence_parallel: bool = Field(
        True,
        description=(
            "Megatron-LM's sequence parallelism with tensor parallelism (Korthikanti et al. "
            "2022): every stored activation is split by tp. False prices engines without it "
            "(2021 Megatron-LM, Megatron-DeepSpeed): the norms' inputs and outputs, or under "
            "full recompute the layer input, are kept whole on every tp rank (their eq. 1). "
            "Memory only; the tp traffic is the same."
        ),
    )
    fp8_saved_inputs: bool = Field(
        True,
        description=(
            "Under precision fp8, a GEMM keeps its input for the weight gradient as the FP8 "
            "cast it made, as Transformer Engine does (docs/cost-model.md, 'Precision'); false "
            "where it keeps the bf16 input, as torchao's Float8Linear does (torchtitan)."
        ),
    )
    moe_combine_saves_expert_outputs: bool = Field(
        True,
        description=(
            "Each routed expert copy's output is kept for the backward, because the combine "
            "weights it by its routing probability (2 bytes x h a copy, beside its dispatched "
            "input). False where the engine weights each copy inside the expert's activation "
            "and the combine only scatters (Megatron-Core's TEGroupedMLP, "
            "weighted_bias_swiglu_impl: NVIDIA/Megatron-LM@d98e8a6 megatron/core/transformer/"
            "moe/experts.py l.943-980, whose dispatchers unpermute without probabilities, "
            "token_dispatcher.py l.891-899 and 1460-1467)."
        ),
    )
    gradient_bytes_per_param: float = Field(
        4.0,
        gt=0,
        le=16,
        description="Gradient accumulation buffer (fp32 main grads in Megatron-LM and Llama 3).",
    )
    optimizer_bytes_per_param: float = Field(
        12.0, gt=0, le=64, description="fp32 master weights plus Adam's two fp32 moments."
    )
    zero3_fp32_shards: bool = Field(
        False,
        description=(
            "Under ZeRO-3 each rank keeps its shard of the parameters in fp32, and that shard "
            "is what the optimiser steps: 4 bytes a parameter in the weights and the fp32 "
            "master's 4 out of optimizer_bytes_per_param (PyTorch FSDP2: 'FSDP does not "
            "require any extra memory to keep a high-precision copy of the parameters for the "
            "optimizer step', MixedPrecisionPolicy, pytorch/pytorch@05f814f torch/distributed/"
            "fsdp/_fully_shard/_fsdp_api.py l.16-31). False: a bf16 shard beside an fp32 "
            "master in the optimiser state (DeepSpeed ZeRO-3)."
        ),
    )
    fp8_weight_copy_bytes_per_param: float | None = Field(
        None,
        ge=0,
        le=16,
        description=(
            "Under training.precision fp8, bytes per transformer-layer weight of its FP8 cast, "
            "which Transformer Engine keeps for the step once the first micro-batch made it "
            "(Megatron-LM passes is_first_microbatch: NVIDIA/Megatron-LM@d98e8a6 "
            "megatron/core/extensions/transformer_engine.py l.1336-1345). None: from the GPU, "
            "1 byte, and 2 where its FP8 GEMMs take only the TN layout and the transpose is "
            "kept too (Hopper): TE's own test of cached weights counts 'one byte per element' "
            "and 2 where 'modules do not deallocate FP8 transpose for weights' "
            "(NVIDIA/TransformerEngine tests/pytorch/test_cpu_offloading.py, "
            "_estimate_cached_weight_size). Beside the bf16 weight, or instead of it with "
            "fp8_params. ZeRO-3 gathers and casts each layer's weights where they are used, "
            "so keeps none."
        ),
    )
    fp8_params: bool = Field(
        False,
        description=(
            "Under training.precision fp8, the transformer layers' weights are kept only as "
            "their FP8 casts, no bf16 copy beside them (Transformer Engine's fp8_model_init: "
            "modules 'will hold only FP8 copies of its parameters'; Megatron-Core's fp8_param, "
            "--fp8-param-gather, which Megatron-Bridge's FP8 recipes set: NVIDIA-NeMo/"
            "Megatron-Bridge@067f987 src/megatron/bridge/training/mixed_precision.py "
            "l.217-302). The optimiser's fp32 master is unchanged."
        ),
    )
    loss_bytes_per_logit: float = Field(
        52.0,
        ge=0,
        le=1_000,
        description=(
            "HBM bytes the loss moves per vocabulary logit, forward and backward (profile "
            "standard; charged at HBM bandwidth beside the output head's matmul). Default: "
            "Megatron-Core's unfused vocab-parallel cross entropy, its default "
            "(cross_entropy_loss_fusion False: NVIDIA/Megatron-LM@d98e8a6 "
            "megatron/core/model_parallel_config.py l.320), one eager kernel per op: the fp32 "
            "cast 6, max 4, subtract 8, exp 8, sum 4, divide 8 forward; the gradient's "
            "multiply 8 and cast back 6 (megatron/core/tensor_parallel/cross_entropy.py)."
        ),
    )
    logits_bytes_per_value: float = Field(
        4.0,
        ge=0,
        le=16,
        description="Bytes per vocabulary logit kept for the loss on the last stage (fp32).",
    )
