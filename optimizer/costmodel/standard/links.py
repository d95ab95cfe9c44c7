"""How fast a group's traffic moves, per rank: the link its span lands on (NVLink inside a
domain, else the network over as many NICs as the group has ranks in each domain), the
all-to-all's remote share, and a collective's time with the latency of the algorithm and
protocol NCCL picks (docs/cost-model.md, "Links" and "Collective latency")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from models.hardware import fits_one_domain
from models.job import TrainingJob
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import collectives as coll
from optimizer.costmodel.standard import times as tim

Number = Any


@dataclass(frozen=True)
class Links:
    """What the link and collective formulas read of the cluster and the assumptions:
    bandwidths in bytes/s, the job's NVLink domain in GPUs, NCCL's latencies in seconds."""

    nvlink_domain: int
    nvlink_bytes_s: float  # a rank's all-reduce bandwidth inside the domain
    nvlink_all_to_all_bytes_s: float  # its measured all-to-all bandwidth there
    nic_bytes_s: float  # one NIC's line rate
    network_efficiency: float  # inter_node_bandwidth_efficiency
    rails_per_domain: bool  # network_rails_per_domain
    by_message_size: bool  # collective_message_size
    # the MoE dispatcher's share of the NIC where it sends a token once per remote domain
    # (moe_dispatch_dedup); None where it sends every copy
    dedup_dispatch_efficiency: float | None
    latency_s: tuple[float, float, float]  # a collective's base, NVLink and network step
    ll128: bool  # collective_ll128


def job_links(job: TrainingJob, a: CostAssumptions) -> Links:
    """The job's links as the request prices them."""
    gpu = job.cluster.gpu
    return Links(
        nvlink_domain=job.cluster.job_nvlink_domain,
        nvlink_bytes_s=gpu.intra_node_bytes_s,
        nvlink_all_to_all_bytes_s=gpu.all_to_all_bytes_s,
        nic_bytes_s=gpu.inter_node_bytes_s,
        network_efficiency=a.inter_node_bandwidth_efficiency,
        rails_per_domain=a.network_rails_per_domain,
        by_message_size=a.collective_message_size,
        dedup_dispatch_efficiency=(
            a.moe_dispatch_network_efficiency if a.moe_dispatch_dedup else None
        ),
        latency_s=(a.collective_base_latency_s, a.nvlink_step_latency_s, a.network_step_latency_s),
        ll128=a.collective_ll128,
    )


def link_bytes_s(
    links: Links,
    span: Number,
    message_bytes: Number = None,
    ranks: Number = 1,
    network_efficiency: float | None = None,
) -> Number:
    """Per-rank bandwidth of a group of `ranks` spread over `span` consecutive ranks: NVLink
    when the group fits the NVLink domain, else the network at its efficiency (the
    collectives', inter_node_bandwidth_efficiency, unless `network_efficiency` says), times
    the group's ranks in each domain (their NICs carry its ring's channels side by side, up
    to NVLink's own pace); for a collective of `message_bytes`, the share of that bandwidth
    its size reaches (collectives.py)."""
    domain, nvlink = links.nvlink_domain, links.nvlink_bytes_s
    if network_efficiency is None:
        network_efficiency = links.network_efficiency
    inter = links.nic_bytes_s * network_efficiency
    if links.rails_per_domain:
        inter = np.minimum(inter * rails_per_rank(ranks, span, domain), nvlink)
    bandwidth = tim.link_bytes_s(span, domain, nvlink, inter)
    if message_bytes is None or not links.by_message_size:
        return bandwidth
    on_network = ~fits_one_domain(span, domain)
    return bandwidth * coll.bus_share(message_bytes, on_network)


def rails_per_rank(ranks: Number, span: Number, domain: int) -> Number:
    """NICs a group's collective spreads over, per rank's own: the fewest ranks the group
    holds in an NVLink domain it touches.

    A ring reduce-scatter or all-gather over ranks in several domains sends each rank's
    (g-1)/g of the data over every link of the ring, and leaves each domain once per
    channel; NCCL builds its channels over the domain's NICs, one rail each (NVIDIA/
    nccl@5067397 src/graph/tuning.cc l.318-324: an inter-node ring's bus bandwidth is its
    channels times the network's per channel), so a domain holding k of the group's ranks
    sends 1/k of the data through each of their NICs, the rest moving over NVLink (the
    NVLink part goes at NVLink's pace: link_bytes_s caps the sum there). The ring goes at the
    pace of the domain with the fewest: k = ranks / domains where the groups align with the
    domains (span a multiple of the domain); else a domain inside the group's span holds at
    least floor(domain / stride) of them, stride = span / ranks, and the worst-placed
    group's edge piece, gcd(span, domain) consecutive ranks (domains_spanned), holds
    ceil(gcd / stride) of them."""
    span = np.asarray(span)
    aligned = span % domain == 0
    per_domain = ranks / coll.domains_spanned(ranks, span, domain)
    stride = np.maximum(span / np.maximum(ranks, 1), 1.0)
    inside = np.floor(domain / stride)
    edge = np.ceil(np.gcd(span.astype(np.int64), domain) / stride)
    straddling = np.minimum(np.minimum(inside, edge), per_domain)
    return np.maximum(np.where(aligned, per_domain, straddling), 1.0)


def all_to_all_bytes_s(
    links: Links,
    ranks: Number,
    span: Number,
    message_bytes: Number,
    copies: int = 1,
) -> Number:
    """Per-rank bandwidth of an all-to-all over `ranks` spread over `span` ranks: each rank
    sends its share to every other. Inside one NVLink domain it runs at the GPU's measured
    all-to-all bandwidth (GpuSpec.all_to_all_gb_s, below the all-reduce's). Across domains
    the shares for ranks in its own domain go over NVLink at the same time as the rest cross
    its own NIC, so the step runs at one NIC's pace on the remote part alone, (ranks - local)
    / ranks of the bytes, up to NVLink's. With `moe_dispatch_dedup`, a token's `copies` cross
    the network once per remote domain, at the dispatcher's measured share of the NIC
    (moe_dispatch_network_efficiency)."""
    domain = links.nvlink_domain
    inside = fits_one_domain(span, domain)
    nvlink = links.nvlink_all_to_all_bytes_s
    if links.by_message_size:
        nvlink = nvlink * coll.bus_share(message_bytes, False)
    dispatcher = links.dedup_dispatch_efficiency
    one_nic = link_bytes_s(links, span, message_bytes, network_efficiency=dispatcher)
    domains = coll.domains_spanned(ranks, span, domain)
    local = ranks / domains
    remote_share = np.maximum(ranks - local, 1.0) / np.maximum(ranks, 1.0)
    if dispatcher is not None:
        remote_share = remote_share * coll.deduplicated_network_share(copies, domains)
    return np.where(inside, nvlink, np.minimum(one_nic / remote_share, nvlink))


def collective_s(
    links: Links,
    group: Number,
    span: Number,
    collectives: Number,
    transfer_s: Number,
    all_reduce: Number = False,
) -> Number:
    """Seconds of `collectives` like-sized collectives over the group whose bytes take
    `transfer_s` at its link's bandwidth, latency included, with the algorithm and protocol
    NCCL's tuner picks (collectives.collective_s; `all_reduce` where they pair up as
    all-reduces)."""
    domains = coll.domains_spanned(group, span, links.nvlink_domain)
    return coll.collective_s(
        transfer_s, group, domains, collectives, links.latency_s, links.ll128, all_reduce
    )
