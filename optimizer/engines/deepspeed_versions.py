"""DeepSpeed's versions a request may name, oldest first, and its named settings (its
zero_optimization keys).

0.19.8 is the release the engine was read at (deepspeed.py). 0.3.15 is 2021's ZeRO-3, whose
parameter fetch blocks (the SC21 paper's runs); 0.6.2 is 2022's BF16 optimiser with the
pipeline engine (BLOOM's): no release holds both, and what each one's code did that no
setting names is its `assumptions`.
"""

from __future__ import annotations

from .settings import EngineSetting, InForce, SettingValue, fixed_bucket
from .versions import EngineVersion

DS_0315 = "deepspeedai/DeepSpeed@v0.3.15 (2c2a7f31b)"
DS_062 = "deepspeedai/DeepSpeed@v0.6.2 (32d97976c)"
DS_0198 = "deepspeed 0.19.8 (PyPI sdist) deepspeed/runtime/zero/config.py"
CONSTANTS_0315 = "deepspeedai/DeepSpeed@v0.3.15 deepspeed/runtime/zero/constants.py"
ADAC058 = "deepspeedai/DeepSpeed@adac058 deepspeed/runtime/zero"
PIPE_56C5223 = "deepspeedai/DeepSpeed@56c5223 deepspeed/runtime"
REUSE_DISTANCE = 1_000_000_000


def _reuse(value: SettingValue, _: InForce) -> dict[str, object]:
    assert isinstance(value, int)
    return {"zero3_reuse_distance_params": float(value)}


DEEPSPEED_SETTINGS = (
    EngineSetting(
        "stage3_max_reuse_distance",
        "zero_optimization.stage3_max_reuse_distance",
        int,
        f"{CONSTANTS_0315} l.101; {DS_0198}:244",
        prices=_reuse,
    ),
    EngineSetting(
        "reduce_bucket_size",
        "zero_optimization.reduce_bucket_size",
        int,
        f"{CONSTANTS_0315} l.66 (elements a gradient bucket holds, fixed)",
        prices=fixed_bucket,
    ),
)

REUSE = {"stage3_max_reuse_distance": REUSE_DISTANCE}

DEEPSPEED_VERSIONS = (
    EngineVersion(
        "0.3.15",
        "2021-04",
        f"{DS_0315}, the first tag holding adac058 (2021-04-14), which the SC21 rows cite",
        REUSE,
        {"stage3_max_reuse_distance": f"{CONSTANTS_0315} l.101"},
        assumptions={
            "zero3_overlap_fraction": 0.0,
            "zero3_gather_buffer_bytes_per_param": 6.0,
            "zero3_scatter_buffer_bytes_per_param": 8.0,
            "zero3_gathers_per_layer": 4,
            "zero3_reduce_scatters_per_layer": 12,
            "dp_overlap_microbatches": 0.0,
            "fused_attention": False,
            # per rank of the group, what this release's list-of-tensors collectives cost the
            # host: launch and dispatch latencies measured by NVIDIA and PyTorch, counted in
            # its code (the assumptions' own descriptions say how)
            "zero3_copy_per_rank_s": 3.8e-6,
            "zero3_gather_views_per_rank_s": 3e-6,
            "zero3_scatter_views_per_rank_s": 5e-6,
        },
        assumption_sources={
            "zero3_copy_per_rank_s": f"{ADAC058}/partition_parameters.py l.603-643, 740-778 "
            "(lists of per-rank tensors) and PyTorch 1.8's ProcessGroupNCCL (one copy_ a rank, "
            "pytorch/pytorch@00f5dfd torch/lib/c10d/ProcessGroupNCCL.cpp): a short kernel "
            "launched back to back, 3.8 us (NVIDIA, 'Getting Started with CUDA Graphs', 2019)",
            "zero3_gather_views_per_rank_s": f"{ADAC058}/partition_parameters.py l.630-634 (a "
            "narrow a rank in Python) and ProcessGroupNCCL's C++ index a rank: ~2 us and ~1 us "
            "an operator (pytorch/pytorch#41383)",
            "zero3_scatter_views_per_rank_s": f"{ADAC058}/partition_parameters.py l.749-769 (a "
            "view and a narrow a rank in Python) and ProcessGroupNCCL's C++ index: 2 x 2 + 1 us "
            "(pytorch/pytorch#41383)",
            "zero3_overlap_fraction": f"{ADAC058}/stage3.py l.357-406, 483-491; "
            "partition_parameters.py l.603-643 (fetch_sub_module waits on the gather, then "
            "torch.cuda.synchronize()): nothing hides the gathers",
            "zero3_gather_buffer_bytes_per_param": f"{ADAC058}/partition_parameters.py "
            "l.614-616 (torch.zeros fills the gathered tensor, 2 bytes) and PyTorch 1.8's "
            "ProcessGroupNCCL copying its flat buffer out to the list (read and write, 4; "
            "pytorch/pytorch@00f5dfd torch/lib/c10d/ProcessGroupNCCL.cpp, allgather)",
            "zero3_scatter_buffer_bytes_per_param": f"{ADAC058}/stage3.py l.1502-1510 (the "
            "gradient divided in place, read and write) and ProcessGroupNCCL copying the list "
            "into its flat buffer (read and write): 8 in bf16",
            "zero3_gathers_per_layer": f"{ADAC058}/partition_parameters.py l.480-492, "
            "603-643; stage3.py l.567, 1054-1061: one gather a parameter tensor, none for "
            "those under stage3_param_persistence_threshold (1e5, constants.py l.110): of the "
            "Megatron GPT layer this release ran (six modules' weights and biases) the four "
            "weight matrices while 4h stays under 1e5 (UNVERIFIED for other model code)",
            "zero3_reduce_scatters_per_layer": f"{ADAC058}/partition_parameters.py "
            "l.709-718: one reduce-scatter a parameter tensor, persistent ones too: the Megatron "
            "GPT layer's 12 (UNVERIFIED for other model code)",
            "dp_overlap_microbatches": "SC21 (Narayanan et al.) Table 1's runs: no gradient "
            "all-reduce overlap in the code of 2021",
            "fused_attention": "the Megatron GPT model code of 2021 it ran (FusedScaleMaskSoftmax "
            "on the stored scores; SC21 section 5.2)",
        },
    ),
    EngineVersion(
        "0.6.2",
        "2022-04",
        f"{DS_062}, the first tag holding 56c5223 ('bf16+pipeline parallelism', 2022-04-19) "
        "that BLOOM's row cites; the exact build BLOOM ran is UNVERIFIED",
        REUSE,
        {
            "stage3_max_reuse_distance": "deepspeedai/DeepSpeed@v0.6.2 deepspeed/runtime/zero/"
            "constants.py l.103"
        },
        assumptions={
            "gradient_bytes_per_param": 6.0,
            "gradient_accumulation_bytes_per_param": 18.0,
            "dp_overlap_microbatches": 0.0,
            "fused_attention": False,
            "sequence_parallel": False,
        },
        assumption_sources={
            "gradient_bytes_per_param": f"{PIPE_56C5223}/bf16_optimizer.py (BF16_Optimizer "
            "with the pipeline engine under bf16: the bf16 gradient and an unsharded fp32 "
            "accumulation buffer, 2 + 4; BLOOM's README: '4 bytes * params of additional "
            "memory')",
            "gradient_accumulation_bytes_per_param": f"{PIPE_56C5223}/pipe/engine.py l.746-761, "
            "bf16_optimizer.py l.383-397: each micro-batch's bf16 gradient cast to fp32 (read "
            "2, write 4) and added into the fp32 buffer (read 4 + 4, write 4)",
            "dp_overlap_microbatches": f"{PIPE_56C5223}/pipe/schedule.py (TrainSchedule's "
            "ReduceGrads after the last backward)",
            "fused_attention": "the Megatron-DeepSpeed model code of 2022 it ran "
            "(FusedScaleMaskSoftmax on the stored scores)",
            "sequence_parallel": "the Megatron-DeepSpeed model code of 2022 had no sequence "
            "parallelism",
        },
    ),
    EngineVersion(
        "0.19.8",
        "2026-10",
        "deepspeed 0.19.8 (PyPI sdist)",
        REUSE,
        {"stage3_max_reuse_distance": f"{DS_0198}:244"},
    ),
)
