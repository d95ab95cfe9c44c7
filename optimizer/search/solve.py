"""Solving the CP-SAT layout model: the settings, the best layout (most MFU, then the
tie-break), and one frontier point. The model itself is in cpsat_model.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ortools.sat.python import cp_model

from models.layout import Layout
from optimizer import cpsat
from optimizer.costmodel import CostAssumptions
from optimizer.cpsat import Budget, CutShort, StopSignal
from optimizer.search.enumerator import frontier_rows
from optimizer.search.model import LayoutModel
from optimizer.search.pricing import Pricing
from optimizer.search.problem import SearchProblem
from optimizer.search.tables import NoLayouts, Tables
from optimizer.search.terms import LN_MFU_SCALE


@dataclass(frozen=True)
class SolveSettings:
    time_limit_s: float = 10.0
    workers: int = 1
    stop: StopSignal = field(default_factory=StopSignal)  # set from outside: stop now

    def with_time_limit(self, time_limit_s: float) -> SolveSettings:
        return replace(self, time_limit_s=time_limit_s)

    def budget(self) -> Budget:
        """The settings' time from now on: a deadline and the stop signal."""
        return Budget.starting_now(self.time_limit_s, self.stop)

    def within(self, budget: Budget) -> SolveSettings:
        """These settings with what is left of `budget`."""
        return self.with_time_limit(budget.left_s())


@dataclass(frozen=True)
class Found:
    """A solve's answer: the layout (None if none), and whether the answer is proved."""

    layout: Layout | None
    proved: bool  # optimality when a layout came back, infeasibility when none did
    solves: int
    memory_bytes: int | None = None
    ln_mfu: int | None = None  # the solver's objective, LN_MFU_SCALE * ln(MFU) rounded
    # The solver's proved upper bound on ln(MFU) (same units), where it has one: with a
    # layout short of its proof, how much better any layout could be.
    bound_ln_mfu: int | None = None


def choosable_model(tables: Tables, relaxed: frozenset[str] = frozenset()) -> LayoutModel:
    """The model of a search of `tables` that relaxes `relaxed`, over only the rows it can
    choose: those no row allowed without the relaxed rules beats (frontier_rows)."""
    return LayoutModel(frontier_rows(tables, relaxed))


def new_solver(settings: SolveSettings) -> cp_model.CpSolver:
    """The kernel's solver (cpsat.new_solver) with settings measured on these table models
    (docs/performance.md, "## Solver"):
    - presolve off: it cost more than it saved, and with probing level 0 OR-Tools 9.15's
      presolve wrongly proved one frontier step infeasible (cf. google/or-tools#5274);
    - no root probing: it took 1.2 s of 1.7 s on profile standard's one-table model;
    - fixed search over `add_search_order`'s rows, best first; the LP relaxation off;
    - no symmetry detection: it cost 15% of a solve of the plate's standard model (46 -> 39
      ms) and found nothing to use; the answer does not depend on it, since the tie-break
      solves order every layout.
    """
    solver = cpsat.new_solver(settings.time_limit_s, settings.workers)
    parameters = solver.parameters
    parameters.cp_model_presolve = False
    parameters.cp_model_probing_level = 0
    parameters.search_branching = cp_model.FIXED_SEARCH
    parameters.linearization_level = 0
    parameters.symmetry_level = 0
    return solver


def _solve(
    layout_model: LayoutModel, settings: SolveSettings
) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus]:
    """One solve of the model as staged, stoppable by `settings.stop`."""
    solver = new_solver(settings)
    return solver, cpsat.solve(solver, layout_model.model, settings.stop)


def solve_best(
    layout_model: LayoutModel,
    settings: SolveSettings,
    relaxed: frozenset[str] = frozenset(),
    memory_cap_bytes: int | None = None,
    must_beat_mfu: float | None = None,
) -> Found:
    """Maximise ln(MFU); then, at that value, least memory and the tie-break rank. With
    `must_beat_mfu`, a first solve proving that no layout reaches it ends there: the layout
    is then one of the ties, not the tie-break's (a caller asking whether anything beats an
    MFU needs no more; the tie-break solve cost as much as the first)."""
    budget = settings.budget()
    layout_model.enforce(relaxed)
    layout_model.cap_memory(memory_cap_bytes)
    layout_model.stage_most_mfu()
    solver, status = _solve(layout_model, settings)
    if status == cp_model.INFEASIBLE:
        return Found(None, True, 1)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Found(None, False, 1, bound_ln_mfu=cpsat.objective_bound(solver))
    proved = status == cp_model.OPTIMAL
    best_ln_mfu = int(round(solver.value(layout_model.ln_mfu_value)))
    bound = best_ln_mfu if proved else cpsat.objective_bound(solver)
    first = Found(
        layout_model.layout(solver),
        False,
        1,
        layout_model.memory_bytes(solver),
        best_ln_mfu,
        bound,
    )
    if proved and _short_of(layout_model, best_ln_mfu, must_beat_mfu):
        return replace(first, proved=True)
    last = solver
    for stage in range(len(layout_model.tie_break)):
        layout_model.stage_tie_break(best_ln_mfu, last, stage)
        tie_solver, tie_status = _solve(layout_model, settings.within(budget))
        if tie_status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return replace(first, solves=first.solves + stage + 1)
        proved = proved and tie_status == cp_model.OPTIMAL
        last = tie_solver
    return Found(
        layout_model.layout(last),
        proved,
        1 + len(layout_model.tie_break),
        layout_model.memory_bytes(last),
        best_ln_mfu,
        bound,
    )


def _short_of(layout_model: LayoutModel, ln_mfu: int, mfu: float | None) -> bool:
    """Whether every layout of the proved most `ln_mfu` has a true MFU below `mfu`: each
    tabulated ln term is rounded by at most half a unit, and one unit more covers the cost
    model's floats (evaluate against the grid)."""
    if mfu is None:
        return False
    rounding = 0.5 * layout_model.ln_mfu_term_count() + 1
    return ln_mfu + rounding < LN_MFU_SCALE * math.log(mfu)


def frontier_point(
    layout_model: LayoutModel, settings: SolveSettings, memory_cap_bytes: int | None
) -> Found:
    """The layout of most ln(MFU) under the cap, and least memory (to the MB) at it."""
    if not layout_model.frontier_in_one_solve:
        return solve_best(layout_model, settings, memory_cap_bytes=memory_cap_bytes)
    layout_model.enforce()
    layout_model.cap_memory(memory_cap_bytes)
    layout_model.stage_frontier_point()
    return solve_once(layout_model, settings)


def solve_once(layout_model: LayoutModel, settings: SolveSettings) -> Found:
    """One solve of the model as staged, read back."""
    solver, status = _solve(layout_model, settings)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Found(None, status == cp_model.INFEASIBLE, 1)
    return Found(
        layout_model.layout(solver),
        status == cp_model.OPTIMAL,
        1,
        layout_model.memory_bytes(solver),
        int(solver.value(layout_model.ln_mfu_value)),
    )


def best_layout(
    problem: SearchProblem,
    assumptions: CostAssumptions,
    settings: SolveSettings,
    relaxed: frozenset[str] = frozenset(),
    pricing: Pricing | None = None,
    must_beat_mfu: float | None = None,
) -> Found:
    """The best layout of `problem`, its tables from the request's `pricing` when given
    (rows another search of the request priced are not priced again)."""
    if len(problem.degrees) == 0:
        return Found(None, True, 0)
    budget = settings.budget()
    pricing = pricing or Pricing(problem, assumptions)
    try:
        tables = pricing.tables(problem, deadline=budget.deadline, stop=budget.stop)
        layout_model = choosable_model(tables, relaxed)
    except NoLayouts:
        return Found(None, True, 0)
    except CutShort:
        return Found(None, False, 0)
    return solve_best(layout_model, settings.within(budget), relaxed, must_beat_mfu=must_beat_mfu)


# How much better, in the solver's ln(MFU) units, a layout must be to count as a step up:
# above the rounding of the tabulated terms (each rounds by at most half a unit).
STEP_UP_LN_MFU = 100


def least_memory_beating(
    layout_model: LayoutModel,
    settings: SolveSettings,
    mfu: float,
    relaxed: frozenset[str] = frozenset(),
) -> Found:
    """The layout of least memory whose MFU beats `mfu`: the smallest step up the frontier,
    i.e. how much more memory it takes to do better at all."""
    layout_model.enforce(relaxed)
    layout_model.cap_memory(None)
    low, high = layout_model.ln_mfu_bounds()
    floor = math.ceil(LN_MFU_SCALE * math.log(mfu)) + STEP_UP_LN_MFU
    if floor > high:
        return Found(None, True, 0)
    layout_model.stage_least_memory_above(max(floor, low))
    return solve_once(layout_model, settings)
