"""Profile `standard` behind the `Profile` interface: one layout in full, or a grid at once.

Both go through `standard.breakdown`, so the enumerator, the CP-SAT tables and `evaluate`
see the same figures.
"""

from __future__ import annotations

import numpy as np

from models.hardware import GpuSpec, fits_one_domain
from models.job import TrainingJob
from models.layout import Layout
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.estimate import Estimate, MemoryBytes, MfuStep
from optimizer.costmodel.grid import GridPrices, LayoutBox, LayoutGrid
from optimizer.costmodel.standard.breakdown import (
    MFU_STEP_NAMES,
    Breakdown,
    breakdown,
    step_floor_s,
    step_flops,
)
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.costmodel.standard.precision import mfu_against_fp8_peak
from optimizer.costmodel.warnings import cluster_warnings, engine_warnings


def grid_degrees(grid: LayoutGrid) -> Degrees:
    return Degrees(
        tp=grid.tp,
        pp=grid.pp,
        cp=grid.cp,
        dp=grid.dp,
        vpp=grid.vpp,
        micro_batch=grid.micro_batch,
        zero=grid.zero,
        recompute=grid.recompute,
        schedule=grid.schedule_codes,
        ep=grid.expert_parallel,
        tp_span=grid.span("tp"),
        cp_span=grid.span("cp"),
        pp_span=grid.span("pp"),
        dp_span=grid.span("dp"),
    )


def layout_degrees(layout: Layout) -> Degrees:
    """One resolved layout's degrees: a grid of one, read by the very formulas a grid is."""
    return grid_degrees(LayoutGrid.from_layouts([layout]))


def box_degrees(box: LayoutBox) -> Degrees:
    """The box's degrees, knobs and spans, each on the axes it varies along."""
    return Degrees(
        tp=box.degree("tp"),
        pp=box.degree("pp"),
        cp=box.degree("cp"),
        dp=box.degree("dp"),
        **{knob: box.knob(knob) for knob in ("vpp", "micro_batch", "zero", "recompute")},
        schedule=box.knob("schedule"),
        ep=box.knob("ep"),
        tp_span=box.span("tp"),
        cp_span=box.span("cp"),
        pp_span=box.span("pp"),
        dp_span=box.span("dp"),
    )


def expert_span(grid: LayoutGrid) -> np.ndarray:
    """GPUs one expert-parallel group spans, row by row (ep carved from cp, then dp)."""
    return np.asarray(grid_degrees(grid).ep_span)


def uneven_stage_warning(job: TrainingJob, layout: Layout) -> list[str]:
    layers, pp, vpp = job.model.num_layers, layout.pp, layout.vpp
    chunks = pp * vpp
    if layers % chunks == 0 or ((layers + 2) % chunks == 0 and pp > 1):
        return []
    busiest = -(-layers // chunks) * vpp
    return [
        f"num_layers({layers}) does not split into pp({pp}) * vpp({vpp}) = {chunks} equal chunks: "
        f"the busiest devices hold {busiest} layers against {layers / pp:g} on average and set "
        "the pace (priced so)"
    ]


def standard_warnings(job: TrainingJob, layout: Layout) -> list[str]:
    """The engine warnings, judged against the NVLink domain rather than the node."""
    cluster = job.cluster.model_copy(update={"gpus_per_node": job.cluster.nvlink_domain_size})
    warnings = engine_warnings(job.model_copy(update={"cluster": cluster}), layout)
    warnings += cluster_warnings(job) + bandwidth_warning(job)
    return warnings + straddle_warnings(job, layout) + uneven_stage_warning(job, layout)


def bandwidth_warning(job: TrainingJob) -> list[str]:
    """A GPU given without its HBM bandwidth prices no memory-bound kernel: say so, rather
    than let an optimistic figure pass for a whole one."""
    if job.cluster.gpu.memory_bandwidth_gb_s is not None:
        return []
    return [
        "cluster.gpu gives no memory_bandwidth_gb_s: the memory-bound kernels (norms, "
        "activations, rotary, the loss, the optimiser step) are not priced, so the step is "
        "optimistic; give the GPU's HBM bandwidth for a whole price"
    ]


def straddle_warnings(job: TrainingJob, layout: Layout) -> list[str]:
    """Groups small enough for one NVLink domain that still straddle two (their span does
    not divide the domain), so some run on the network: priced so, and said."""
    domain = job.cluster.job_nvlink_domain
    warnings = []
    for dim in ("tp", "cp", "pp"):
        span = layout.group_span(dim)
        if layout.degree(dim) > 1 and span < domain and not fits_one_domain(span, domain):
            first = _first_straddling_rank(span, domain)
            warnings.append(
                f"{dim} groups span {span} GPUs, which does not divide the NVLink domain of "
                f"{domain}: ranks {first}-{first + span - 1} straddle two domains, so the {dim} "
                "collectives are priced on the network"
            )
    return warnings


def _first_straddling_rank(span: int, domain: int) -> int:
    """The first rank of the first group of `span` consecutive ranks that crosses a domain
    boundary (span < domain, span not dividing it)."""
    start = 0
    while start % domain + span <= domain:
        start += span
    return start


def capacity_bytes(gpu: GpuSpec) -> float:
    """What a layout's parts share on one GPU: the total CUDA reports, since the CUDA context
    and NCCL's buffers are priced beside the tensors (standard/memory.runtime_bytes)."""
    return gpu.usable_memory_bytes


def price_standard(job: TrainingJob, layout: Layout, assumptions: CostAssumptions) -> Estimate:
    # one layout is a grid of one: the very formulas the search prices with
    b = breakdown(job, assumptions, layout_degrees(layout)).first()
    step_time_s = float(b.step_time_s)
    mfu_fp8_peak = mfu_against_fp8_peak(job.cluster.gpu, job.training.precision, float(b.mfu))
    return Estimate(
        profile="standard",
        layout=layout,
        micro_batches=int(b.micro_batches),
        memory=MemoryBytes(
            weights=float(b.memory.weights),
            gradients=float(b.memory.gradients),
            optimizer=float(b.memory.optimizer),
            activations=float(b.memory.activations),
            capacity=capacity_bytes(job.cluster.gpu),
            fragmentation=float(b.memory.fragmentation),
            runtime=float(b.memory.runtime),
        ),
        bubble=float(b.bubble),
        mfu_steps=tuple(
            MfuStep(name, float(mfu)) for name, mfu in zip(MFU_STEP_NAMES, b.mfu_steps, strict=True)
        ),
        step_time_s=step_time_s,
        tokens_per_s_per_gpu=job.training.tokens_per_step / (step_time_s * job.cluster.gpus),
        times_s={**{name: float(v) for name, v in b.layer_times_s.items()}, "step": step_time_s},
        warnings=tuple(standard_warnings(job, layout)),
        hardware_flops_utilization=float(b.hfu),
        mfu_fp8_peak=mfu_fp8_peak,
        mfu_fp8_peak_format=None if mfu_fp8_peak is None else job.training.precision,
    )


def _grid_prices(b: Breakdown) -> GridPrices:
    """Layouts with more chunks than layers never reach here (the search's knob mask)."""

    def part(values: object) -> np.ndarray:
        return np.asarray(values, dtype=float)

    return GridPrices(
        weights_bytes=part(b.memory.weights),
        gradients_bytes=part(b.memory.gradients),
        optimizer_bytes=part(b.memory.optimizer),
        activations_bytes=part(b.memory.activations),
        runtime_bytes=part(b.memory.fragmentation + b.memory.runtime),
        bubble=np.asarray(b.bubble, dtype=float),
        mfu=np.asarray(b.mfu, dtype=float),
    )


def price_standard_grid(
    job: TrainingJob, grid: LayoutGrid, assumptions: CostAssumptions
) -> GridPrices:
    return _grid_prices(breakdown(job, assumptions, grid_degrees(grid)))


def price_standard_box(
    job: TrainingJob, box: LayoutBox, assumptions: CostAssumptions
) -> GridPrices:
    """The grid's figures for every combination of the box, each array broadcastable to
    box.shape: the same `breakdown`, each formula computed over the axes it reads."""
    return _grid_prices(breakdown(job, assumptions, box_degrees(box)))


def mfu_ceiling_standard_box(
    job: TrainingJob, box: LayoutBox, assumptions: CostAssumptions
) -> np.ndarray:
    """Per combination of the box, an MFU no ZeRO stage of it exceeds: the model FLOPs over
    the step's floor (breakdown.step_floor_s), broadcastable to box.shape. The box's zero
    axis is not read."""
    model_flops, _ = step_flops(job, 0)
    floor = step_floor_s(job, assumptions, box_degrees(box))
    return np.asarray(model_flops / (job.cluster.gpus * job.cluster.gpu.peak_flop_s * floor))
