"""What-ifs the formulas price but a training engine would refuse or run badly, said beside the
figures. Shared by the profiles."""

from __future__ import annotations

from models.job import TrainingJob
from models.layout import Layout


def tp_in_node(job: TrainingJob, layout: Layout) -> bool:
    """Whether each tensor-parallel group sits inside one node's NVLink under the placement."""
    return layout.group_span("tp") <= job.cluster.gpus_per_node


def engine_warnings(job: TrainingJob, layout: Layout) -> list[str]:
    """What-ifs the formulas price but a training engine would refuse or run badly."""
    model, tp = job.model, layout.tp
    warnings = []
    if model.num_kv_heads % tp and tp % model.num_kv_heads == 0:
        warnings.append(
            f"tp({tp}) exceeds num_kv_heads({model.num_kv_heads}): engines such as Megatron-LM "
            "refuse to split KV heads this way (others replicate them); priced anyway"
        )
    elif model.num_kv_heads % tp:
        warnings.append(
            f"tp({tp}) does not divide num_kv_heads({model.num_kv_heads}): engines such as "
            "Megatron-LM refuse it; priced anyway"
        )
    if not tp_in_node(job, layout):
        span = layout.group_span("tp")
        warnings.append(
            f"tensor-parallel groups span {span} GPUs, beyond a node of {job.cluster.gpus_per_node}: "
            f"their all-reduces run on the network at {job.cluster.gpu.inter_node_gb_s:g} GB/s"
        )
    return warnings


def cluster_warnings(job: TrainingJob) -> list[str]:
    """What the cluster itself says, whatever the layout: a job that is not whole nodes. Read
    from the job's own nodes (standard judges engine rules against the NVLink domain instead,
    and a GB200 NVL72 rack of 72 is rarely filled whole)."""
    cluster = job.cluster
    if cluster.gpus <= cluster.gpus_per_node or not cluster.gpus % cluster.gpus_per_node:
        return []
    return [
        f"{cluster.gpus:,} GPUs are not whole nodes of {cluster.gpus_per_node} "
        f"({cluster.gpus / cluster.gpus_per_node:,.2f} nodes): groups are placed and their "
        "links priced as if every node were full; check gpus_per_node"
    ]
