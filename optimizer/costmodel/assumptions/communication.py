"""Assumptions about the collectives: bandwidth reached, latency, and what hides under compute."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from models.strict import SPEC_CONFIG, JsonInt

from .fields import MIN_EFFICIENCY, Volumes, fraction_field, latency_field, per_zero_stage_field


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
    dp_bucket_grows_with_dp: bool = Field(
        True,
        description=(
            "Buckets grow with the data-parallel group, to max(dp_bucket_params, 1M x dp) "
            "(Megatron-Core's rule). False: every bucket holds dp_bucket_params, as Apex's "
            "DistributedFusedAdam (NeMo 1's distributed_fused_adam) cuts its buffer into "
            "1024 x 1024 x bucket_cap_mb / (bytes of grad_sync_dtype) elements whatever the "
            "group (NVIDIA/apex@b7a4acc1 apex/contrib/optimizers/distributed_fused_adam.py "
            "l.730-738), so a larger group pays its ring latency on as many buckets."
        ),
    )
    gradient_volumes_per_step: list[Volumes] = per_zero_stage_field(
        [2.0, 2.0, 2.0],
        (
            "Per ZeRO stage 0, 1, 2: the data-parallel traffic made once a step, in volumes of "
            "the stage's parameters in bf16 sent around the data group's ring ((g-1)/g x 2 B a "
            "parameter each). 2 = an all-reduce in bf16, or a reduce-scatter plus the updated "
            "parameters' all-gather (the engine-agnostic default); an engine reducing in fp32 "
            "counts its gradient passes twice. Set per engine (docs/cost-model.md, 'Engines')."
        ),
    )
    gradient_sync_all_reduce: list[bool] = per_zero_stage_field(
        [True, False, False],
        (
            "Per ZeRO stage 0, 1, 2: whether the once-a-step gradient sync is an all-reduce, which "
            "NCCL may run on its tree (latency logarithmic in the nodes), rather than a "
            "reduce-scatter and an all-gather, which may take PAT. Default: DDP's all-reduce "
            "without ZeRO, the distributed optimizer's reduce-scatter with it. Set per engine "
            "from its gradient sync (DeepSpeed's ZeRO-1 all-reduces once a step). A sync every "
            "micro-batch is priced as a reduce-scatter and an all-gather, all-reduce or not."
        ),
    )
    gradient_volumes_per_micro_batch: list[Volumes] = per_zero_stage_field(
        [0.0, 0.0, 0.0],
        (
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
    tp_overlap_fraction: float = fraction_field(
        0.0, "Share of tensor-parallel collectives hidden under matmuls (Megatron default: none)."
    )
    tp_overlap_sm_share: float = fraction_field(
        0.5,
        "Share of the hidden tensor-parallel collectives whose overlap moves data with SMs "
        "beside the GEMM, and so slows it by overlap_compute_slowdown of the transfer (the "
        "rest move with the copy engines). Transformer Engine's userbuffers by default "
        "(NVIDIA/TransformerEngine@d0067d0 transformer_engine/pytorch/module/base.py "
        "l.350-360, 375-389): the forward reduce-scatters after the output projection and "
        "MLP-down as 'pipeline' and the backward's reduce-scatters beside the QKV and MLP-up "
        "weight gradients as 'bulk', on 16 SMs each; the all-gathers before QKV and MLP-up and "
        "in their backward as 'ring_exchange' with copy engines (use_ce): 4 of a layer's 8 "
        "collectives, 0.5. A recipe that runs the reduce-scatters as ring exchanges too keeps "
        "only the bulk pair: 0.25.",
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
    overlap_compute_slowdown: float = fraction_field(
        0.189,
        "How much slower compute runs while an NCCL collective runs beside it on another "
        "stream, which takes SMs and memory bandwidth from it: a hidden transfer still costs "
        "this share of its time. Default: the average slowdown measured over GPT and Llama "
        "layers on A100, H100, MI250 and MI210, 18.9% (up to 40%; Lee et al., "
        "'Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep "
        "Learning', arXiv 2507.03114, abstract). Charged on the data-parallel sync, ZeRO-3's "
        "gathers, the context-parallel exchange and the expert all-to-all where they hide, "
        "and on the tensor-parallel overlaps that run on SMs (tp_overlap_sm_share); not on "
        "those that move data with the copy engines (docs/cost-model.md, 'Contention').",
    )
    cp_overlap_fraction: float = fraction_field(
        0.0,
        "Share of the attention compute under which the context-parallel K/V exchange hides. "
        "Default 0: Llama 3 (arXiv 2407.21783, section 3.3.2) all-gathers K and V before "
        "attention and states the all-gather is exposed in the critical path; ring attention "
        "(Megatron-LM / Transformer Engine) overlaps each step and may set up to 1.",
    )
    collective_base_latency_s: float = latency_field(
        8.4e-6,
        "Fixed latency of one NCCL collective (ring algorithm, Simple protocol: baseLat "
        "8.4 us in NCCL's src/graph/tuning.cc), paid once per collective.",
    )
    nvlink_step_latency_s: float = latency_field(
        3.4e-6,
        "Latency of one ring step over NVLink (NCCL src/graph/tuning.cc, hwLat NVLink, "
        "ring, Simple: 3.4 us); a ring collective over g ranks takes g-1 steps.",
    )
    network_step_latency_s: float = latency_field(
        14.0e-6,
        "Latency of one ring step across the network (NVIDIA/nccl@5067397 "
        "src/graph/tuning.cc l.171, hwLat NET, ring, Simple: 14.0 us since NCCL 2.18.1); as "
        "NCCL's tuner does, only the steps between NVLink domains are charged at it, the "
        "others at nvlink_step_latency_s.",
    )
    collective_ll128: bool = Field(
        True,
        description=(
            "Collectives may take NCCL's LL128 protocol where its tuner finds it the quicker: "
            "0.92 of the bandwidth at a fraction of the Simple protocol's step latency (4.0 "
            "us a network step, 8.5 with one rank a node, against 14.0; NVIDIA/nccl@5067397 "
            "src/graph/tuning.cc l.150-175, 328-329), on by default on DGX-class nodes "
            "(l.518-535). It wins on the small per-rank chunks of large groups: a 100 MB "
            "bucket over 512 ranks. False: the Simple protocol only (ring or PAT)."
        ),
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
    dp_sync_per_chunk: bool = Field(
        False,
        description=(
            "Under the interleaved schedule (vpp > 1) the per-step sync runs chunk by chunk, "
            "as Megatron-Core's DDP does with --overlap-grad-reduce and --overlap-param-gather: "
            "a model chunk's reduce-scatter starts when its last micro-batch's backward ends "
            "and hides under the backward of the chunks after it in the last group of pp "
            "micro-batches; its parameters' all-gather starts at the previous chunk's first "
            "forward (align_param_gather). The first chunk's gather and the last chunk's "
            "reduce-scatter, 1/vpp of the sync, find no compute to hide under "
            "(docs/cost-model.md, 'Data-parallel overlap'). Set by the megatron and nemo "
            "engines; without interleaving the sync hides under dp_overlap_microbatches slots."
        ),
    )
    param_gather_volumes_per_step: list[Volumes] = per_zero_stage_field(
        [0.0, 1.0, 1.0],
        (
            "Per ZeRO stage 0, 1, 2: the part of gradient_volumes_per_step that is the "
            "updated parameters' all-gather, one pass of the stage's parameters in bf16; "
            "with fp8_params in fp8 or mxfp8 the layers' weights travel in their FP8 bytes "
            "(1, MXFP8 1 + 1/32 with its scales: Megatron-Core's --fp8-param-gather gathers "
            "the FP8 parameter buffer). Set per engine from its gradient sync."
        ),
    )
    dp_param_gather_hidden: bool = Field(
        True,
        description=(
            "Whether that all-gather hides as the reduce does (dp_overlap_microbatches, "
            "dp_sync_per_chunk): Megatron-Core's --overlap-param-gather. False: it runs after "
            "the optimizer step with no compute beside it and is paid whole; only the "
            "gradient reduce hides (NVIDIA/Megatron-LM@d98e8a6 megatron/core/optimizer/"
            "distrib_optimizer.py l.3168-3198: step_with_ready_grads launches the all-gathers "
            "synchronously unless overlap_param_gather)."
        ),
    )
    zero3_overlap_fraction: float = fraction_field(
        0.5,
        "Share of a micro-batch's compute under which ZeRO-3's per-micro-batch parameter "
        "all-gathers and gradient reduce-scatter (and an engine's per-micro-batch gradient "
        "sync at ZeRO 0-2) can hide (prefetch, bucketing during backward). A judgement: it "
        "was fitted to SC21 Table 2's ZeRO-3 rows, which are now priced at 0 as the 2021 "
        "DeepSpeed code ran them (a blocking fetch that synchronises the device, "
        "docs/cost-model.md 'ZeRO-3 / FSDP'); no current engine's figure has been measured.",
    )
    zero3_copy_per_rank_s: float = latency_field(
        0.0,
        "Host time each ZeRO-3 collective spends per rank of its group copying between a list "
        "of per-rank tensors and NCCL's flat buffer, serialised with the collective (a blocking "
        "fetch). 0 for engines that gather into one flat tensor (all_gather_into_tensor, "
        "reduce_scatter_tensor). PyTorch 1.8's ProcessGroupNCCL took lists: allgather copies "
        "the flat output into each of the world-size outputs after ncclAllGather, "
        "reduce_scatter each input into a flat buffer before ncclReduceScatter, one copy_ a "
        "rank (pytorch/pytorch@00f5dfd torch/lib/c10d/ProcessGroupNCCL.cpp, allgather and "
        "reduce_scatter), and 2021 DeepSpeed called both with lists per parameter "
        "(deepspeedai/DeepSpeed@adac058ac deepspeed/runtime/zero/partition_parameters.py "
        "l.603-643, 740-778); such a row sets 3.8 us, a back-to-back launch of a short kernel "
        "(NVIDIA, 'Getting Started with CUDA Graphs', 2019: 3.8 us a kernel launched without "
        "synchronisation, V100; UNVERIFIED on A100), a lower bound on a copy_ through "
        "PyTorch's dispatcher.",
    )
    zero3_gather_views_per_rank_s: float = latency_field(
        0.0,
        "Host time each ZeRO-3 all-gather spends per rank of its group building the list of "
        "per-rank views it passes, beside zero3_copy_per_rank_s's copy. 0 for engines that "
        "gather into one flat tensor. 2021 DeepSpeed narrows the flat buffer once a rank in "
        "Python (deepspeedai/DeepSpeed@adac058ac deepspeed/runtime/zero/"
        "partition_parameters.py l.630-634) and PyTorch 1.8's ProcessGroupNCCL indexes the "
        "flat output once a rank in C++ before each copy (outputFlattened[i][j], "
        "pytorch/pytorch@00f5dfd torch/lib/c10d/ProcessGroupNCCL.cpp, allgather): such a row "
        "sets 3 us, an operator dispatched from Python (~2 us, half of it argument parsing) "
        "and one from C++ (~1 us), as PyTorch's maintainers measured a small op in 2020 "
        "(pytorch/pytorch#41383).",
    )
    zero3_scatter_views_per_rank_s: float = latency_field(
        0.0,
        "Host time each ZeRO-3 gradient reduce-scatter spends per rank of its group building "
        "the list of per-rank views it passes, beside zero3_copy_per_rank_s's copy. 0 for "
        "engines that scatter from one flat tensor. 2021 DeepSpeed views and narrows the "
        "gradient once a rank in Python (deepspeedai/DeepSpeed@adac058ac deepspeed/runtime/"
        "zero/partition_parameters.py l.749-769) and PyTorch 1.8's ProcessGroupNCCL indexes "
        "the flat input once a rank in C++ (inputFlattened[i][j], pytorch/pytorch@00f5dfd "
        "torch/lib/c10d/ProcessGroupNCCL.cpp, reduce_scatter): such a row sets 5 us, two "
        "operators dispatched from Python (~2 us each) and one from C++ (~1 us; "
        "pytorch/pytorch#41383).",
    )
    zero3_gather_buffer_bytes_per_param: float = Field(
        0.0,
        ge=0,
        le=64,
        description=(
            "HBM bytes each ZeRO-3 all-gather moves per gathered parameter besides NCCL's own, "
            "serialised with it as a blocking fetch is. 0 where the gather writes the "
            "parameters in place (or the engine hides its copies). 2021 DeepSpeed allocates "
            "each gathered tensor with torch.zeros, a fill of its 2 bytes a parameter "
            "(deepspeedai/DeepSpeed@adac058ac deepspeed/runtime/zero/partition_parameters.py "
            "l.614-616), and PyTorch 1.8's ProcessGroupNCCL gathers into a flat buffer and "
            "copies it out to the list, a read and a write (pytorch/pytorch@00f5dfd "
            "torch/lib/c10d/ProcessGroupNCCL.cpp, allgather): such a row sets 6 (bf16)."
        ),
    )
    zero3_scatter_buffer_bytes_per_param: float = Field(
        0.0,
        ge=0,
        le=64,
        description=(
            "HBM bytes each ZeRO-3 gradient reduce-scatter moves per parameter besides NCCL's "
            "own. 0 where the engine reduces its gradient buffer in place (or hides its "
            "copies). 2021 DeepSpeed with contiguous_gradients divides each gradient by the "
            "group in place before scattering it (deepspeedai/DeepSpeed@adac058ac "
            "deepspeed/runtime/zero/stage3.py l.1502-1510, 1707-1711), and ProcessGroupNCCL "
            "copies the list into a flat buffer (pytorch/pytorch@00f5dfd, reduce_scatter): "
            "two reads and two writes, 8 (bf16; the copy into the bucket of gradients under "
            "reduce_bucket_size, l.1461-1469, depends on that setting and is not counted)."
        ),
    )
    zero3_recompute_regathers: bool = Field(
        False,
        description=(
            "Under full recompute, the replayed forward all-gathers each layer's parameters "
            "again: DeepSpeed hooks every submodule's forward, which fetches its parameters and "
            "releases them after (deepspeedai/DeepSpeed@adac058ac deepspeed/runtime/zero/"
            "stage3.py l.1078-1183), and the checkpointed layer replays those forwards in "
            "backward, after the first forward released them. False where the replay finds them "
            "held: FSDP2's pre-forward hook skips the unshard in backward ('the pre-backward "
            "hook is responsible for the unshard', torch/distributed/fsdp/_fully_shard/"
            "_fsdp_state.py, _pre_forward)."
        ),
    )
    zero3_reuse_distance_params: float | None = Field(
        None,
        ge=0,
        le=1e13,
        description=(
            "ZeRO-3 keeps a gathered parameter instead of releasing it when its next use comes "
            "before this many parameters are used in between (DeepSpeed's "
            "stage3_max_reuse_distance, 1e9 by default: deepspeedai/DeepSpeed@edaa72212 "
            "deepspeed/runtime/zero/config.py l.244, partitioned_param_coordinator.py "
            "l.634-663; the same rule at adac058ac stage3.py l.222-271, 464-470). So the "
            "backward gathers again only what was released: after the forward, all but the "
            "stage's last R/2 parameters (each one's reuse waits on the forward and backward "
            "of those after it); after a replayed layer, each module whose later modules "
            "number more than R/2 parameters. None: every gather is released (FSDP)."
        ),
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
    zero3_gathers_per_layer: JsonInt | None = Field(
        None,
        ge=1,
        le=1000,
        description=(
            "ZeRO-3 all-gathers a layer takes each pass (forward, backward) where the engine's "
            "code gives the count; None: one per zero3_gather_unit. 2021 DeepSpeed gathers one "
            "a parameter and never those under stage3_param_persistence_threshold, 100,000 "
            "elements by default (deepspeedai/DeepSpeed@adac058ac deepspeed/runtime/zero/"
            "partition_parameters.py l.480-492, 603-643; stage3.py l.567, 1054-1061): of a "
            "Megatron GPT layer's 12 parameters (fused QKV, output and two MLP matrices and two "
            "norms, a weight and a bias each) the 4 weight matrices, for hidden sizes whose "
            "4h bias stays under it."
        ),
    )
    zero3_reduce_scatters_per_layer: JsonInt | None = Field(
        None,
        ge=1,
        le=1000,
        description=(
            "ZeRO-3 gradient reduce-scatters a layer takes a micro-batch where the engine's "
            "code gives the count; None: one per zero3_gather_unit. 2021 DeepSpeed scatters "
            "one a parameter, the persistent ones too (partition_parameters.py l.709-718): 12 "
            "for a Megatron GPT layer."
        ),
    )
    pp_p2p_overlap_fraction: float = fraction_field(
        0.0, "Share of pipeline point-to-point sends hidden under compute (conservative: none)."
    )
    pp_p2p_interleaved_overlap_fraction: float = fraction_field(
        0.0,
        "Share of pipeline point-to-point sends hidden under compute with the interleaved "
        "schedule (vpp > 1): Megatron-Core's overlap_p2p_comm posts each chunk's sends and "
        "receives asynchronously and waits on them a chunk later (NVIDIA/Megatron-LM@d98e8a6 "
        "megatron/core/pipeline_parallel/schedules.py l.1697-1866), on in Megatron-LM unless "
        "--no-overlap-p2p-communication (megatron/training/arguments.py l.3118-3120) since "
        "2023-10-12 (4eeff55d1f; added 2023-05-31, f9283c5a8a) and only with interleaving "
        "(l.1001-1016). "
        "The megatron and nemo engines set 1 (the steady state; the warm-up and flush sends, "
        "overlapped only with overlap_p2p_comm_warmup_flush, are not charged apart). What "
        "hides still costs overlap_compute_slowdown of itself.",
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
    moe_dispatch_network_efficiency: float = Field(
        1.0,
        ge=MIN_EFFICIENCY,
        le=2,
        description=(
            "Share of the NIC line rate a deduplicating expert dispatcher (moe_dispatch_dedup: "
            "DeepEP, HybridEP) reaches across nodes on the bytes it sends there, in place of "
            "inter_node_bandwidth_efficiency: DeepEP's internode kernels measure 43-58 GB/s "
            "(mean 50.3) of a 400 Gb/s NIC at EP 16-64 (deepseek-ai/DeepEP@dd758ca "
            "docs/legacy.md l.19-26), HybridEP's torch API on H100 41-58 GB/s (mean 50.2; "
            "deepseek-ai/DeepEP@94a9f8f docs/README_Hybrid-EP.md l.51-78, bf16 at 8 SMs): "
            "the line rate, where a ring collective keeps 0.74 of it."
        ),
    )
    moe_all_to_all_overlap_fraction: float = fraction_field(
        0.0,
        "Share of the expert all-to-all hidden under compute with 1F1B schedules; DualPipe's "
        "overlap is dualpipe_all_to_all_overlap_fraction.",
    )
    moe_all_to_all_paired_overlap: bool = Field(
        False,
        description=(
            "Megatron-Core's EP all-to-all overlap (overlap_moe_expert_parallel_comm, from "
            "core_v0.14.0): in the 1F1B steady state one micro-batch's forward runs layer by "
            "layer beside another's backward, and 'EP A2A in forward step is hidden by the "
            "attention/mlp computation in the backward step, and vice versa' "
            "(NVIDIA/Megatron-LM@d98e8a6 megatron/core/pipeline_parallel/combined_1f1b.py "
            "l.55-67). Priced as the all-to-all hidden under the layer's compute, bounded by "
            "it, in the share of chunk passes that run paired; the warm-up's forwards (one "
            "more than without it, schedules.py l.964-970) and the cool-down's backwards run "
            "alone. Replaces moe_all_to_all_overlap_fraction under 1F1B where it is set."
        ),
    )
    dualpipe_all_to_all_overlap_fraction: float = fraction_field(
        0.9,
        "Share of the expert all-to-all DualPipe hides by pairing forward and backward chunks "
        "(DeepSeek-V3 report, section 3.2.1, claims near-full overlap). Judgement.",
    )
