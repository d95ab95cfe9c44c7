"""Rules and what relaxing them buys, in words with the numbers."""

from __future__ import annotations

from optimizer.costmodel import Estimate
from optimizer.explain.budget import GB
from optimizer.results import Relaxation
from optimizer.search import (
    EVEN_STAGES,
    KV_HEADS,
    MEMORY_FIT,
    MEMORY_LIMIT,
    MIN_INTERLEAVED_PP,
    SearchProblem,
    fast_link_domain,
)


def _rule_words(problem: SearchProblem, name: str) -> str:
    """The rule in words with its numbers."""
    job = problem.job
    if name == MEMORY_LIMIT:
        return f"memory per device <= {_limit_words(problem)}"
    if name == MEMORY_FIT:
        return "the memory interval's upper end within the limit (search.memory_fit interval)"
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


def _limit_words(problem: SearchProblem) -> str:
    """The limit the estimate is held under, and where it comes from when it is a margin
    under the stated one."""
    fit = problem.memory_fit
    if fit is None or not fit.margin:
        return limit_gb_words(problem)
    return (
        f"{limit_gb_words(problem)} ({fit.limit_bytes / GB:g} GB / {fit.upper_ratio:.3f}: the "
        "memory interval's margin)"
    )


def limit_gb_words(problem: SearchProblem) -> str:
    """The limit the estimate is held under: as stated, or to the hundredth under a margin."""
    fit, limit_gb = problem.memory_fit, problem.memory_limit_bytes / GB
    return f"{limit_gb:.2f} GB" if fit is not None and fit.margin else f"{limit_gb:g} GB"


def point_fit_words(
    problem: SearchProblem, relaxed: Estimate | None, now: Estimate | None = None
) -> str:
    """What holding the estimate alone to the limit would buy (search.memory_fit point)."""
    fit = problem.memory_fit
    assert fit is not None
    rule = (
        f"the memory interval's margin binds: like runs measured up to {fit.upper_ratio:.3f} "
        f"times the estimate, so the estimate is held within "
        f"{fit.point_limit_bytes / GB:.2f} of {fit.limit_bytes / GB:.2f} GB"
    )
    if relaxed is None:
        return (
            f"the memory interval's margin ({fit.upper_ratio:.3f} times the estimate) does not "
            f"bind: no layout fits within {fit.limit_bytes / GB:.2f} GB even at the estimate"
        )
    at = f"{relaxed.summary()} at {relaxed.mfu:.2%} with {relaxed.memory.total / GB:.2f} GB"
    if now is None:
        return f"{rule}; at the estimate alone (search.memory_fit point) the best is {at}"
    return (
        f"{rule}; at the estimate alone (search.memory_fit point) the best is {at}, "
        f"{100 * (relaxed.mfu - now.mfu):.2f} points more (now {now.mfu:.2%} with "
        f"{now.memory.total / GB:.2f} GB)"
    )


def _relaxation_words(
    problem: SearchProblem,
    name: str,
    best: Estimate,
    relaxed: Estimate,
    step_up: Estimate | None = None,
) -> str:
    gain = f"the best is {relaxed.summary()} at {relaxed.mfu:.2%} (now {best.mfu:.2%})"
    if name == MEMORY_FIT:
        return point_fit_words(problem, relaxed, best)
    if name == MEMORY_LIMIT:
        words = f"memory binds: {best.memory.total / GB:.1f} of {_limit_words(problem)}; "
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
        MEMORY_LIMIT: f"the memory limit ({_limit_words(problem)})",
        MEMORY_FIT: "the memory interval's margin (search.memory_fit point)",
        "max_vpp": f"max_vpp ({problem.max_vpp})",
        "node_size": f"the node size ({fast_link_domain(problem)} GPUs)",
    }
    label = labels.get(name) or _rule_words(problem, name)
    words = f"relaxing {label} would not raise MFU (best stays {best.mfu:.2%})"
    return Relaxation(name, words, None, None, binds=False)
