"""Profile `standard`, the expert all-to-all: what a MoE layer's dispatch and combine take
a micro-batch, and what of it hides under compute (docs/cost-model.md, "Mixture of
experts"). Split from breakdown.py, which charges it among a layer's parts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from models.job import TrainingJob
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import links as lnk
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import ranks as rnk
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.degrees import Degrees

Number = Any


@dataclass(frozen=True)
class AllToAllHiding:
    """What hides the expert all-to-all (all_to_all_hiding)."""

    fraction: float  # moe_all_to_all_overlap_fraction: hidden under compute with 1F1B
    dualpipe_fraction: float  # dualpipe_all_to_all_overlap_fraction
    paired: bool  # moe_all_to_all_paired_overlap: Megatron-Core's paired overlap, asked
    compute_slowdown: float  # overlap_compute_slowdown


def all_to_all_hiding(a: CostAssumptions) -> AllToAllHiding:
    """The request's expert all-to-all overlaps."""
    return AllToAllHiding(
        fraction=a.moe_all_to_all_overlap_fraction,
        dualpipe_fraction=a.dualpipe_all_to_all_overlap_fraction,
        paired=a.moe_all_to_all_paired_overlap,
        compute_slowdown=a.overlap_compute_slowdown,
    )


def moe_all_to_all_s(
    job: TrainingJob,
    links: lnk.Links,
    hiding: AllToAllHiding,
    k: Degrees,
    tokens: Number,
    compute_s: Number,
) -> Number:
    """A layer's exposed expert all-to-all a micro-batch: the schedule's share of it hidden
    (DualPipe's or 1F1B's), or, where Megatron-Core's paired overlap runs
    (ranks.paired_overlap_on), hidden under `compute_s` in the passes that run paired
    (times.paired_pass_share)."""
    model = job.model
    token_bytes = model.experts_per_token * model.hidden_size * mem.BF16_BYTES
    bandwidth = lnk.all_to_all_bytes_s(
        links, k.ep, k.ep_span, tokens / k.tp * token_bytes, model.experts_per_token
    )
    slowdown = hiding.compute_slowdown
    overlap = np.where(
        k.schedule == mem.SCHEDULE_DUALPIPE, hiding.dualpipe_fraction, hiding.fraction
    )

    def priced(hidden: Number) -> Number:
        return tim.moe_all_to_all_s(
            k.ep,
            tokens,
            k.tp,
            model.experts_per_token,
            model.hidden_size,
            bandwidth,
            model.moe_layer_share,
            hidden,
            slowdown,
        )

    if not hiding.paired:
        return priced(overlap)
    m = job.training.global_batch // (k.dp * k.micro_batch)
    pairs = rnk.paired_overlap_on(k, job.cluster.gpu.streams_run_apart)
    share = np.where(pairs, tim.paired_pass_share(m, k.pp, k.vpp), 0.0)
    whole = priced(0.0)
    paired = tim.paired_all_to_all_s(whole, compute_s, share, slowdown)
    return np.where(pairs, paired, priced(overlap))
