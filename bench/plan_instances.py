"""The planning benchmark's instances: real jobs (presets, standard profile) on clusters of
two or three GPU types with racks, each job's scaling curve priced by `optimize`."""

from __future__ import annotations

import random
from dataclasses import dataclass

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer import Request
from optimizer.planning import PlanJob, PlanProblem, Pool, Running


@dataclass(frozen=True)
class Template:
    model: str
    global_batch: int
    seq_len: int
    min_gpus: int
    max_gpus: int

    def request(self) -> Request:
        """The job's request, engine-agnostic, starting on one H100 node (the plan moves it)."""
        training = TrainingSpec(global_batch=self.global_batch, seq_len=self.seq_len)
        start = ClusterSpec(gpus=8, gpu=gpu_preset("h100-sxm"))
        job = TrainingJob(model=model_preset(self.model), cluster=start, training=training)
        return Request(job, engine=None)


BIG = {
    "405b": Template("llama3-405b", 2048, 8192, 1024, 8192),
    "70b": Template("llama3-70b", 1024, 8192, 128, 4096),
    "qwen72b": Template("qwen2.5-72b", 1024, 8192, 128, 2048),
    "mixtral": Template("mixtral-8x7b", 1024, 4096, 64, 2048),
    "8b": Template("llama3-8b", 512, 8192, 8, 512),
    "mistral": Template("mistral-7b", 512, 4096, 8, 512),
}


def cluster_16k() -> tuple[Pool, ...]:
    """16,384 GPUs: 1,024 H100 and 1,024 B200 nodes of 8, racks of 16, four nodes down."""
    return (
        Pool("h100", gpu_preset("h100-sxm"), 1024, 8, None, 16, frozenset({17, 300, 301, 777})),
        Pool("b200", gpu_preset("b200"), 1024, 8, None, 16),
    )


def eight_jobs(objective: str = "throughput") -> PlanProblem:
    """Eight jobs, two of them running (one pinned), on the 16,384-GPU cluster."""
    jobs = (
        _job("pretrain-405b", "405b", 3.0),
        _job("pretrain-70b", "70b", 2.0, Running("h100", tuple(range(0, 64)))),
        _job("sft-70b", "70b", 1.0),
        _job("qwen-72b", "qwen72b", 1.0),
        _job("mixtral", "mixtral", 1.0),
        _job("sft-8b", "8b", 1.0, Running("b200", tuple(range(0, 8))), movable=False),
        _job("eval-8b", "8b", 1.0),
        _job("mistral-7b", "mistral", 1.0),
    )
    return PlanProblem(cluster_16k(), jobs, objective)  # type: ignore[arg-type]


def _job(
    name: str, template: str, weight: float, running: Running | None = None, movable: bool = True
) -> PlanJob:
    t = BIG[template]
    return PlanJob(
        name, t.request(), weight, t.min_gpus, t.max_gpus, running=running, movable=movable
    )


SMALL_TEMPLATES = (
    Template("llama3-8b", 256, 8192, 8, 256),
    Template("llama3-8b", 1024, 4096, 8, 512),
    Template("mistral-7b", 256, 4096, 8, 256),
    Template("mistral-7b", 512, 8192, 8, 512),
    Template("llama3-70b", 512, 8192, 64, 512),
    Template("llama3-70b", 1024, 4096, 64, 512),
    Template("qwen2.5-72b", 512, 8192, 64, 512),
    Template("mixtral-8x7b", 512, 4096, 32, 512),
    Template("llama3-8b", 2048, 2048, 8, 512),
    Template("mistral-7b", 128, 8192, 8, 128),
)
# Sia's configurations on 8-GPU nodes are 1, 2, 4, 8 GPUs and then whole nodes; at whole
# nodes, 1 to 64 nodes by powers of two.
SIA_NODE_COUNTS = (1, 2, 4, 8, 16, 32, 64)


def hundred_jobs(seed: int = 7) -> PlanProblem:
    """100 jobs from ten templates on three GPU types (H100, A100, B200; 10,240 GPUs),
    counts only (Sia's problem size), a fifth of them running."""
    rng = random.Random(seed)
    pools = (
        Pool("h100", gpu_preset("h100-sxm"), 512, 8, None, 16),
        Pool("a100", gpu_preset("a100-80gb"), 512, 8, None, 16),
        Pool("b200", gpu_preset("b200"), 256, 8, None, 16),
    )
    jobs, free = [], {p.name: list(range(p.nodes)) for p in pools}
    for k in range(100):
        t = SMALL_TEMPLATES[rng.randrange(len(SMALL_TEMPLATES))]
        running = None
        if rng.random() < 0.2:
            pool = rng.choice(pools).name
            size = rng.choice((1, 2, 4, 8))
            if len(free[pool]) >= size:
                running = Running(pool, tuple(free[pool][:size]))
                free[pool] = free[pool][size:]
        jobs.append(
            PlanJob(
                f"job{k:03d}",
                t.request(),
                rng.choice((1.0, 1.0, 2.0)),
                t.min_gpus,
                t.max_gpus,
                SIA_NODE_COUNTS,
                running=running,
                restart_minutes=rng.choice((5.0, 10.0, 30.0)),
            )
        )
    return PlanProblem(pools, tuple(jobs), "fairness", assign_nodes=False)
