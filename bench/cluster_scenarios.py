"""The clusters and workloads bench/simulate.py replays: what arrives, on what, and what fails.

- `small`: 30 mixed jobs on 512 H100 and A100 GPUs, the planner's first test ground.
- `acme`: an LLM cluster shaped as the Acme trace describes one (NSDI'24, InternLM/AcmeTrace:
  a few pretraining jobs hold most GPU time, many short evaluation jobs queue behind them),
  on H100 and B200 pools in racks of 16 nodes and pods of 3,072 GPUs (Llama 3 paper 3.3:
  full bisection inside a pod, oversubscribed 1:7 above), with node failures at Llama 3's
  rate (466 interruptions in 54 days on 16,384 GPUs). Evaluation jobs are priced as the short
  training-shaped jobs the planner knows (their throughput, not an inference server's).

A scenario is data; the trace and the failures are drawn from a seed, so every policy replays
the same events.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Template:
    """A kind of job: its model and batch, the GPUs a fixed-size scheduler gives it, the node
    counts the planner and greedy may choose, and its work in hours at the fixed size."""

    model: str
    global_batch: int
    seq_len: int
    fixed_gpus: int
    node_counts: tuple[int, ...]
    hours: tuple[float, float]
    kind: str = "train"  # "pretrain", "eval" or "train"

    def request(self) -> dict[str, Any]:
        training = {"global_batch": self.global_batch, "seq_len": self.seq_len}
        return {"model": self.model, "training": training}


@dataclass(frozen=True)
class Arrival:
    name: str
    template: int
    at_s: float
    hours_at_fixed: float


@dataclass(frozen=True)
class Failure:
    at_s: float
    pool: str
    node: int
    repaired_s: float


@dataclass(frozen=True)
class Scenario:
    name: str
    pools: tuple[dict[str, Any], ...]
    templates: tuple[Template, ...]
    restart_minutes: float
    checkpoint_minutes: float | None
    nodes_per_pod: int | None
    failures_per_node_hour: float
    repair_hours: float
    horizon_hours: float
    pretraining: tuple[int, ...] = ()  # the templates of the pretraining jobs, an hour apart

    @property
    def gpus(self) -> int:
        return sum(pool["nodes"] * pool["gpus_per_node"] for pool in self.pools)

    def arrivals(self, jobs: int, seed: int) -> list[Arrival]:
        return ARRIVALS[self.name](self, jobs, random.Random(seed))

    def failures(self, seed: int, times: float = 1.0) -> list[Failure]:
        """Poisson failures per node over the horizon at `times` the scenario's rate, each
        node back `repair_hours` later."""
        rng, found = random.Random(seed + 7919), []
        if self.failures_per_node_hour * times <= 0:
            return []
        nodes = [(pool["name"], n) for pool in self.pools for n in range(pool["nodes"])]
        rate_s = times * self.failures_per_node_hour * len(nodes) / 3600
        clock = rng.expovariate(rate_s)
        while clock < self.horizon_hours * 3600:
            pool, node = rng.choice(nodes)
            found.append(Failure(clock, pool, node, clock + self.repair_hours * 3600))
            clock += rng.expovariate(rate_s)
        return found


def _small_arrivals(scenario: Scenario, jobs: int, rng: random.Random) -> list[Arrival]:
    """Poisson arrivals, a mean gap of 20 minutes; any template; 1-6 hours of work."""
    clock, made = 0.0, []
    for k in range(jobs):
        clock += rng.expovariate(1 / 1200)
        template = rng.randrange(len(scenario.templates))
        made.append(Arrival(f"job{k:02d}", template, clock, rng.uniform(1, 6)))
    return made


def _acme_arrivals(scenario: Scenario, jobs: int, rng: random.Random) -> list[Arrival]:
    """The pretraining jobs arrive an hour apart from the start; the rest of `jobs` are
    evaluations arriving all along the horizon."""
    evals = [i for i, t in enumerate(scenario.templates) if t.kind == "eval"]
    made = []
    for k, template in enumerate(scenario.pretraining):
        low, high = scenario.templates[template].hours
        made.append(Arrival(f"pretrain{k}", template, k * 3600.0, rng.uniform(low, high)))
    gap_s = scenario.horizon_hours * 3600 / max(jobs - len(made), 1)
    clock = 0.0
    for k in range(jobs - len(made)):
        clock += rng.expovariate(1 / gap_s)
        template = rng.choice(evals)
        low, high = scenario.templates[template].hours
        made.append(Arrival(f"eval{k:03d}", template, clock, rng.uniform(low, high)))
    return sorted(made, key=lambda a: a.at_s)


ARRIVALS = {"small": _small_arrivals, "acme": _acme_arrivals}

SMALL = Scenario(
    name="small",
    pools=(
        {"name": "h100", "gpu": "h100-sxm", "nodes": 32, "gpus_per_node": 8, "nodes_per_rack": 8},
        {"name": "a100", "gpu": "a100-80gb", "nodes": 32, "gpus_per_node": 8, "nodes_per_rack": 8},
    ),
    templates=(
        Template("llama3-8b", 256, 8192, 32, (1, 2, 4, 8), (1, 6)),
        Template("mistral-7b", 512, 4096, 64, (2, 4, 8, 16), (1, 6)),
        Template("llama3-70b", 512, 8192, 128, (8, 16, 32), (1, 6)),
        Template("qwen2.5-72b", 256, 8192, 128, (8, 16), (1, 6)),
    ),
    restart_minutes=5.0,
    checkpoint_minutes=None,
    nodes_per_pod=None,
    failures_per_node_hour=0.0,
    repair_hours=0.0,
    horizon_hours=12.0,
)

# Llama 3 paper 3.3.4: 466 job interruptions in 54 days on 16,384 GPUs (2,048 nodes).
LLAMA3_FAILURES_PER_NODE_HOUR = 466 / (54 * 24 * 2048)

ACME = Scenario(
    name="acme",
    pools=(
        {"name": "h100", "gpu": "h100-sxm", "nodes": 512, "gpus_per_node": 8, "nodes_per_rack": 16},
        {"name": "b200", "gpu": "b200", "nodes": 256, "gpus_per_node": 8, "nodes_per_rack": 16},
    ),
    templates=(
        Template("llama3-405b", 2048, 8192, 2048, (128, 192, 256), (24, 36), "pretrain"),
        Template("llama3-70b", 1024, 8192, 1024, (64, 96, 128), (24, 36), "pretrain"),
        Template("mixtral-8x7b", 1024, 4096, 1024, (64, 96, 128), (16, 24), "pretrain"),
        Template("llama3-8b", 64, 8192, 16, (1, 2), (0.25, 1.5), "eval"),
        Template("llama3-70b", 64, 8192, 64, (4, 8), (0.25, 1.0), "eval"),
        Template("mistral-7b", 64, 4096, 8, (1, 2), (0.25, 1.0), "eval"),
    ),
    # 405B, 70B, Mixtral, 70B, 405B: 7,168 GPUs at their fixed sizes on 6,144
    pretraining=(0, 1, 2, 1, 0),
    restart_minutes=10.0,
    checkpoint_minutes=30.0,
    nodes_per_pod=3072 // GPUS_PER_NODE,
    failures_per_node_hour=LLAMA3_FAILURES_PER_NODE_HOUR,
    repair_hours=2.0,
    horizon_hours=24.0,
)

SCENARIOS = {"small": SMALL, "acme": ACME}
