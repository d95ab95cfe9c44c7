"""Profile `standard`, collectives by message size and rank count (docs/cost-model.md,
"standard: collectives").

A ring collective reaches its large-message bandwidth only for large messages: NCCL splits
a message into chunks per channel and pipelines them, and below a few hundred MB across
nodes the pipeline never fills. The share of the large-message bus bandwidth reached is
read off published nccl-tests runs, interpolated in log size:

- inside an NVLink domain, 8 x H200 (NVLink4, as DGX H100), all-reduce bus bandwidth
  against the 16 GiB figure (stas00/ml-engineering@744d01e network/README.md l.1255-1276;
  A100's NVLink3 curve in the same file, l.1220-1242, has the same shape);
- across nodes, 4 x 8 B200 over 8 x 400 Gb/s per node, per-accelerator bandwidth against
  its 16 GiB figure (same file, l.1400-1423, 1471-1485).

The latency of a ring collective over `g` ranks in `n` NVLink domains follows NCCL's own
tuner (NVIDIA/nccl@5067397 src/graph/tuning.cc l.286-433): a base latency, then g - 1
steps of which n - 1 cross the network at the network's step latency and the rest run at
NVLink's. As that tuner does, each collective then takes the quickest of the algorithms and
protocols on offer, latency plus bytes over its bandwidth (`collective_s`): the ring with
the Simple protocol, the ring with LL128 (lower step latencies at 0.92 of the bandwidth),
or, for a group with one rank per domain (a data-parallel group beside tp 8), PAT's
logarithmic latency at 0.75 of it; an all-reduce may take the double binary tree instead
(logarithmic in the nodes, at 0.92 of it), never PAT. Pure functions broadcasting over numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Number = Any
MIB = 2**20

# (message bytes, share of the large-message bus bandwidth), the tables cited above.
NVLINK_BUS_SHARE = (
    (1 * MIB, 39.93 / 482.26),
    (2 * MIB, 64.53 / 482.26),
    (4 * MIB, 107.16 / 482.26),
    (8 * MIB, 155.53 / 482.26),
    (16 * MIB, 219.89 / 482.26),
    (32 * MIB, 275.84 / 482.26),
    (64 * MIB, 346.51 / 482.26),
    (128 * MIB, 401.93 / 482.26),
    (256 * MIB, 436.15 / 482.26),
    (512 * MIB, 450.29 / 482.26),
    (1024 * MIB, 463.58 / 482.26),
    (4096 * MIB, 473.10 / 482.26),
    (16384 * MIB, 1.0),
)
NETWORK_BUS_SHARE = (
    (1 * MIB, 0.0),  # 5.37 GB/s bus over 32 ranks: the pipeline has not started
    (16 * MIB, 6.24 / 36.95),
    (64 * MIB, 15.17 / 36.95),
    (256 * MIB, 22.17 / 36.95),
    (1024 * MIB, 35.03 / 36.95),
    (4096 * MIB, 36.52 / 36.95),
    (16384 * MIB, 1.0),
)
# Below the smallest size measured, the share is taken to fall in proportion to the size
# (a latency-bound transfer); the latency term covers the rest.
SMALLEST_SHARE = 0.02


def bus_share(message_bytes: Number, on_network: Number) -> Number:
    """Share of the large-message bus bandwidth a collective of `message_bytes` reaches,
    inside the NVLink domain or across the network (booleans, elementwise)."""
    size = np.log(np.maximum(np.asarray(message_bytes, dtype=float), 1.0))
    inside = _interpolated(size, NVLINK_BUS_SHARE)
    across = _interpolated(size, NETWORK_BUS_SHARE)
    return np.maximum(np.where(on_network, across, inside), SMALLEST_SHARE)


def _interpolated(log_size: Number, table: tuple[tuple[float, float], ...]) -> Number:
    sizes = np.log([size for size, _ in table])
    shares = np.asarray([share for _, share in table])
    return np.interp(log_size, sizes, shares, left=shares[0], right=1.0)


def ring_latency_s(
    ranks: Number,
    domains: Number,
    collectives: Number,
    base_s: float,
    nvlink_step_s: Number,
    network_step_s: Number,
) -> Number:
    """NCCL's ring latency for `collectives` all-gathers or reduce-scatters over `ranks` in
    `domains` NVLink domains: base + (g - 1 - inter) steps at NVLink's latency + inter steps
    at the network's, inter = domains - 1. A group of one sends nothing."""
    steps = np.maximum(ranks - 1, 0)
    inter = np.minimum(np.maximum(domains - 1, 0), steps)
    per_collective = base_s + (steps - inter) * nvlink_step_s + inter * network_step_s
    return np.where(ranks > 1, collectives * per_collective, 0.0)


# NCCL's PAT algorithm for all-gather and reduce-scatter over one rank per node (NCCL 2.23+;
# NVIDIA/nccl@5067397 src/graph/tuning.cc l.153 and l.429-433): base 8.0 us, then
# log2(nodes) steps at a third and a half of the network step's latency and 2.8 us per rank.
PAT_BASE_LATENCY_S = 8.0e-6
PAT_PER_RANK_LATENCY_S = 2.8e-6
PAT_NETWORK_STEP_DIVISOR = 3.5


def pat_latency_s(ranks: Number, collectives: Number, network_step_s: float) -> Number:
    """NCCL's PAT latency for `collectives` all-gathers or reduce-scatters over `ranks`
    nodes, one rank each."""
    log_steps = np.floor(np.log2(np.maximum(ranks, 1)))
    per_collective = (
        PAT_BASE_LATENCY_S
        + log_steps * network_step_s / PAT_NETWORK_STEP_DIVISOR
        + ranks * PAT_PER_RANK_LATENCY_S
    )
    return np.where(ranks > 1, collectives * per_collective, 0.0)


@dataclass(frozen=True)
class RingProtocol:
    """An NCCL protocol's ring latencies (seconds) and the share of the Simple protocol's
    bandwidth it reaches (NVIDIA/nccl@5067397 src/graph/tuning.cc)."""

    base_s: float
    nvlink_step_s: float
    network_step_s: float  # ranks sharing a domain (hwLat NET, ring)
    network_step_one_per_domain_s: float  # one rank a domain: 'fully exposed', hwLat NET, tree
    multi_domain_step_floor_s: float  # a step's floor once the ring crosses the network
    bandwidth_share: float


# LL128 (l.150-175 baseLat and hwLat; l.328-329: 0.92 of the bus bandwidth, 120 of each 128
# bytes payload; the per-channel cap, 36.7 GB/s on Hopper, binds only below ~11 channels;
# l.406-410: an inter-node ring's steps take at least getNetOverhead's 1 us), enabled by
# default where the NIC sits under the GPU's PCIe switch (l.518-535): DGX-class nodes.
LL128 = RingProtocol(14.0e-6, 1.9e-6, 4.0e-6, 8.5e-6, 1.0e-6, 0.92)
# PAT (all-gather and reduce-scatter, Simple only, one rank a node) reaches 0.75 of the bus
# bandwidth (l.337)
PAT_BANDWIDTH_SHARE = 0.75


@dataclass(frozen=True)
class TreeProtocol:
    """A protocol's latencies (seconds) on NCCL's double binary tree for all-reduce, and the
    share of the ring's bandwidth it reaches (NVIDIA/nccl@5067397 src/graph/tuning.cc)."""

    base_s: float
    nvlink_step_s: float  # each rank after the first in a node, up and down the chain
    network_step_s: float  # each level of the tree across nodes, up and down
    bandwidth_share: float


# l.150-175 (Tree baseLat and hwLat: Simple 8.4, 4.0 over NVLink, 14 across the network; LL128
# 14.0, 1.25, 8.5); l.330-335 (0.92 of the bus bandwidth for a tree all-reduce, then LL128's
# 120 of each 128 bytes); l.414-417 (2 x ((ranks a node - 1) x NVLink + log2(nodes) x network))
TREE_SIMPLE = TreeProtocol(8.4e-6, 4.0e-6, 14.0e-6, 0.92)
TREE_LL128 = TreeProtocol(14.0e-6, 1.25e-6, 8.5e-6, 0.92 * 120 / 128)


def tree_all_reduce_s(
    transfer_s: Number, ranks: Number, domains: Number, all_reduces: Number, tree: TreeProtocol
) -> Number:
    """Seconds of `all_reduces` like-sized all-reduces on NCCL's tree, whose bytes take
    `transfer_s` at the Simple ring's bandwidth: a chain through each node's ranks and a
    tree of log2(nodes) levels across them, up for the reduction and down for the
    broadcast."""
    per_domain = np.maximum(np.asarray(ranks) / np.maximum(domains, 1), 1)
    levels = np.floor(np.log2(np.maximum(domains, 1)))
    latency = tree.base_s + 2 * (
        (per_domain - 1) * tree.nvlink_step_s + levels * tree.network_step_s
    )
    return transfer_s / tree.bandwidth_share + all_reduces * latency


def collective_s(
    transfer_s: Number,
    ranks: Number,
    domains: Number,
    collectives: Number,
    simple: tuple[float, float, float],
    ll128: bool = True,
    all_reduce: Number = False,
) -> Number:
    """Seconds of `collectives` like-sized all-gathers or reduce-scatters over `ranks` in
    `domains` NVLink domains whose bytes take `transfer_s` at the Simple ring's bandwidth, as
    NCCL's tuner picks for each the quickest algorithm and protocol: the ring with Simple
    (`simple`: base, NVLink step and network step latency) or LL128, or PAT where the group
    has one rank per domain. Where `all_reduce` says they pair up as all-reduces (a
    reduce-scatter and an all-gather each, as the ring runs one), the tree takes PAT's place
    (NCCL offers PAT for all-gather and reduce-scatter only, the tree for all-reduce only).
    LL, quicker only on messages of a few hundred kilobytes, is not priced."""
    network_step_s = simple[2]
    one_per_domain = (domains == ranks) & (ranks > 1)
    ring = transfer_s + ring_latency_s(ranks, domains, collectives, *simple)
    pat = transfer_s / PAT_BANDWIDTH_SHARE + pat_latency_s(ranks, collectives, network_step_s)
    best = np.where(one_per_domain, np.minimum(ring, pat), ring)
    if np.any(all_reduce):  # most calls price none: spare them the tree
        trees = [TREE_SIMPLE, TREE_LL128] if ll128 else [TREE_SIMPLE]
        tree = np.minimum.reduce(
            [tree_all_reduce_s(transfer_s, ranks, domains, collectives / 2, t) for t in trees]
        )
        best = np.where(all_reduce, np.minimum(ring, tree), best)
    if not ll128:
        return np.where(ranks > 1, best, 0.0)
    nvlink_step = np.where(
        domains > 1, max(LL128.nvlink_step_s, LL128.multi_domain_step_floor_s), LL128.nvlink_step_s
    )
    network_step = np.where(
        one_per_domain, LL128.network_step_one_per_domain_s, LL128.network_step_s
    )
    latency = ring_latency_s(ranks, domains, collectives, LL128.base_s, nvlink_step, network_step)
    low_latency = transfer_s / LL128.bandwidth_share + latency
    return np.where(ranks > 1, np.minimum(best, low_latency), 0.0)


def domains_spanned(ranks: Number, span: Number, domain: int) -> Number:
    """NVLink domains the worst-placed group of `ranks` spread over `span` consecutive ranks
    touches. Groups start at multiples of the span, so their offsets within a domain are the
    multiples of g = gcd(span, domain); the one starting at domain - g reaches furthest:
    1 + floor((domain - g + span - 1) / domain) domains (tp 6 on 8-GPU nodes: ranks 6-11,
    two), never more than the group has ranks."""
    span = np.asarray(span, dtype=np.int64)
    worst_offset = domain - np.gcd(span, domain)
    touched = 1 + (worst_offset + span - 1) // domain
    return np.clip(touched, 1, np.maximum(ranks, 1))


def deduplicated_network_share(copies: Number, domains: Number) -> Number:
    """Of a token's `copies` bound for experts spread evenly over `domains` NVLink domains
    (routing balanced, as force-balanced benchmarks run), the share that still crosses the
    network when a dispatcher sends each remote domain one copy and forwards it inside over
    NVLink (DeepEP's internode kernels, after DeepSeek-V3 section 3.2.2; HybridEP): the
    expected distinct remote domains, (D - 1)(1 - (1 - 1/D)^k), over the k (D - 1)/D copies
    bound there. 1 inside one domain."""
    d = np.maximum(np.asarray(domains, dtype=np.float64), 1.0)
    remote_copies = copies * (d - 1) / d
    distinct = (d - 1) * (1 - (1 - 1 / d) ** copies)
    return np.where(d > 1, distinct / np.maximum(remote_copies, 1e-12), 1.0)
