"""The CP-SAT kernel under the three solver stacks: the budget's arithmetic, a stopped solve,
and the minimal conflict of a toy model whose minimal set is known by hand."""

from __future__ import annotations

import time

import pytest
from ortools.sat.python import cp_model

from optimizer.cpsat import (
    MIN_SOLVE_S,
    READ_BACK_S,
    Budget,
    CutShort,
    StopSignal,
    minimal_core,
    new_solver,
    objective_bound,
    settled_solve,
    solve,
)


def test_budget_limit_is_the_time_left_less_the_read_back() -> None:
    budget = Budget.starting_now(2.0)
    # 2 s left, less 0.01 s kept for the read-back; a share takes a part of that
    assert 1.9 < budget.solve_limit_s() <= 2.0 - READ_BACK_S
    assert 0.9 < budget.solve_limit_s(share=0.5) <= (2.0 - READ_BACK_S) / 2
    assert budget.can_solve and not budget.expired


def test_a_spent_budget_solves_nothing_but_still_gives_a_floor() -> None:
    budget = Budget(time.perf_counter() - 1.0)  # a deadline a second ago
    assert budget.left_s() == 0.0
    assert budget.expired and not budget.can_solve
    assert budget.solve_limit_s() == MIN_SOLVE_S  # for callers that solve anyway


def test_too_little_left_is_no_solve() -> None:
    # READ_BACK_S + MIN_SOLVE_S is what a solve needs; half of it is too little
    budget = Budget.starting_now((READ_BACK_S + MIN_SOLVE_S) / 2)
    assert not budget.can_solve


def test_a_stopped_budget_is_expired_however_far_its_deadline() -> None:
    stop = StopSignal()
    budget = Budget.starting_now(60.0, stop)
    stop.stop()
    assert budget.expired and not budget.can_solve


def _hard_model() -> cp_model.CpModel:
    """Pigeons into holes, one too many: a solve that ran would answer INFEASIBLE, so
    UNKNOWN can only mean it never started."""
    model = cp_model.CpModel()
    pigeons, holes = 13, 12
    sits = [
        [model.new_bool_var(f"pigeon_{p}_in_{h}") for h in range(holes)] for p in range(pigeons)
    ]
    for p in range(pigeons):
        model.add_exactly_one(sits[p])
    for h in range(holes):
        model.add_at_most_one(sits[p][h] for p in range(pigeons))
    return model


def test_new_solver_sets_the_shared_parameters() -> None:
    solver = new_solver(0.0, 2, seed=7)
    assert solver.parameters.max_time_in_seconds == MIN_SOLVE_S  # never below the floor
    assert solver.parameters.num_workers == 2
    assert solver.parameters.random_seed == 7
    assert not solver.parameters.catch_sigint_signal


def test_a_stopped_solve_returns_unknown_at_once() -> None:
    stop = StopSignal()
    stop.stop()
    solver = new_solver(30.0, 1)
    start = time.perf_counter()
    assert solve(solver, _hard_model(), stop) == cp_model.UNKNOWN
    assert time.perf_counter() - start < 1.0
    with pytest.raises(CutShort):
        settled_solve(new_solver(30.0, 1), _hard_model(), stop)


def test_objective_bound_of_a_proved_maximum() -> None:
    model = cp_model.CpModel()
    x = model.new_int_var(0, 7, "x")
    model.add(2 * x <= 9)  # x <= 4.5, so at most 4
    model.maximize(x)
    solver = new_solver(5.0, 1)
    assert solve(solver, model, StopSignal()) == cp_model.OPTIMAL
    assert objective_bound(solver) == 4


def _toy_rules() -> tuple[cp_model.CpModel, dict[str, cp_model.IntVar]]:
    """x in 0..10 under five rules, each enforced by its literal: at_least_0: x >= 0;
    even: x = 2k; at_least_6: x >= 6; at_most_8: x <= 8; at_most_3: x <= 3.
    Only at_least_6 and at_most_3 clash: without at_most_3, x = 6 keeps the rest; without
    at_least_6, x = 0 does. So {at_least_6, at_most_3} is the one minimal conflict."""
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    k = model.new_int_var(0, 5, "k")
    rules = {
        name: model.new_bool_var(name)
        for name in ("at_least_0", "even", "at_least_6", "at_most_8", "at_most_3")
    }
    model.add(x >= 0).only_enforce_if(rules["at_least_0"])
    model.add(x == 2 * k).only_enforce_if(rules["even"])
    model.add(x >= 6).only_enforce_if(rules["at_least_6"])
    model.add(x <= 8).only_enforce_if(rules["at_most_8"])
    model.add(x <= 3).only_enforce_if(rules["at_most_3"])
    return model, rules


def _settle(model: cp_model.CpModel) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus]:
    solver = new_solver(5.0, 1)
    return solver, settled_solve(solver, model, StopSignal())


def test_minimal_core_of_a_toy_infeasible_model() -> None:
    model, rules = _toy_rules()
    core = minimal_core(model, rules, lambda: _settle(model))
    assert core is not None
    assert sorted(core) == ["at_least_6", "at_most_3"]
    # minimal: without any one of its rules the rest hold together
    for name in core:
        model.clear_assumptions()
        model.add_assumptions([rules[r] for r in core if r != name])
        assert _settle(model)[1] in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def test_minimal_core_of_a_feasible_model_is_none() -> None:
    model, rules = _toy_rules()
    del rules["at_least_6"]
    assert minimal_core(model, rules, lambda: _settle(model)) is None
