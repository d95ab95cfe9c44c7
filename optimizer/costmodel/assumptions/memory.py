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
            "l.217-302; Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh). From ZeRO-1 "
            "on: Megatron-LM takes the flag only with the distributed optimizer. The "
            "optimiser's fp32 master is unchanged."
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
    cuda_context_gb: float = Field(
        1.65,
        ge=0,
        le=100,
        description=(
            "Device memory each process holds outside PyTorch's allocator for its CUDA context "
            "and the kernels loaded into it, in GB: 1,573 MiB on an A100 as nvidia-smi showed "
            "it after torch.ones(1).cuda() (BigScience, bigscience-workshop/bigscience "
            "train/tr11-176B-ml/chronicles-prequel.md l.144; 1,271 MiB on a V100 l.86; "
            "Hugging Face's model_memory_anatomy.md measured 1,343 MiB on a V100 the same way). "
            "CUDA's lazy module loading (the default from CUDA 12.2) loads fewer kernels: "
            "the figure is then an upper bound."
        ),
    )
    nccl_buffers_gb_per_group: float = Field(
        0.308,
        ge=0,
        le=100,
        description=(
            "NCCL's buffers per communicator a rank runs collectives in (each parallel "
            "dimension of degree above 1: tp, cp, dp x cp, pp, ep), in GB: its three "
            "protocols' FIFOs per channel and receiving connection, Simple 4 MiB "
            "(DEFAULT_BUFFSIZE), LL128 120 x 640 x 8 steps x 8 B and LL 8 x 512 x 8 steps x "
            "16 B (NVIDIA/nccl src/init.cc DEFAULT_*_BUFFSIZE over NVIDIA/nccl@0524aef "
            "src/include/device.h's NCCL_STEPS, NCCL_LL128_* and NCCL_LL_*), 9.63 MB; "
            "times 16 channels (an H100 cluster's rings, NVIDIA/nccl#1453's log 'Channel "
            "00/16') and 2 receiving connections a channel, since 'memory usage is linearly "
            "tied to the number of channels' and a ring 'only has 2 connections regardless "
            "of the scale' (NVIDIA/nccl#986, quoting #864)."
        ),
    )
    nccl_all_to_all_gb: float = Field(
        3.28,
        ge=0,
        le=100,
        description=(
            "NCCL's point-to-point buffers an all-to-all connects on each rank of an "
            "expert-parallel group (ep > 1), in GB: 8 H100 in one node went from 1.06 to 4.34 "
            "GB of memory outside PyTorch at their first all_to_all_single, NCCL connecting "
            "32 channels to each peer (NVIDIA/nccl#1685). Dispatchers with buffers of their "
            "own (DeepEP, HybridEP) hold those instead."
        ),
    )
    allocator_fragmentation: float = Field(
        0.0,
        ge=0,
        le=1,
        description=(
            "What PyTorch's caching allocator reserves beyond the tensors it holds, as a "
            "share of them. 0 assumes expandable segments "
            "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), which Megatron-Bridge "
            "recommends first, at no throughput cost, and most of its Slurm templates set; "
            "without it a Llama 3 70B layout whose peak was 58.8 GB ran out of 80 GB from "
            "fragmentation alone (NVIDIA-NeMo/Megatron-Bridge@067f987 skills/"
            "nemo-mbridge-perf-memory-tuning/SKILL.md, 'Measured Results'), which takes a "
            "share above 0.4 on an H100 (82.4 GB left beside its context and buffers)."
        ),
    )
    logits_bytes_per_value: float = Field(
        4.0,
        ge=0,
        le=16,
        description="Bytes per vocabulary logit kept for the loss on the last stage (fp32).",
    )
