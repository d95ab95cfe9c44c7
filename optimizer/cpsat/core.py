"""A minimal set of rules that conflict: CP-SAT's sufficient assumptions for infeasibility,
narrowed by a deletion filter.

Each rule is an assumption literal of a model without an objective (presolve would otherwise
prove infeasibility before search and blame every assumption). CP-SAT's core is sufficient
but not always minimal; the filter drops each rule the others still conflict without, so
every rule left is needed (one of the smallest conflicts, not necessarily the smallest)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ortools.sat.python import cp_model

# One solve of the model as it stands: (solver, status), raising the caller's CutShort when
# the solve ends unsettled (neither a solution nor a proof) or no time is left for it.
Settle = Callable[[], tuple[cp_model.CpSolver, cp_model.CpSolverStatus]]


def minimal_core(
    model: cp_model.CpModel, rules: Mapping[str, cp_model.IntVar], settle: Settle
) -> list[str] | None:
    """A minimal conflicting subset of `rules` (name -> assumption literal of `model`), in
    CP-SAT's order; None when the model is feasible under every rule."""
    solver = _infeasible_under(model, rules, list(rules), settle)
    if solver is None:
        return None
    by_index = {literal.index: name for name, literal in rules.items()}
    core = [by_index[i] for i in solver.sufficient_assumptions_for_infeasibility()]
    kept = list(core)
    for name in core:
        trial = [rule for rule in kept if rule != name]
        if _infeasible_under(model, rules, trial, settle) is not None:
            kept = trial
    return kept


def _infeasible_under(
    model: cp_model.CpModel, rules: Mapping[str, cp_model.IntVar], names: list[str], settle: Settle
) -> cp_model.CpSolver | None:
    """The solver if `model` is proved infeasible assuming `names`; None if it is feasible."""
    model.clear_assumptions()
    model.add_assumptions([rules[name] for name in names])
    solver, status = settle()
    return solver if status == cp_model.INFEASIBLE else None
