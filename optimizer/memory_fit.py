"""The rule a search holds a layout's memory to (the request's `search.memory_fit`).

A layout "fits" when the upper end of its memory interval is within the limit (`interval`,
the default): like runs measured up to `upper_ratio` times the estimate (the published runs'
misses of the job's regime, optimizer.uncertainty), so a layout at the estimate's last
gigabyte would fail on some of them. The ratio depends on the job, engine and precision
alone, so the rule is the point estimate held under the limit over it, known before the
search. `point` holds the estimate alone to the limit, as `evaluate`'s `fits` does (an
audited run that trained near capacity is not priced as not fitting). A profile without
intervals (workshop) has no ratio: its rule is the point estimate, and the answer says so.
"""

from __future__ import annotations

from optimizer.costmodel import Estimate
from optimizer.request import Request
from optimizer.search import MemoryFit, SearchProblem, held_to
from optimizer.uncertainty import RESIDUALS_PROFILE, memory_basis, memory_upper_ratio

GB = 1e9


def memory_fit_of(request: Request, limit_bytes: float) -> MemoryFit:
    """The rule the request holds its layouts' memory to, under the stated `limit_bytes`."""
    if request.space.memory_fit == "point":
        return MemoryFit("point", limit_bytes)
    if request.profile != RESIDUALS_PROFILE:
        note = (
            f"profile {request.profile} gives no memory interval, so the estimate alone is "
            "held to the limit"
        )
        return MemoryFit("point", limit_bytes, note=note)
    upper = memory_upper_ratio(request.job, request.engine_name, request.job.training.precision)
    if upper is None:
        note = "no published run like this one reports its peak memory, so the estimate alone is held to the limit"
        return MemoryFit("point", limit_bytes, note=note)
    ratio, basis = upper
    # an upper end under the estimate leaves the estimate itself to hold to the limit
    return MemoryFit("interval", limit_bytes, max(1.0, ratio), basis)


def held_to_request(problem: SearchProblem, request: Request) -> SearchProblem:
    """`problem` (its limit as resolve_space states it) under the request's memory rule."""
    return held_to(problem, memory_fit_of(request, problem.memory_limit_bytes))


def memory_fit_words(fit: MemoryFit) -> str:
    """The rule in words with its numbers."""
    limit_gb = fit.limit_bytes / GB
    if fit.rule == "interval":
        return (
            f"the memory interval's upper end within {limit_gb:.2f} GB, so the estimate within "
            f"{fit.point_limit_bytes / GB:.2f} GB (like runs measured up to "
            f"{fit.upper_ratio:.3f} times the estimate: {fit.basis})"
        )
    return f"the memory estimate within {limit_gb:.2f} GB" + (f" ({fit.note})" if fit.note else "")


def memory_margin_warning(estimate: Estimate) -> tuple[str, ...]:
    """A layout that fits at the point estimate but not at its memory interval's upper end
    says so, and by how much."""
    if not estimate.fits or estimate.fits_interval is not False:  # None: no memory interval
        return ()
    interval, memory = estimate.interval, estimate.memory
    assert interval is not None and interval.memory_gb is not None
    high_gb, capacity_gb = interval.memory_gb[1], memory.capacity / GB
    return (
        f"memory: {memory.total / GB:.2f} of {capacity_gb:.2f} GB at the estimate, but like "
        f"runs measured up to {high_gb:.2f} GB ({memory_basis(interval.basis)}): "
        'the searches\' default rule (search.memory_fit "interval") would not choose it',
    )
