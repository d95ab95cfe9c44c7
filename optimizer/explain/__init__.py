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
from optimizer.explain.budget import CUT_SHORT, Budget, priced
from optimizer.explain.choices import choice_spaces, choices
from optimizer.explain.conflicts import conflict
from optimizer.explain.relaxations import relaxations
from optimizer.explain.slack import slacks
from optimizer.results import Choice, Conflict, Relaxation, Slack
from optimizer.search import CutShort, Pricing, SearchProblem, narrowed

__all__ = ["CUT_SHORT", "Budget", "Explanation", "explain", "priced", "searched_spaces"]


@dataclass(frozen=True)
class Explanation:
    relaxations: tuple[Relaxation, ...] = ()
    slack: tuple[Slack, ...] = ()
    conflict: tuple[Conflict, ...] = ()
    warnings: tuple[str, ...] = ()
    choices: tuple[Choice, ...] = ()

    @property
    def binding(self) -> tuple[Relaxation, ...]:
        return tuple(relaxation for relaxation in self.relaxations if relaxation.binds)


def searched_spaces(problem: SearchProblem) -> tuple[SearchProblem, ...]:
    """Every space an optimum and its explanations may search, declared up front so that
    one `Pricing` prices their shared layouts once: the optimum's, the wide model of the
    relaxations and conflicts, the choices' narrower ones. (The relaxations' wider spaces are
    searched only where a layout's MFU ceiling beats the optimum: relaxations._beyond.)"""
    return (narrowed(problem), problem, *choice_spaces(problem))


def explain(
    problem: SearchProblem,
    best: Estimate | None,
    assumptions: CostAssumptions,
    budget: Budget,
    pricing: Pricing | None = None,
) -> Explanation:
    """Slack and relaxations for an optimum; a minimal conflict when there is none. Tables
    come from `pricing`, the request's (one that prices afresh when None)."""
    pricing = pricing or Pricing(problem, assumptions, searched_spaces(problem))
    try:
        if best is None:
            return Explanation(conflict=conflict(problem, assumptions, budget, pricing))
        tried, complete = relaxations(problem, best, assumptions, budget, pricing)
    # the wider spaces the explanations search are too large, or their tables outlast the time
    except (InvalidSpec, CutShort) as error:
        why = (
            f"explanations skipped: {error.message}"
            if isinstance(error, InvalidSpec)
            else CUT_SHORT
        )
        return Explanation(slack=() if best is None else slacks(problem, best), warnings=(why,))
    bought, settled = choices(problem, best, assumptions, budget.settings, pricing)
    return Explanation(
        relaxations=tried,
        slack=slacks(problem, best),
        warnings=() if complete and settled else (CUT_SHORT,),
        choices=bought,
    )
