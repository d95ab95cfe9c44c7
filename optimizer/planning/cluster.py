"""The cluster a plan packs: pools of identical nodes, grouped into racks and NVLink domains.

Node ids are a pool's own, 0 to `nodes - 1`; rack r holds nodes r * nodes_per_rack onward.
The solver never sees single nodes: inside one *cell* (an NVLink domain when a domain spans
several nodes, else a rack) the available nodes are interchangeable, so it counts nodes per
cell and the read-back names them (lowest ids first). That is the symmetry between identical
nodes broken by construction, and it keeps the model's size in racks, not nodes.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from models.errors import InvalidSpec
from models.hardware import ClusterSpec, GpuSpec


@dataclass(frozen=True)
class Pool:
    """Nodes of one GPU type: `gpus_per_node` each, `nvlink_domain_gpus` sharing NVLink."""

    name: str
    gpu: GpuSpec
    nodes: int
    gpus_per_node: int = 8
    nvlink_domain_gpus: int | None = None  # default: one node
    nodes_per_rack: int | None = None  # rack or rail group; default: the whole pool
    unavailable: frozenset[int] = frozenset()  # busy or failed node ids

    @property
    def domain_gpus(self) -> int:
        return self.gpus_per_node if self.nvlink_domain_gpus is None else self.nvlink_domain_gpus

    @property
    def domain_nodes(self) -> int:
        """Nodes per NVLink domain (1 unless a domain spans trays, as in GB200 NVL72)."""
        return max(self.domain_gpus // self.gpus_per_node, 1)

    @property
    def rack_nodes(self) -> int:
        return self.nodes if self.nodes_per_rack is None else min(self.nodes_per_rack, self.nodes)

    @property
    def racks(self) -> int:
        return -(-self.nodes // self.rack_nodes)

    @property
    def available_nodes(self) -> int:
        return self.nodes - len(self.unavailable)

    def rack_of(self, node: int) -> int:
        return node // self.rack_nodes

    def cluster(self, nodes: int) -> ClusterSpec:
        """What one job of `nodes` nodes of this pool runs on, as the cost model sees it."""
        return ClusterSpec(
            gpus=nodes * self.gpus_per_node,
            gpu=self.gpu,
            gpus_per_node=self.gpus_per_node,
            nvlink_domain=self.nvlink_domain_gpus,
        )

    def gpu_key(self) -> str:
        """The pool's hardware as the scaling curves' cache sees it (its name is not in it)."""
        return f"{self.gpu.model_dump_json()}|{self.gpus_per_node}|{self.nvlink_domain_gpus}"


@dataclass(frozen=True)
class Cell:
    """The unit the solver counts nodes in: a rack, or an NVLink domain inside one."""

    pool: int  # index into the problem's pools
    index: int  # position among all the problem's cells
    rack: int
    node_ids: tuple[int, ...]  # every node of the cell, ascending
    available: tuple[int, ...]  # those not unavailable
    domain: bool  # a multi-node NVLink domain: jobs take it whole, or one remainder each

    @property
    def capacity(self) -> int:
        return len(self.available)

    def among(self, ascending: Sequence[int]) -> Sequence[int]:
        """Of `ascending` (sorted node ids of the cell's pool), those in the cell: found by
        bisection, its ids being one range, so a job's nodes cost no scan of every cell."""
        if not self.node_ids:
            return ()
        first = bisect.bisect_left(ascending, self.node_ids[0])
        return ascending[first : bisect.bisect_right(ascending, self.node_ids[-1])]


def cells_of(pool: Pool, pool_index: int, first_index: int = 0) -> tuple[Cell, ...]:
    """The pool's cells in node order: its racks, or its NVLink domains when they span
    nodes; numbered from `first_index`."""
    size = pool.domain_nodes if pool.domain_nodes > 1 else pool.rack_nodes
    cells = []
    for index, first in enumerate(range(0, pool.nodes, size), start=first_index):
        ids = tuple(range(first, min(first + size, pool.nodes)))
        available = tuple(n for n in ids if n not in pool.unavailable) if pool.unavailable else ids
        rack = pool.rack_of(first)
        cells.append(Cell(pool_index, index, rack, ids, available, pool.domain_nodes > 1))
    return tuple(cells)


def check_pool(pool: Pool, where: str) -> None:
    """A pool that describes real hardware, or InvalidSpec naming the field."""
    if pool.domain_gpus % pool.gpus_per_node:
        raise InvalidSpec(
            f"pool {pool.name!r}: nvlink_domain({pool.domain_gpus}) must be a multiple of "
            f"gpus_per_node({pool.gpus_per_node}): a plan gives jobs whole nodes",
            f"{where}.nvlink_domain",
        )
    if pool.domain_nodes > 1 and pool.rack_nodes % pool.domain_nodes:
        raise InvalidSpec(
            f"pool {pool.name!r}: an NVLink domain of {pool.domain_nodes} nodes must fit whole "
            f"racks: nodes_per_rack({pool.rack_nodes}) is not a multiple of it",
            f"{where}.nodes_per_rack",
        )
    if pool.domain_nodes > 1 and pool.nodes % pool.domain_nodes:
        raise InvalidSpec(
            f"pool {pool.name!r}: nodes({pool.nodes}) is not a whole number of NVLink domains "
            f"of {pool.domain_nodes} nodes",
            f"{where}.nodes",
        )
    outside = sorted(node for node in pool.unavailable if not 0 <= node < pool.nodes)
    if outside:
        raise InvalidSpec(
            f"pool {pool.name!r}: unavailable node {outside[0]} is not one of its nodes "
            f"0-{pool.nodes - 1}",
            f"{where}.unavailable_nodes",
        )
