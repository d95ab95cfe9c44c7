"""For a request nothing satisfies: a minimal set of its rules that conflict (the kernel's
`minimal_core`), each in words with the numbers."""

from __future__ import annotations

from ortools.sat.python import cp_model

from models.layout import Layout
from optimizer import cpsat
from optimizer.costmodel import CostAssumptions
from optimizer.cpsat import CutShort
from optimizer.explain.budget import GB, Budget, priced
from optimizer.explain.words import _rule_words, limit_gb_words
from optimizer.results import Conflict
from optimizer.search import (
    MAX_TERM,
    MEMORY_LIMIT,
    LayoutModel,
    Pricing,
    SearchProblem,
    Tables,
    new_solver,
    rule_names,
)


def _settled_solve(
    layout_model: LayoutModel, budget: Budget
) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus]:
    """One solve within what is left of the budget; CutShort when nothing is left or the
    solve ends unsettled (neither a solution nor a proof)."""
    settings = budget.settings()
    if settings is None:
        raise CutShort()
    solver = new_solver(settings)
    return solver, cpsat.settled_solve(solver, layout_model.model, settings.stop)


def _least_memory(tables: Tables, enforced: set[str], budget: Budget) -> Layout | None:
    """The layout of least memory under the `enforced` rules."""
    layout_model = LayoutModel(tables)
    for name, literal in layout_model.rules.items():
        layout_model.model.add(literal == int(name in enforced))
    layout_model.model.minimize(layout_model.memory)
    solver, status = _settled_solve(layout_model, budget)
    return None if status == cp_model.INFEASIBLE else layout_model.layout(solver)


def conflict(
    problem: SearchProblem, assumptions: CostAssumptions, budget: Budget, pricing: Pricing
) -> tuple[Conflict, ...]:
    """A minimal set of the request's rules that no layout satisfies together; CutShort
    when the budget runs out first. The wide model's table comes from `pricing`, which holds
    the optimum's rows already."""
    job = problem.job
    if len(problem.degrees) == 0:
        model, batch = job.model, job.training.global_batch
        return (
            Conflict(
                "degrees",
                f"no tp * pp * cp * dp = gpus({job.cluster.gpus}) with tp dividing "
                f"num_attention_heads({model.num_attention_heads}), pp <= "
                f"num_layers({model.num_layers}) and dp * micro_batch dividing "
                f"global_batch({batch})",
            ),
        )
    tables = pricing.tables(problem, deadline=budget.deadline, stop=budget.stop)
    alone = _broken_by_every_layout(tables)
    if alone is not None:  # a rule no layout keeps is a minimal conflict by itself
        return (Conflict(alone, _every_layout_breaks(problem, alone)),)
    layout_model = LayoutModel(tables)  # no objective: presolve would otherwise blame all
    core = cpsat.minimal_core(
        layout_model.model, layout_model.rules, lambda: _settled_solve(layout_model, budget)
    )
    if core is None:
        return ()  # a false INFEASIBLE earlier would show up here as no conflict
    return tuple(_conflict_item(problem, tables, name, core, assumptions, budget) for name in core)


def _broken_by_every_layout(tables: Tables) -> str | None:
    """An engine rule that every layout of the search breaks (e.g. a model the engine has
    no config for), found on the table of whole layouts without a solve."""
    for table in tables.tables:
        for name, broken in table.breaks.items():
            if broken.size and broken.all():
                return name
    return None


def _every_layout_breaks(problem: SearchProblem, name: str) -> str:
    """The rule in words, with what its first candidate breaks (for a rule about the model,
    such as an engine's named configs, what every candidate breaks)."""
    words = _rule_words(problem, name)
    rule = problem.engine_rules.get(name)
    if rule is None or not len(problem.degrees):
        return words
    tp, pp, cp, dp = (int(v) for v in problem.degrees[0])
    return f"{words}: {rule.detail(problem.job, Layout(tp=tp, pp=pp, cp=cp, dp=dp))}"


def _conflict_item(
    problem: SearchProblem,
    tables: Tables,
    name: str,
    core: list[str],
    assumptions: CostAssumptions,
    budget: Budget,
) -> Conflict:
    words = _rule_words(problem, name)
    if name != MEMORY_LIMIT:
        return Conflict(name, words)
    # Knob allowances outside the conflict are let go (the conflict stands without them);
    # the degree rules stay, so the layout shown is one the request could otherwise take.
    # Failing that, the rest of a minimal conflict alone holds together.
    rules = set(rule_names(tables)) - {name}
    kept = {rule for rule in rules if rule in core or not rule.endswith("_allowed")}
    least = _least_memory(tables, kept, budget) or _least_memory(tables, set(core) - {name}, budget)
    if least is None:
        return Conflict(name, words)
    estimate = priced(problem, least, assumptions)
    memory = estimate.memory
    if max(memory.weights, memory.gradients, memory.optimizer, memory.activations) >= MAX_TERM:
        # the solver held such parts at MAX_TERM: this layout is one of many beyond it
        return Conflict(
            name,
            f"{words}: every layout needs more than {MAX_TERM / GB:,.0f} GB per device "
            f"(e.g. {estimate.summary()}: {memory.total / GB:,.0f} GB)",
        )
    return Conflict(
        name,
        f"{words}: even the least-memory layout ({estimate.summary()}) "
        f"needs {memory.total / GB:.1f} GB > {limit_gb_words(problem)}",
    )
