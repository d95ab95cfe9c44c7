"""Named assumptions of the cost model: every figure that is a judgement, not a spec, lives here.

`workshop` reads only `kernel_efficiency`. `standard` reads all of them; docs/cost-model.md
gives the derivation and the source of each default. Defaults marked "judgement" are ours,
stated so that a user can change them, not figures from a paper.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from models.strict import SPEC_CONFIG, JsonInt

# The workshop plate's kernel efficiency, measured against H100 (whose matmul ceiling, the
# maximum achievable matmul FLOP/s, is 80.3% of peak: stas00/ml-engineering@744d01e
# compute/accelerator/README.md l.342-379).
PLATE_KERNEL_EFFICIENCY = 0.6
PLATE_GPU_MATMUL_EFFICIENCY = 0.803

# An efficiency below 1% is a typo, not a cluster: refusing it keeps every figure finite.
MIN_EFFICIENCY = 0.01


def _fraction(default: float, description: str) -> float:
    return Field(default, ge=0, le=1, description=description)


# Volumes of a stage's parameters a data-parallel sync sends (docs/cost-model.md, "Engines").
Volumes = Annotated[float, Field(ge=0, le=100)]


def _latency_s(default: float, description: str) -> float:
    return Field(default, ge=0, le=1e-3, description=description)


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


class CommunicationAssumptions(BaseModel):
    """The collectives: bandwidth reached, latency, and what hides under compute."""

    model_config = SPEC_CONFIG

    inter_node_bandwidth_efficiency: float = Field(
        0.74,
        ge=MIN_EFFICIENCY,
        le=1,
        description=(
            "Share of the NIC line rate a large collective reaches across nodes: 36.95 of "
            "50 GB/s per GPU for a 16 GiB all-reduce over 4 x 8 B200 on 8 x 400 Gb/s "
            "(stas00/ml-engineering@744d01e network/README.md l.1400-1423); smaller messages "
            "reach less (collective_message_size)."
        ),
    )
    collective_message_size: bool = Field(
        False,
        description=(
            "Charge each collective the share of the large-message bus bandwidth its message "
            "size reaches, inside the NVLink domain and across the network, from published "
            "nccl-tests curves (profile standard; docs/cost-model.md, 'collectives'). Off by "
            "default: the curves time one synchronised call at a time, and on they take the "
            "published runs' mean error from 2.3 to 3.4 points (docs/validation.md), so they "
            "overstate what back-to-back collectives in a training step lose; a what-if."
        ),
    )
    network_rails_per_domain: bool = Field(
        True,
        description=(
            "A group with k ranks in each NVLink domain reaches k NICs' bandwidth across the "
            "network (NCCL spreads a ring's channels over the GPUs' own NICs, one rail each), "
            "up to NVLink's: a tp 1 data-parallel group uses all 8 NICs of a node, a tp 8 one "
            "its rank's one (docs/cost-model.md, 'Links'). False: one NIC's share always."
        ),
    )
    dp_bucket_params: float = Field(
        40e6,
        ge=1,
        le=1e13,
        description=(
            "Parameters per gradient bucket, the message size of the data-parallel sync: "
            "Megatron-Core's default max(40M, 1M x dp) (megatron/core/distributed/"
            "distributed_data_parallel.py l.134 @d98e8a6)."
        ),
    )
    gradient_volumes_per_step: list[Volumes] = Field(
        [2.0, 2.0, 2.0],
        min_length=3,
        max_length=3,
        description=(
            "Per ZeRO stage 0, 1, 2: the data-parallel traffic made once a step, in volumes of "
            "the stage's parameters in bf16 sent around the data group's ring ((g-1)/g x 2 B a "
            "parameter each). 2 = an all-reduce in bf16, or a reduce-scatter plus the updated "
            "parameters' all-gather (the engine-agnostic default); an engine reducing in fp32 "
            "counts its gradient passes twice. Set per engine (docs/cost-model.md, 'Engines')."
        ),
    )
    gradient_volumes_per_micro_batch: list[Volumes] = Field(
        [0.0, 0.0, 0.0],
        min_length=3,
        max_length=3,
        description=(
            "Per ZeRO stage 0, 1, 2: the data-parallel traffic made every micro-batch, in the "
            "same volumes: engines that keep gradients sharded across gradient accumulation "
            "reduce them each backward (DeepSpeed ZeRO-2, FSDP's gradient sharding). Exposed "
            "beyond zero3_overlap_fraction of the micro-batch's compute, as ZeRO-3's gathers."
        ),
    )
    per_micro_batch_sync_with_pp: bool = Field(
        True,
        description=(
            "Whether the per-micro-batch traffic stays per micro-batch with pp > 1; false "
            "where the engine's pipeline schedule defers the gradient sync to once a step "
            "(torch.distributed.pipelining, torchtitan)."
        ),
    )
    tp_overlap_fraction: float = _fraction(
        0.0, "Share of tensor-parallel collectives hidden under matmuls (Megatron default: none)."
    )
    cp_exchange: Literal["all_gather", "p2p"] = Field(
        "all_gather",
        description=(
            "How the context-parallel group exchanges K and V: 'all_gather' (Llama 3's, an "
            "NCCL collective: a group with k ranks in each NVLink domain uses their k NICs) or "
            "'p2p' (ring attention, Megatron-Core's default: each step sends one chunk to the "
            "next rank, so a step across domains runs at one NIC's pace). Same bytes either way."
        ),
    )
    cp_overlap_fraction: float = _fraction(
        0.0,
        "Share of the attention compute under which the context-parallel K/V exchange hides. "
        "Default 0: Llama 3 (arXiv 2407.21783, section 3.3.2) all-gathers K and V before "
        "attention and states the all-gather is exposed in the critical path; ring attention "
        "(Megatron-LM / Transformer Engine) overlaps each step and may set up to 1.",
    )
    collective_base_latency_s: float = _latency_s(
        8.4e-6,
        "Fixed latency of one NCCL collective (ring algorithm, Simple protocol: baseLat "
        "8.4 us in NCCL's src/graph/tuning.cc), paid once per collective.",
    )
    nvlink_step_latency_s: float = _latency_s(
        3.4e-6,
        "Latency of one ring step over NVLink (NCCL src/graph/tuning.cc, hwLat NVLink, "
        "ring, Simple: 3.4 us); a ring collective over g ranks takes g-1 steps.",
    )
    network_step_latency_s: float = _latency_s(
        14.0e-6,
        "Latency of one ring step across the network (NVIDIA/nccl@5067397 "
        "src/graph/tuning.cc l.171, hwLat NET, ring, Simple: 14.0 us since NCCL 2.18.1); as "
        "NCCL's tuner does, only the steps between NVLink domains are charged at it, the "
        "others at nvlink_step_latency_s.",
    )
    dp_overlap_microbatches: float = Field(
        1.0,
        ge=0,
        le=1_000,
        description=(
            "Micro-batch steps of the busiest stage under which the per-step gradient reduce and "
            "parameter gather hide (Megatron-LM --overlap-grad-reduce/--overlap-param-gather "
            "overlap them with the last backward and the first forward)."
        ),
    )
    zero3_overlap_fraction: float = _fraction(
        0.5,
        "Share of a micro-batch's compute under which ZeRO-3's per-micro-batch parameter "
        "all-gathers and gradient reduce-scatter (and an engine's per-micro-batch gradient "
        "sync at ZeRO 0-2) can hide (prefetch, bucketing during backward). A judgement: it "
        "was fitted to SC21 Table 2's ZeRO-3 rows, which are now priced at 0 as the 2021 "
        "DeepSpeed code ran them (a blocking fetch that synchronises the device, "
        "docs/cost-model.md 'ZeRO-3 / FSDP'); no current engine's figure has been measured.",
    )
    zero3_gather_unit: Literal["layer", "module"] = Field(
        "layer",
        description=(
            "What one ZeRO-3 all-gather (and gradient reduce-scatter) covers, which sets how "
            "many collectives pay their latency: 'layer', one per transformer layer (FSDP "
            "wrapping each block, as torchtitan and Megatron-FSDP do), or 'module', one per "
            "parameterised submodule (DeepSpeed's ZeRO-3 fetches module by module: the two "
            "norms, the four attention projections and each MLP matrix)."
        ),
    )
    pp_p2p_overlap_fraction: float = _fraction(
        0.0, "Share of pipeline point-to-point sends hidden under compute (conservative: none)."
    )
    moe_dispatch_dedup: bool = Field(
        False,
        description=(
            "The expert dispatch sends a token once to each remote NVLink domain holding its "
            "experts and forwards it there over NVLink (DeepEP, HybridEP: Megatron-Core's flex "
            "dispatcher), instead of one copy per expert: the network carries the expected "
            "distinct remote domains of a balanced routing (docs/cost-model.md, 'Experts')."
        ),
    )
    moe_all_to_all_overlap_fraction: float = _fraction(
        0.0,
        "Share of the expert all-to-all hidden under compute with 1F1B schedules; DualPipe's "
        "overlap is dualpipe_all_to_all_overlap_fraction.",
    )
    dualpipe_all_to_all_overlap_fraction: float = _fraction(
        0.9,
        "Share of the expert all-to-all DualPipe hides by pairing forward and backward chunks "
        "(DeepSeek-V3 report, section 3.2.1, claims near-full overlap). Judgement.",
    )


class ScheduleAssumptions(BaseModel):
    """Recomputation and pipeline schedules: their time beyond the plain step."""

    model_config = SPEC_CONFIG

    selective_recompute_time_overhead: float = Field(
        0.02,
        ge=0,
        le=1,
        description=(
            "Extra layer time of selective recompute (Korthikanti et al. 2022, Fig. 8: 2% for "
            "the 530B and 1T models, 4% for 22B)."
        ),
    )
    selective_recompute_matmuls: Literal["none", "every_second"] = Field(
        "none",
        description=(
            "Which matmuls selective recompute replays. 'none': Korthikanti et al. 2022's "
            "selective recompute (Megatron-LM, NeMo, DeepSpeed) replays the attention core "
            "and elementwise work only. 'every_second': op-level selective checkpointing "
            "(torchtitan's activation_checkpoint:selective) saves every op's output but every "
            "second matmul of a layer's forward, so that matmul's forward runs again in the "
            "backward (docs/cost-model.md, 'Engines'); set by the torchtitan engine."
        ),
    )
    zero_bubble_weight_grad_fraction: float = _fraction(
        1 / 3,
        "The weight-gradient pass W as a share of a micro-batch's F+B+W time (Qi et al. 2024 "
        "take T_F = T_B = T_W).",
    )


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
    gradient_bytes_per_param: float = Field(
        4.0,
        gt=0,
        le=16,
        description="Gradient accumulation buffer (fp32 main grads in Megatron-LM and Llama 3).",
    )
    optimizer_bytes_per_param: float = Field(
        12.0, gt=0, le=64, description="fp32 master weights plus Adam's two fp32 moments."
    )
    fp8_weight_copy_bytes_per_param: float = Field(
        2.0,
        ge=0,
        le=16,
        description=(
            "Under training.precision fp8, bytes per transformer-layer weight kept beside the "
            "bf16 weights below ZeRO-3: the FP8 copy and its transpose, cast on the first "
            "micro-batch and reused by the others (Megatron-LM passes Transformer Engine "
            "is_first_microbatch unless disable_parameter_transpose_cache: NVIDIA/Megatron-LM"
            "@d98e8a6 megatron/core/extensions/transformer_engine.py l.1336-1345; that TE "
            "keeps both for the step is UNVERIFIED, its source was not read). 0 where the "
            "engine keeps the weights in FP8 instead of bf16 (--fp8-param-gather, which "
            "Megatron-Bridge's FP8 recipes set). ZeRO-3 gathers and casts each layer's "
            "weights where they are used, so keeps no copy."
        ),
    )
    logits_bytes_per_value: float = Field(
        4.0,
        ge=0,
        le=16,
        description="Bytes per vocabulary logit kept for the loss on the last stage (fp32).",
    )


class CostAssumptions(
    KernelAssumptions, CommunicationAssumptions, ScheduleAssumptions, MemoryAssumptions
):
    """Every judgement the cost model makes, one named field each (the request's flat
    `assumptions` object), grouped by what it is about."""

    model_config = SPEC_CONFIG
