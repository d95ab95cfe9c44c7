"""How far the chosen layout is from each bound, in the bound's unit. Slack is not binding:
in a discrete search a rule may bind with slack left (cpsat-notes.md)."""

from __future__ import annotations

from optimizer.costmodel import Estimate
from optimizer.explain.budget import GB
from optimizer.results import Slack
from optimizer.search import SearchProblem, fast_link_domain


def slacks(problem: SearchProblem, best: Estimate) -> tuple[Slack, ...]:
    """Distance of the optimum from each bound, in the bound's unit."""
    job, lay = problem.job, best.layout
    layers, node = job.model.num_layers, fast_link_domain(problem)
    limit_gb, memory_gb = problem.memory_limit_bytes / GB, best.memory.total / GB
    span = lay.group_span("tp")
    fit, memory_words = problem.memory_fit, "memory per device"
    if fit is not None and fit.margin:  # the limit is the stated one over the interval's ratio
        memory_words += f", x{fit.upper_ratio:.3f} within {fit.limit_bytes / GB:.2f} GB"
    rows = [
        ("memory_limit", memory_gb, limit_gb, "GB", memory_words),
        ("pipeline_layers", lay.pp, layers, "stages", "pipeline stages <= layers"),
        ("chunk_layers", lay.pp * lay.vpp, layers, "chunks", "pp * vpp chunks <= layers"),
        ("max_vpp", lay.vpp, problem.max_vpp, "chunks", "interleaved chunks <= max_vpp"),
        ("node_size", span, node, "GPUs", "tensor-parallel group span <= NVLink domain"),
    ]
    return tuple(
        Slack(name, float(value), float(limit), float(limit - value), unit, words)
        for name, value, limit, unit, words in rows
    )
