"""Rules and what relaxing them buys, in words with the numbers."""

from __future__ import annotations

from optimizer.costmodel import Estimate
from optimizer.explain.budget import GB
from optimizer.results import Relaxation
from optimizer.search import (
    EVEN_STAGES,
    KV_HEADS,
    MEMORY_LIMIT,
    MIN_INTERLEAVED_PP,
    SearchProblem,
    fast_link_domain,
)


def _rule_words(problem: SearchProblem, name: str) -> str:
    """The rule in words with its numbers."""
    job = problem.job
    if name == MEMORY_LIMIT:
        return f"memory per device <= {problem.memory_limit_bytes / GB:g} GB"
    if name == KV_HEADS:
        return f"tp divides num_kv_heads({job.model.num_kv_heads})"
    if name == EVEN_STAGES:
        return f"even pipeline stages: pp * vpp divides num_layers({job.model.num_layers})"
    if name == MIN_INTERLEAVED_PP:
        return f"interleaving (vpp > 1) needs pp >= {problem.min_interleaved_pp}"
    if name.startswith("fixed_"):
        knob = name.removeprefix("fixed_")
        return f"{knob} fixed at {problem.fixed[knob]}"
    if name == "zero_allowed":
        return f"ZeRO stages limited to {list(problem.allowed['zero'])}"
    if name == "recompute_allowed":
        from optimizer.costmodel import RECOMPUTE_CODES

        modes = [RECOMPUTE_CODES[code].value for code in problem.allowed["recompute"]]
        return f"recompute limited to {modes}"
    if name == "schedule_allowed":
        from optimizer.costmodel import SCHEDULE_CODES

        schedules = [SCHEDULE_CODES[code].value for code in problem.allowed["schedule"]]
        return f"pipeline schedules limited to {schedules}"
    if name == "max_vpp":
        return f"at most {problem.max_vpp} interleaved chunks (max_vpp)"
    if name == "node_size":
        return f"NVLink domains of {fast_link_domain(problem)} GPUs"
    if name in problem.engine_rules:
        return problem.engine_rules[name].description
    return name


def _relaxation_words(
    problem: SearchProblem,
    name: str,
    best: Estimate,
    relaxed: Estimate,
    step_up: Estimate | None = None,
) -> str:
    gain = f"the best is {relaxed.summary()} at {relaxed.mfu:.2%} (now {best.mfu:.2%})"
    if name == MEMORY_LIMIT:
        words = f"memory binds: {best.memory.total / GB:.1f} of {problem.memory_limit_bytes / GB:g} GB; "
        if step_up is not None and step_up.memory.total < relaxed.memory.total:
            return (
                words + f"with {step_up.memory.total / GB:.1f} GB the best is {step_up.summary()} "
                f"at {step_up.mfu:.2%} (now {best.mfu:.2%}); without the limit, "
                f"{relaxed.mfu:.2%} at {relaxed.memory.total / GB:.1f} GB"
            )
        return words + f"with {relaxed.memory.total / GB:.1f} GB {gain}"
    if name == "max_vpp":
        return f"max_vpp binds: with up to {problem.max_vpp * 2} chunks {gain}"
    if name == "node_size":
        nodes = fast_link_domain(problem)
        return f"node size binds: with NVLink domains of {nodes * 2} GPUs {gain}"
    return f"{_rule_words(problem, name)} binds: without it {gain}"


def _not_binding(problem: SearchProblem, name: str, best: Estimate) -> Relaxation:
    labels = {
        MEMORY_LIMIT: f"the memory limit ({problem.memory_limit_bytes / GB:g} GB)",
        "max_vpp": f"max_vpp ({problem.max_vpp})",
        "node_size": f"the node size ({fast_link_domain(problem)} GPUs)",
    }
    label = labels.get(name) or _rule_words(problem, name)
    words = f"relaxing {label} would not raise MFU (best stays {best.mfu:.2%})"
    return Relaxation(name, words, None, None, binds=False)
