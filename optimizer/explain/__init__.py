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
from optimizer.explain.choices import choices
from optimizer.explain.conflicts import conflict
from optimizer.explain.relaxations import relaxations
from optimizer.explain.slack import slacks
from optimizer.results import Choice, Conflict, Relaxation, Slack
from optimizer.search import CutShort, SearchProblem

__all__ = ["CUT_SHORT", "Budget", "Explanation", "explain", "priced"]


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


def explain(
    problem: SearchProblem, best: Estimate | None, assumptions: CostAssumptions, budget: Budget
) -> Explanation:
    """Slack and relaxations for an optimum; a minimal conflict when there is none."""
    try:
        if best is None:
            return Explanation(conflict=conflict(problem, assumptions, budget))
        tried, complete = relaxations(problem, best, assumptions, budget)
    # the wider spaces the explanations search are too large, or their tables outlast the time
    except (InvalidSpec, CutShort) as error:
        why = (
            f"explanations skipped: {error.message}"
            if isinstance(error, InvalidSpec)
            else CUT_SHORT
        )
        return Explanation(slack=() if best is None else slacks(problem, best), warnings=(why,))
    bought, settled = choices(problem, best, assumptions, budget.settings)
    return Explanation(
        relaxations=tried,
        slack=slacks(problem, best),
        warnings=() if complete and settled else (CUT_SHORT,),
        choices=bought,
    )
