"""What the job runs on: a GPU type and a cluster of them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from models.strict import SPEC_CONFIG, JsonInt

MAX_GPUS = 10_000_000


class GpuSpec(BaseModel):
    """One accelerator. Bandwidths are the effective all-reduce figures a collective sees."""

    model_config = SPEC_CONFIG

    name: str = Field("custom", max_length=200)
    memory_gb: float = Field(gt=0, le=100_000, description="HBM capacity, GB of 1e9 bytes.")
    peak_tflops: float = Field(ge=0.001, le=1_000_000, description="Dense bf16 peak, TFLOP/s.")
    intra_node_gb_s: float = Field(
        ge=0.001, le=1_000_000, description="All-reduce bandwidth inside the NVLink domain, GB/s."
    )
    inter_node_gb_s: float = Field(
        ge=0.001, le=1_000_000, description="Network bandwidth per GPU across nodes, GB/s."
    )
    all_to_all_gb_s: float | None = Field(
        None,
        ge=0.001,
        le=1_000_000,
        description="Bandwidth of an expert all-to-all (dispatch or combine) inside the NVLink "
        "domain, per rank, counting the bytes that leave it, GB/s: a measured figure, below "
        "the all-reduce's (no NVLink SHARP, no ring pipelining). None: intra_node_gb_s.",
    )
    memory_bandwidth_gb_s: float | None = Field(
        None, gt=0, le=1_000_000, description="HBM bandwidth, GB/s (memory-bound kernels)."
    )
    matmul_efficiency: float | None = Field(
        None,
        gt=0,
        le=1,
        description="The best share of peak a bf16 GEMM reaches on this GPU in a shape search "
        "(maximum achievable matmul FLOP/s); the standard profile scales its kernel efficiency "
        "by it.",
    )
    fp8_peak_tflops: float | None = Field(
        None,
        ge=0.001,
        le=1_000_000,
        description="Dense FP8 peak, TFLOP/s; none on GPUs without FP8 tensor cores (A100), "
        "which then refuse precision fp8.",
    )
    fp8_matmul_efficiency: float | None = Field(
        None,
        gt=0,
        le=1,
        description="The best share of the FP8 peak an FP8 GEMM reaches in the same shape "
        "search as matmul_efficiency; without it FP8 GEMMs reach the bf16 share.",
    )
    mxfp8_peak_tflops: float | None = Field(
        None,
        ge=0.001,
        le=1_000_000,
        description="Dense MXFP8 peak (OCP microscaling: FP8 values with an E8M0 scale per "
        "32), TFLOP/s; none where the tensor cores take no block scales (Hopper, CDNA3), "
        "which then refuse precision mxfp8.",
    )
    nvfp4_peak_tflops: float | None = Field(
        None,
        ge=0.001,
        le=1_000_000,
        description="Dense NVFP4 peak (FP4 E2M1 values with an E4M3 scale per 16 and an FP32 "
        "scale per tensor), TFLOP/s; none on GPUs without NVFP4 tensor cores (Hopper; AMD's "
        "CDNA4 takes MXFP4's E8M0 scales per 32, not NVFP4), which then refuse precision "
        "nvfp4.",
    )
    nvlink_domain_gpus: JsonInt | None = Field(
        None,
        gt=0,
        le=100_000,
        description="GPUs one NVLink domain of this system joins when the cluster names none "
        "(GB200 and GB300 NVL72: 72, over 18 trays of 4); None: a node (gpus_per_node).",
    )
    fp8_gemm_tn_only: bool = Field(
        True,
        description="Its FP8 GEMMs take only the TN layout (compute capability below 10: "
        "Hopper, Ada), so Transformer Engine keeps a transposed FP8 copy of each weight for "
        "the backward; false on Blackwell, whose FP8 GEMMs read either layout "
        "(is_non_tn_fp8_gemm_supported, NVIDIA/TransformerEngine transformer_engine/pytorch/"
        "utils.py). Memory only.",
    )
    sm_count: JsonInt | None = Field(
        None,
        gt=0,
        le=100_000,
        description="Streaming multiprocessors a GEMM's tiles spread over (wave quantisation); "
        "without it GEMMs are priced as if their waves were full.",
    )
    attention_efficiency: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Fraction of peak fused attention reaches on this GPU (a kernel figure).",
    )
    gemm_table: Literal["sm_90", "sm_100"] | None = Field(
        None,
        description="The measured GEMM throughput table by shape this GPU's matmuls follow "
        "(models/presets/gemm_throughput.json: sm_90 measured on H100, sm_100 on B200); "
        "profile standard then prices each GEMM at its shape's throughput relative to the "
        "plate's. None: one kernel efficiency for every shape.",
    )
    usable_memory_gb: float | None = Field(
        None,
        gt=0,
        le=100_000,
        description="The device memory CUDA reports as the GPU's total (cudaMemGetInfo, as "
        "PyTorch's out-of-memory message prints it), GB of 1e9 bytes: what the tensors, the "
        "CUDA context and NCCL's buffers share in profile standard. None: memory_gb. "
        "Profile workshop keeps memory_gb, as its plate does.",
    )
    source: str | None = Field(None, max_length=2000, description="Where the figures come from.")

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def streams_run_apart(self) -> bool:
        """Whether kernels on separate CUDA streams run side by side under tensor or context
        parallelism: from Blackwell on (compute capability 10, the sm_100 GEMM table) Megatron
        no longer needs CUDA_DEVICE_MAX_CONNECTIONS=1 there, which before it (Hopper, Ampere,
        and AMD parts, which report a capability below 10) queues every stream's kernels in
        one line (NVIDIA/Megatron-LM@d98e8a6 megatron/training/arguments.py l.1451-1475). A
        GPU without a GEMM table is taken as before Blackwell."""
        return self.gemm_table == "sm_100"

    @property
    def usable_memory_bytes(self) -> float:
        return (self.memory_gb if self.usable_memory_gb is None else self.usable_memory_gb) * 1e9

    @property
    def peak_flop_s(self) -> float:
        return self.peak_tflops * 1e12

    @property
    def fp8_peak_flop_s(self) -> float | None:
        return None if self.fp8_peak_tflops is None else self.fp8_peak_tflops * 1e12

    @property
    def mxfp8_peak_flop_s(self) -> float | None:
        return None if self.mxfp8_peak_tflops is None else self.mxfp8_peak_tflops * 1e12

    @property
    def nvfp4_peak_flop_s(self) -> float | None:
        return None if self.nvfp4_peak_tflops is None else self.nvfp4_peak_tflops * 1e12

    @property
    def memory_bandwidth_bytes_s(self) -> float | None:
        return None if self.memory_bandwidth_gb_s is None else self.memory_bandwidth_gb_s * 1e9

    @property
    def intra_node_bytes_s(self) -> float:
        return self.intra_node_gb_s * 1e9

    @property
    def all_to_all_bytes_s(self) -> float:
        gb_s = self.intra_node_gb_s if self.all_to_all_gb_s is None else self.all_to_all_gb_s
        return gb_s * 1e9

    @property
    def inter_node_bytes_s(self) -> float:
        return self.inter_node_gb_s * 1e9


class ClusterSpec(BaseModel):
    """`gpus` accelerators of one type, `gpus_per_node` of them sharing NVLink.

    `nvlink_domain` names a larger NVLink domain than a node (GB200 NVL72: 72 GPUs over 18
    trays of 4), and defaults to the GPU's own (`nvlink_domain_gpus`, which the GB200 and
    GB300 presets set to 72), else to the node; profiles that price links by domain
    (standard) use it, workshop does not.
    """

    model_config = SPEC_CONFIG

    gpus: JsonInt = Field(gt=0, le=MAX_GPUS)
    gpu: GpuSpec
    gpus_per_node: JsonInt = Field(8, gt=0, le=1024)
    nvlink_domain: JsonInt | None = Field(
        None,
        gt=0,
        le=100_000,
        description="GPUs sharing NVLink; defaults to the GPU's nvlink_domain_gpus (72 on "
        "GB200 and GB300 NVL72), else to gpus_per_node.",
    )

    @property
    def nvlink_domain_size(self) -> int:
        if self.nvlink_domain is not None:
            return self.nvlink_domain
        return self.gpu.nvlink_domain_gpus or self.gpus_per_node

    @property
    def job_nvlink_domain(self) -> int:
        """GPUs of this job in one NVLink domain: the whole job when it fits one domain, else
        its segment (domain_segment_gpus)."""
        domain = self.nvlink_domain_size
        if self.gpus <= domain:
            return self.gpus
        return domain_segment_gpus(self.gpus, domain, self.gpus_per_node)


def domain_segment_gpus(gpus: int, domain: int, gpus_per_node: int) -> int:
    """GPUs a job of `gpus` holds in each NVLink domain when it spans several: the most whole
    nodes no more than the domain's that divide the job's nodes. A block scheduler lays such
    a job over the domains in equal segments: Slurm's topology/block takes `--segment`, a
    node count that must divide the job's, each segment inside one block (one NVL72 rack);
    NVIDIA's NVL72 guidance gives jobs of 128 GPUs and more segments of 16 of a rack's 18
    trays, 64 GPUs (NVIDIA technical blog, "Unlock Exascale Performance on NVIDIA GB200 NVL72
    with Slurm Topology-Aware Job Scheduling"; slurm.schedmd.com/topology.html, "Block
    Topology"). So 512 GB200 run as 8 racks of 64, not 7 of 72 and one of 8, as NVIDIA's
    GB200 recipes place them (HybridEP is told NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN 64
    with NVLINK_DOMAIN_SIZE 72: NVIDIA-NeMo/Megatron-Bridge@067f987
    src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v3.py). Nodes of one domain each
    (H100 and the like), or a job of part-nodes, keep the domain."""
    nodes, domain_nodes = gpus // gpus_per_node, domain // gpus_per_node
    if gpus % gpus_per_node or domain_nodes <= 1:
        return domain
    segment = next(n for n in range(domain_nodes, 0, -1) if nodes % n == 0)
    return segment * gpus_per_node


def fits_one_domain(span: Any, domain: int) -> Any:
    """Whether every group of `span` consecutive ranks sits inside one NVLink domain of
    `domain` GPUs. Rank-ordered groups pack only when the span divides the domain: tp 6 on
    8-GPU nodes puts ranks 6-11 on two nodes, and that group's collectives run at the
    network's pace. Ints or numpy arrays."""
    return (span <= domain) & (domain % span == 0)
