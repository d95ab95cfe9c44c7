"""The stage search: the layout and stage plan of least step time, over every layout of the
request's space and every plan of each (layers per rank, recompute per rank), with a proof.

Branch and bound over layouts: every layout's even plan is priced at once (the incumbent is
the best that fits); every other layout gets a lower bound over all its plans (bounds.py);
layouts are solved by CP-SAT (model.py) in the order of their bounds until the next bound
is no better than the best plan found. Every layout is then solved or pruned: the answer is
proved optimal up to the solver's rounding (tables.py), and its figures are the cost
model's (`price_plan_terms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from models.job import TrainingJob
from models.layout import Layout
from models.stage_plan import StagePlan
from optimizer import cpsat
from optimizer.costmodel import RECOMPUTE_CODES, CostAssumptions, LayoutGrid
from optimizer.costmodel import stage_plans as sp
from optimizer.cpsat import Budget
from optimizer.results import Status, status_of
from optimizer.search import MemoryFit, SearchProblem, SolveSettings
from optimizer.staging.bounds import least_busy_units, step_bound_s
from optimizer.staging.model import StageModel
from optimizer.staging.tables import plan_tables, with_dp_tables, with_least_dp


@dataclass(frozen=True)
class Candidate:
    """One layout (a grid row; its recompute mode left to the plan) and the modes it may
    use; the Layout object is built only for the few that are solved."""

    row: int
    modes: tuple[int, ...]
    bound_s: float


@dataclass(frozen=True)
class PlanFound:
    layout: Layout
    plan: StagePlan
    price: sp.PlanPrice


@dataclass(frozen=True)
class StageSearch:
    """What the search did: the best plan, whether it is proved, and its counts."""

    best: PlanFound | None
    even_best: PlanFound | None  # the best even split at one mode (what the layout search sees)
    proved: bool
    layouts: int  # layouts searched (recompute apart)
    space_size: int  # stage plans over them
    solved: int  # layouts examined one by one (capacity count, bounds, CP-SAT)
    pruned: int  # layouts whose bound proved them no better
    rounding: float  # the solver's largest relative rounding of a fraction
    wall_s: float = 0.0
    memory_fit: MemoryFit | None = None  # the rule each rank's memory was held to

    @property
    def status(self) -> Status:
        """What was proved, in the searches' words."""
        return status_of(self.best is not None, self.proved)


# A layout is its row's columns but recompute, which the plan chooses per rank.
LAYOUT_COLUMNS = ("tp", "pp", "cp", "dp", "vpp", "micro_batch", "zero", "placement")


@dataclass(frozen=True)
class Candidates:
    """Layouts best bound first, as arrays: a Candidate is made only when reached."""

    rows: np.ndarray
    mode_masks: np.ndarray
    bounds_s: np.ndarray

    def __len__(self) -> int:
        return int(self.rows.size)

    def __getitem__(self, i: int) -> Candidate:
        modes = _mode_codes(int(self.mode_masks[i]))
        return Candidate(int(self.rows[i]), modes, float(self.bounds_s[i]))


def group_candidates(grid: LayoutGrid, bounds_s: np.ndarray, rows: np.ndarray) -> Candidates:
    """The rows' layouts with recompute set apart, best bound first: one candidate per
    layout, with the modes its rows allow and the least of their bounds."""
    columns = [getattr(grid, f)[rows] for f in LAYOUT_COLUMNS]
    columns += [grid.schedule_codes[rows], grid.expert_parallel[rows]]
    _, first, inverse = np.unique(
        np.stack(columns, axis=1), axis=0, return_index=True, return_inverse=True
    )
    inverse = inverse.reshape(-1)
    bound = np.full(first.size, np.inf)
    np.minimum.at(bound, inverse, bounds_s[rows])
    modes = np.zeros(first.size, dtype=np.int64)
    np.bitwise_or.at(modes, inverse, 1 << grid.recompute[rows])
    order = np.argsort(bound, kind="stable")
    return Candidates(rows[first[order]], modes[order], bound[order])


def _mode_codes(mask: int) -> tuple[int, ...]:
    return tuple(m for m in range(len(RECOMPUTE_CODES)) if mask >> m & 1)


def solve_candidate(
    job: TrainingJob,
    a: CostAssumptions,
    layout: Layout,
    modes: tuple[int, ...],
    uniform: bool,
    memory_limit_bytes: float,
    settings: SolveSettings,
    incumbent_s: float | None = None,
) -> tuple[PlanFound | None, bool, float]:
    """(the layout's best plan, or None if none fits or none beats `incumbent_s` seconds;
    proved; rounding) within the settings' time."""
    terms = sp.plan_terms(job, a, layout)
    # cheapest first: the capacity count and a bound without data-parallel terms, then with
    # their least, then the tables the solver needs
    tables = plan_tables(job, a, terms, modes, memory_limit_bytes, False, False)
    busy = least_busy_units(tables, uniform)
    if busy is None:  # no plan fits: proved by the capacity count, no solve needed
        return None, True, tables.rounding
    for with_least in (False, True):
        if with_least:
            tables = with_least_dp(job, a, terms, tables)
        if incumbent_s is not None and step_bound_s(tables, busy) >= incumbent_s:
            return None, True, tables.rounding  # no plan beats the incumbent
    tables = with_dp_tables(job, a, terms, tables)
    stage = StageModel(tables, uniform)
    solver = cpsat.new_solver(settings.time_limit_s, settings.workers)
    status = cpsat.solve(solver, stage.model, settings.stop)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, status == cp_model.INFEASIBLE, tables.rounding
    layers, modes = stage.read(solver)
    plan = StagePlan(layers=layers, recompute=tuple(RECOMPUTE_CODES[m] for m in modes))
    found = PlanFound(layout, plan, sp.price_plan_terms(job, a, terms, plan))
    return found, status == cp_model.OPTIMAL, tables.rounding


def branch_and_bound(
    problem: SearchProblem,
    a: CostAssumptions,
    grid: LayoutGrid,
    candidates: Candidates,
    incumbent: PlanFound | None,
    uniform: bool,
    budget: Budget,
    workers: int,
) -> tuple[PlanFound | None, bool, int, int, float]:
    """(best, proved, solved, pruned, rounding): candidates in bound order until the next
    bound cannot beat the incumbent, or the time is out (then not proved)."""
    best, solved, rounding, proved = incumbent, 0, 0.0, True
    for i in range(len(candidates)):
        candidate = candidates[i]
        if best is not None and candidate.bound_s >= best.price.step_time_s:
            return best, proved, solved, len(candidates) - i, rounding
        if budget.expired:
            return best, False, solved, 0, rounding
        settings = SolveSettings(budget.solve_limit_s(), workers, budget.stop)
        layout = grid.layout(candidate.row)
        found, done, r = solve_candidate(
            problem.job,
            a,
            layout,
            candidate.modes,
            uniform,
            problem.memory_limit_bytes,
            settings,
            None if best is None else best.price.step_time_s,
        )
        solved, rounding, proved = solved + 1, max(rounding, r), proved and done
        if found is not None and (best is None or found.price.step_time_s < best.price.step_time_s):
            best = found
    return best, proved, solved, 0, rounding
