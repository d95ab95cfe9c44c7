"""What each of the optimum's less common choices buys: the best layout without it.

The optimiser picks context parallelism, interleaving, a zero-bubble or DualPipe schedule,
ZeRO-3, recomputation or expert parallelism whenever the cost model says they pay. Each is
something more to run and debug, and its gain may be smaller than the model's own error
(docs/validation.md). So the answer prices each one: the best layout of the same request
without it, and the MFU points given up. When nothing fits without it, it is needed.

Where `explain` relaxes the request's rules (what would help), this restricts the optimum's
choices (what each one is worth); both re-solve the same model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from models.layout import Layout, Recompute, Schedule
from optimizer.costmodel import CostAssumptions, Estimate, evaluate, recompute_code, schedule_code
from optimizer.results import Choice
from optimizer.search import (
    Pricing,
    SearchProblem,
    SolveSettings,
    best_layout,
    best_layout_by_ceilings,
    narrow_to_rules,
)

# A layout without the choice must trail the optimum by more than this to count as a cost.
TIES_RELATIVE = 1e-7


@dataclass(frozen=True)
class Simpler:
    """One choice: whether a layout makes it, in words, and the request without it."""

    name: str
    knob: str  # the request field that, when the user fixed it, leaves nothing to price
    uses: Callable[[Layout], bool]
    words: Callable[[Layout], str]
    forbid: Callable[[SearchProblem], SearchProblem]


def _fix(problem: SearchProblem, knob: str, value: int) -> SearchProblem:
    return replace(problem, fixed={**problem.fixed, knob: value})


def _allow(problem: SearchProblem, knob: str, keep: Callable[[int], bool]) -> SearchProblem:
    allowed = tuple(value for value in problem.allowed[knob] if keep(value))
    return replace(problem, allowed={**problem.allowed, knob: allowed})


ONE_F_ONE_B = schedule_code(Schedule.ONE_F_ONE_B)
NO_RECOMPUTE = recompute_code(Recompute.NONE)


def _above_one(name: str, knob: str, what: str) -> Simpler:
    """A degree the optimum raised above 1 (cp, ep, vpp): without it, the degree is 1."""
    return Simpler(
        name,
        knob,
        lambda lay: getattr(lay, knob) > 1,
        lambda lay: f"{what} ({knob} {getattr(lay, knob)})",
        lambda problem: _fix(problem, knob, 1),
    )


def _off_default(name: str, knob: str, default: Schedule | Recompute, code: int) -> Simpler:
    """A knob the optimum moved off its plainest value (1F1B, no recompute): without it,
    only that value (its `code` in the search's tables) is allowed."""
    return Simpler(
        name,
        knob,
        lambda lay: getattr(lay, knob) != default,
        lambda lay: f"{getattr(lay, knob).value} {knob}",
        lambda problem: _allow(problem, knob, lambda value: value == code),
    )


SIMPLER: tuple[Simpler, ...] = (
    _above_one("context_parallel", "cp", "context parallelism"),
    _above_one("expert_parallel", "ep", "expert parallelism"),
    _off_default("schedule", "schedule", Schedule.ONE_F_ONE_B, ONE_F_ONE_B),
    _above_one("interleaving", "vpp", "interleaving"),
    Simpler(
        "zero3",
        "zero",
        lambda lay: lay.zero == 3,
        lambda lay: "ZeRO-3",
        lambda problem: _allow(problem, "zero", lambda stage: stage < 3),
    ),
    _off_default("recompute", "recompute", Recompute.NONE, NO_RECOMPUTE),
)


def _open_to_the_solver(problem: SearchProblem, simpler: Simpler) -> bool:
    """The user left this choice to the solver: did not fix the knob, and allows both it and
    the plainer value (only zero-bubble allowed leaves no 1F1B layout to compare with)."""
    if simpler.knob in problem.fixed:
        return False
    if simpler.knob not in problem.allowed:
        return True
    return (
        0 < len(simpler.forbid(problem).allowed[simpler.knob]) < len(problem.allowed[simpler.knob])
    )


def choice_spaces(problem: SearchProblem) -> tuple[SearchProblem, ...]:
    """The spaces `choices` may search: the request without each choice left to the solver
    (which of them it searches depends on the optimum)."""
    return tuple(
        narrow_to_rules(simpler.forbid(problem))
        for simpler in SIMPLER
        if _open_to_the_solver(problem, simpler)
    )


def choices(
    problem: SearchProblem,
    best: Estimate,
    assumptions: CostAssumptions,
    settings: Callable[[], SolveSettings | None],
    pricing: Pricing | None = None,
) -> tuple[tuple[Choice, ...], bool]:
    """Each less common choice of `best` the solver made, with the best layout without it;
    and whether every one was settled within the budget (`settings()` is None when spent).
    Each space's optimum is found by MFU ceilings, or, given `pricing`, over its whole table
    (a mask of rows `pricing` holds): the same layout."""
    found: list[Choice] = []
    for simpler in SIMPLER:
        if not (simpler.uses(best.layout) and _open_to_the_solver(problem, simpler)):
            continue
        budget = settings()
        if budget is None:
            return tuple(found), False
        without_it = narrow_to_rules(simpler.forbid(problem))
        if pricing is None:
            answer = best_layout_by_ceilings(without_it, assumptions, budget)
        else:
            answer = best_layout(without_it, assumptions, budget, pricing=pricing)
        what = simpler.words(best.layout)
        if answer.layout is None:
            if not answer.proved:
                return tuple(found), False
            found.append(Choice(simpler.name, f"{what} is needed: nothing fits without it"))
            continue
        other = evaluate(problem.job, answer.layout, problem.profile, assumptions)
        found.append(Choice(simpler.name, _words(what, best, other), other.mfu, other))
    return tuple(found), True


def _words(what: str, best: Estimate, other: Estimate) -> str:
    if other.mfu >= best.mfu * (1 - TIES_RELATIVE):
        return f"{what} buys nothing: without it {other.summary()} ties at {other.mfu:.2%}"
    points = (best.mfu - other.mfu) * 100
    return (
        f"{what} buys {points:.2f} points: without it the best is {other.summary()} "
        f"at {other.mfu:.2%} (now {best.mfu:.2%})"
    )
