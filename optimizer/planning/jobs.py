"""The jobs a plan serves: what each trains (the request every route takes; the plan
chooses its cluster, `Request.on`), what it may be given, and where it runs now."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from optimizer.planning.cluster import Pool
from optimizer.request import Request


@dataclass(frozen=True)
class Running:
    """Where a running job runs now: its pool and node ids."""

    pool: str
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class Deadline:
    """`tokens` still to train within `hours` from the plan's now."""

    tokens: float
    hours: float

    @property
    def seconds(self) -> float:
        return self.hours * 3600.0


@dataclass(frozen=True)
class MeasuredThroughput:
    """A job's own throughput, as a scheduler measured it (Sia and Pollux measure goodput
    online): per GPU type (the pool's GPU name) and GPU count, in the job's own unit. A job
    that brings it is priced from it alone: the plan prices nothing for it and gives it no
    layout."""

    by_gpu: tuple[tuple[str, tuple[tuple[int, float], ...]], ...]

    @classmethod
    def of(cls, table: Mapping[str, Mapping[int, float]]) -> MeasuredThroughput:
        return cls(
            tuple(
                (gpu, tuple(sorted((int(g), float(v)) for g, v in counts.items())))
                for gpu, counts in sorted(table.items())
            )
        )

    def counts(self, gpu: str) -> dict[int, float]:
        """Throughput by GPU count on GPUs named `gpu` (empty when it was not measured)."""
        return next((dict(counts) for name, counts in self.by_gpu if name == gpu), {})


@dataclass(frozen=True)
class PlanJob:
    name: str
    # what it trains and how it is priced; its cluster is where the plan started it from,
    # each point of its scaling curve moves it (`on_pool`); None when it brings `measured`
    request: Request | None
    weight: float = 1.0
    min_gpus: int = 1
    max_gpus: int | None = None
    node_counts: tuple[int, ...] | None = None  # the counts to price; default powers of two
    movable: bool = True  # may change nodes (a running job): false pins it where it is
    resizable: bool = True  # may change its GPU count (a running job)
    preemptible: bool = True  # may be given nothing
    running: Running | None = None
    restart_minutes: float = 10.0  # training lost when it moves or is resized
    deadline: Deadline | None = None
    measured: MeasuredThroughput | None = None
    # minutes between its checkpoints, when it cannot save one on demand before it moves:
    # a move then also loses the training since the last one, half an interval on average
    checkpoint_minutes: float | None = None

    def __post_init__(self) -> None:
        if self.request is None and self.measured is None:
            raise ValueError(f"job {self.name!r}: a request or a measured throughput")

    @property
    def engine_name(self) -> str | None:
        return None if self.request is None else self.request.engine_name

    @property
    def pinned(self) -> bool:
        """A running job that may not move keeps exactly its nodes."""
        return self.running is not None and not self.movable

    @property
    def must_run(self) -> bool:
        return not self.preemptible or self.pinned

    @property
    def restart_s(self) -> float:
        return self.restart_minutes * 60.0

    @property
    def since_checkpoint_s(self) -> float:
        """Training a move or a failure loses since the last checkpoint, on average."""
        return 0.0 if self.checkpoint_minutes is None else self.checkpoint_minutes * 30.0

    @property
    def move_cost_s(self) -> float:
        """Training a planned move or resize loses: the restart, and what was trained since
        the last checkpoint when the job cannot save one first."""
        return self.restart_s + self.since_checkpoint_s

    def on_pool(self, pool: Pool, nodes: int) -> Request:
        """Its request on `nodes` nodes of `pool`."""
        if self.request is None:
            raise ValueError(f"job {self.name!r} brings its own throughput: nothing to price")
        return self.request.on(pool.cluster(nodes))

    def node_range(self, pool: Pool) -> tuple[int, int]:
        """The fewest and most whole nodes of `pool` within min_gpus and max_gpus."""
        fewest = max(1, math.ceil(self.min_gpus / pool.gpus_per_node))
        most = pool.nodes if self.max_gpus is None else self.max_gpus // pool.gpus_per_node
        return fewest, min(most, pool.nodes)

    def running_nodes_in(self, pool: Pool) -> int | None:
        """Its current node count, if it runs in `pool`."""
        if self.running is None or self.running.pool != pool.name:
            return None
        return len(self.running.nodes)

    def candidate_nodes(self, pool: Pool, running_gpus: int | None) -> tuple[int, ...]:
        """The node counts of `pool` its scaling curve is priced at: the whole-node counts it
        measured on the pool's GPU type, or the request's `node_counts`, or powers of two plus
        its fewest (and most, when max_gpus is given); plus what it runs on now. A pinned job keeps its nodes; a running job (of
        `running_gpus`) that may not be resized keeps its GPU count."""
        current = self.running_nodes_in(pool)
        if self.pinned:
            return () if current is None else (current,)
        if running_gpus is not None and not self.resizable:
            same, rest = divmod(running_gpus, pool.gpus_per_node)
            return (same,) if rest == 0 and 0 < same <= pool.nodes else ()
        fewest, most = self.node_range(pool)
        if fewest > most:
            return ()
        if self.measured is not None:
            counts = {
                gpus // pool.gpus_per_node
                for gpus in self.measured.counts(pool.gpu.name)
                if gpus % pool.gpus_per_node == 0 and fewest <= gpus // pool.gpus_per_node <= most
            }
        elif self.node_counts is not None:
            counts = {n for n in self.node_counts if fewest <= n <= most}
        else:
            counts = {1 << k for k in range(most.bit_length()) if fewest <= 1 << k <= most}
            counts.add(fewest)
            if self.max_gpus is not None:
                counts.add(most)
        if current is not None:
            counts.add(current)
        return tuple(sorted(n for n in counts if 0 < n <= pool.nodes))
