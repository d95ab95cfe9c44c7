"""Why the optimum is what it is, in words with the numbers: what relaxing each rule would
buy (relaxations.py), what each of the optimum's less common choices buys (choices.py), the
slack of each bound (slack.py), and for an infeasible request the smallest set of rules that
conflict (conflicts.py). Each re-solves the search's model within the caller's budget.

Other rooms import from this module only.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.errors import InvalidSpec
from optimizer.costmodel import CostAssumptions, Estimate
from optimizer.cpsat import CutShort
from optimizer.explain.budget import CUT_SHORT, Budget, priced
from optimizer.explain.choices import choice_spaces, choices
from optimizer.explain.conflicts import conflict
from optimizer.explain.relaxations import point_fit_when_none, relaxations, wide_tables
from optimizer.explain.slack import slacks
from optimizer.results import Choice, Conflict, Relaxation, Slack
from optimizer.search import Pricing, SearchProblem, narrow_to_rules

__all__ = [
    "CUT_SHORT",
    "EXPLANATIONS_SKIPPED",
    "Budget",
    "Explanation",
    "explain",
    "priced",
    "searched_spaces",
]

# How the warning of an explanation not attempted begins (the spaces it would search are over
# the tables' size guard), as against CUT_SHORT's time limit.
EXPLANATIONS_SKIPPED = "explanations skipped"


@dataclass(frozen=True)
class Explanation:
    relaxations: tuple[Relaxation, ...] = ()
    slack: tuple[Slack, ...] = ()
    conflict: tuple[Conflict, ...] = ()
    warnings: tuple[str, ...] = ()
    choices: tuple[Choice, ...] = ()
    # what was not worked out because its space is over the tables' size guard, each with why
    # ("max_vpp not relaxed: search space too large: ..."); each also has its warning
    skipped: tuple[str, ...] = ()

    @property
    def binding(self) -> tuple[Relaxation, ...]:
        return tuple(relaxation for relaxation in self.relaxations if relaxation.binds)


def searched_spaces(problem: SearchProblem) -> tuple[SearchProblem, ...]:
    """Every space an optimum and its explanations search when each is priced whole, declared
    up front so that one `Pricing` prices their shared layouts once: the optimum's, the wide
    model of the relaxations and conflicts, the choices' narrower ones."""
    return (narrow_to_rules(problem), problem, *choice_spaces(problem))


def explain(
    problem: SearchProblem,
    best: Estimate | None,
    assumptions: CostAssumptions,
    budget: Budget,
    pricing: Pricing | None = None,
) -> Explanation:
    """Slack and relaxations for an optimum; a minimal conflict when there is none, and
    under the memory interval's margin the best layout with the estimate alone held to the
    limit.

    Without `pricing`, only the layouts that can change an answer are priced: the wide
    model's rows whose MFU ceiling reaches the optimum (relaxations.wide_tables), and each
    choice's space by MFU ceilings (choices.py). With one (a Pricing of searched_spaces),
    every table is a mask of rows priced whole: the reference the floored explanations are
    tested against (tests/test_pricing_reuse.py). A conflict needs every row of the wide
    model: it is priced whole either way."""
    try:
        if best is None:
            pricing = pricing or Pricing(problem, assumptions, searched_spaces(problem))
            # first: a layout at the estimate alone is worth more to the user than the conflict
            point = point_fit_when_none(problem, assumptions, budget)
            conflicting = conflict(problem, assumptions, budget, pricing)
            return Explanation(relaxations=point, conflict=conflicting)
        if pricing is None:
            tables = wide_tables(problem, best, assumptions, budget)
        else:
            tables = pricing.tables(problem, deadline=budget.deadline, stop=budget.stop)
        tried, complete, too_large = relaxations(problem, best, assumptions, budget, tables)
    # the wider spaces the explanations search are too large, or their tables outlast the time
    except (InvalidSpec, CutShort) as error:
        slack = () if best is None else slacks(problem, best)
        if isinstance(error, CutShort):
            return Explanation(slack=slack, warnings=(CUT_SHORT,))
        return Explanation(
            slack=slack,
            warnings=_skipped_warnings((error.message,)),
            skipped=(f"every explanation: {error.message}",),
        )
    bought, settled = choices(problem, best, assumptions, budget.settings, pricing)
    return Explanation(
        relaxations=tried,
        slack=slacks(problem, best),
        warnings=_skipped_warnings(too_large) + (() if complete and settled else (CUT_SHORT,)),
        choices=bought,
        skipped=tuple(too_large),
    )


def _skipped_warnings(skipped: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(f"{EXPLANATIONS_SKIPPED}: {why}" for why in skipped)
