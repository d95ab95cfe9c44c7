"""Why the optimum is what it is: slack per constraint, the value of relaxing each rule, and,
for an infeasible request, a minimal set of rules that conflict, in words with the numbers.

"Binding" in a discrete problem is not zero slack (cpsat-notes.md): a rule binds when the
optimum without it has a higher MFU. Relaxed optima are the value of relaxing a rule, not
layouts to use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from ortools.sat.python import cp_model

from models.errors import InvalidSpec
from models.layout import Layout
from optimizer.assumptions import CostAssumptions
from optimizer.choices import choices
from optimizer.cost_model import evaluate
from optimizer.cpsat_model import LayoutModel
from optimizer.cpsat_solve import (
    MIN_SOLVE_S,
    SolveSettings,
    best_layout,
    least_memory_beating,
    new_solver,
    run_solver,
    solve_best,
)
from optimizer.cpsat_tables import MAX_TERM, CutShort, Tables, build_tables
from optimizer.enumerator import EVEN_STAGES, KV_HEADS, MEMORY_LIMIT, MIN_INTERLEAVED_PP
from optimizer.estimate import Estimate
from optimizer.search import Choice, Conflict, Relaxation, Slack
from optimizer.space import SearchProblem, fast_link_domain, narrowed
from optimizer.stopping import StopSignal

GB = 1e9
CUT_SHORT = "the time limit ran out before every explanation was worked out: some are missing"
# A relaxed optimum must beat the optimum by more than the solver's scaling to count.
BINDS_RELATIVE = 1e-7


def priced(problem: SearchProblem, layout: Layout, assumptions: CostAssumptions) -> Estimate:
    return evaluate(problem.job, layout, problem.profile, assumptions)


def _rule_words(problem: SearchProblem, name: str) -> str:
    """The rule in words with its numbers."""
    job = problem.job
    if name == MEMORY_LIMIT:
        return f"memory per device <= {problem.memory_limit_bytes / GB:g} GB"
    if name == KV_HEADS:
        return f"tp divides num_kv_heads({job.model.num_kv_heads})"
    if name == EVEN_STAGES:
        return f"even pipeline stages: pp * vpp divides num_layers({job.model.num_layers})"
    if name == MIN_INTERLEAVED_PP:
        return f"interleaving (vpp > 1) needs pp >= {problem.min_interleaved_pp}"
    if name.startswith("fixed_"):
        knob = name.removeprefix("fixed_")
        return f"{knob} fixed at {problem.fixed[knob]}"
    if name == "zero_allowed":
        return f"ZeRO stages limited to {list(problem.allowed['zero'])}"
    if name == "recompute_allowed":
        from optimizer.grid import RECOMPUTE_CODES

        modes = [RECOMPUTE_CODES[code].value for code in problem.allowed["recompute"]]
        return f"recompute limited to {modes}"
    if name == "schedule_allowed":
        from optimizer.grid import SCHEDULE_CODES

        schedules = [SCHEDULE_CODES[code].value for code in problem.allowed["schedule"]]
        return f"pipeline schedules limited to {schedules}"
    if name == "max_vpp":
        return f"at most {problem.max_vpp} interleaved chunks (max_vpp)"
    if name == "node_size":
        return f"NVLink domains of {fast_link_domain(problem)} GPUs"
    return name


def _relaxed_problems(problem: SearchProblem) -> dict[str, SearchProblem]:
    """Rules relaxed by widening the space rather than dropping a literal."""
    wider_vpp = problem.max_vpp * 2
    cluster = problem.job.cluster
    doubled = {"gpus_per_node": cluster.gpus_per_node * 2}
    if cluster.nvlink_domain is not None:
        doubled["nvlink_domain"] = cluster.nvlink_domain * 2
    bigger_node = problem.job.model_copy(update={"cluster": cluster.model_copy(update=doubled)})
    return {
        "max_vpp": replace(
            problem,
            knobs={**problem.knobs, "vpp": tuple(range(1, wider_vpp + 1))},
            max_vpp=wider_vpp,
        ),
        "node_size": replace(problem, job=bigger_node),
    }


def _relaxation_words(
    problem: SearchProblem,
    name: str,
    best: Estimate,
    relaxed: Estimate,
    step_up: Estimate | None = None,
) -> str:
    gain = f"the best is {relaxed.summary()} at {relaxed.mfu:.2%} (now {best.mfu:.2%})"
    if name == MEMORY_LIMIT:
        words = f"memory binds: {best.memory.total / GB:.1f} of {problem.memory_limit_bytes / GB:g} GB; "
        if step_up is not None and step_up.memory.total < relaxed.memory.total:
            return (
                words + f"with {step_up.memory.total / GB:.1f} GB the best is {step_up.summary()} "
                f"at {step_up.mfu:.2%} (now {best.mfu:.2%}); without the limit, "
                f"{relaxed.mfu:.2%} at {relaxed.memory.total / GB:.1f} GB"
            )
        return words + f"with {relaxed.memory.total / GB:.1f} GB {gain}"
    if name == "max_vpp":
        return f"max_vpp binds: with up to {problem.max_vpp * 2} chunks {gain}"
    if name == "node_size":
        nodes = fast_link_domain(problem)
        return f"node size binds: with NVLink domains of {nodes * 2} GPUs {gain}"
    return f"{_rule_words(problem, name)} binds: without it {gain}"


@dataclass(frozen=True)
class Budget:
    """What is left of the caller's time limit, handed out solve by solve; nothing once the
    caller's stop signal is set."""

    deadline: float  # time.perf_counter() value
    workers: int
    stop: StopSignal = field(default_factory=StopSignal)

    def settings(self) -> SolveSettings | None:
        remaining_s = self.deadline - time.perf_counter()
        if remaining_s <= MIN_SOLVE_S or self.stop.stopped:
            return None
        return SolveSettings(remaining_s, self.workers, self.stop)


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


def relaxations(
    problem: SearchProblem, best: Estimate, assumptions: CostAssumptions, budget: Budget
) -> tuple[tuple[Relaxation, ...], bool]:
    """Each relaxable rule of the request, whether relaxing it raises the best MFU and, if so,
    what it would buy; and whether every rule was tried within the budget."""
    tables = build_tables(problem, assumptions, deadline=budget.deadline, stop=budget.stop)
    layout_model = LayoutModel(tables)
    tries: list[tuple[str, SearchProblem | None]] = [(rule, None) for rule in layout_model.rules]
    tries += list(_relaxed_problems(problem).items())
    found = {}
    for rule, wider in tries:
        settings = budget.settings()
        if settings is None:
            break
        if wider is None:
            found[rule] = (problem, solve_best(layout_model, settings, frozenset({rule})))
        else:
            found[rule] = (wider, best_layout(narrowed(wider), assumptions, settings))
    judged = [_not_binding(problem, KV_HEADS, best)] if _kv_rule_idle(problem, layout_model) else []
    # A rule is unsettled when time ran out before a layout (relaxing only widens a feasible
    # space) or, for a verdict of "does not bind", before the proof that nothing beats it.
    unsettled = 0
    for rule, (space, answer) in found.items():
        relaxed = None if answer.layout is None else priced(space, answer.layout, assumptions)
        if relaxed is not None and relaxed.mfu > best.mfu * (1 + BINDS_RELATIVE):
            step_up = None
            if rule == MEMORY_LIMIT:
                step_up = _smallest_step_up(problem, layout_model, best, assumptions, budget)
            words = _relaxation_words(problem, rule, best, relaxed, step_up)
            judged.append(Relaxation(rule, words, relaxed.mfu, relaxed, step_up=step_up))
        elif relaxed is not None and answer.proved:
            judged.append(_not_binding(problem, rule, best))
        else:
            unsettled += 1
    return tuple(judged), len(found) == len(tries) and not unsettled


def _smallest_step_up(
    problem: SearchProblem,
    layout_model: LayoutModel,
    best: Estimate,
    assumptions: CostAssumptions,
    budget: Budget,
) -> Estimate | None:
    """Without the memory limit, the layout of least memory that beats the optimum: the
    smallest raise of the limit that buys anything (the next frontier point up)."""
    settings = budget.settings()
    if settings is None:
        return None
    found = least_memory_beating(layout_model, settings, best.mfu, frozenset({MEMORY_LIMIT}))
    if found.layout is None:
        return None
    step_up = priced(problem, found.layout, assumptions)
    return step_up if step_up.mfu > best.mfu * (1 + BINDS_RELATIVE) else None


def _kv_rule_idle(problem: SearchProblem, layout_model: LayoutModel) -> bool:
    """The request keeps the KV-head rule, but every candidate tp already meets it (so the
    model holds no literal for it): relaxing it cannot help."""
    return problem.require_kv_divisibility and KV_HEADS not in layout_model.rules


def _not_binding(problem: SearchProblem, name: str, best: Estimate) -> Relaxation:
    labels = {
        MEMORY_LIMIT: f"the memory limit ({problem.memory_limit_bytes / GB:g} GB)",
        "max_vpp": f"max_vpp ({problem.max_vpp})",
        "node_size": f"the node size ({fast_link_domain(problem)} GPUs)",
    }
    label = labels.get(name) or _rule_words(problem, name)
    words = f"relaxing {label} would not raise MFU (best stays {best.mfu:.2%})"
    return Relaxation(name, words, None, None, binds=False)


def slacks(problem: SearchProblem, best: Estimate) -> tuple[Slack, ...]:
    """Distance of the optimum from each bound, in the bound's unit."""
    job, lay = problem.job, best.layout
    layers, node = job.model.num_layers, fast_link_domain(problem)
    limit_gb, memory_gb = problem.memory_limit_bytes / GB, best.memory.total / GB
    span = lay.group_span("tp")
    rows = [
        ("memory_limit", memory_gb, limit_gb, "GB", "memory per device"),
        ("pipeline_layers", lay.pp, layers, "stages", "pipeline stages <= layers"),
        ("chunk_layers", lay.pp * lay.vpp, layers, "chunks", "pp * vpp chunks <= layers"),
        ("max_vpp", lay.vpp, problem.max_vpp, "chunks", "interleaved chunks <= max_vpp"),
        ("node_size", span, node, "GPUs", "tensor-parallel group span <= NVLink domain"),
    ]
    return tuple(
        Slack(name, float(value), float(limit), float(limit - value), unit, words)
        for name, value, limit, unit, words in rows
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
    status = run_solver(solver, layout_model.model, settings)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE):
        raise CutShort()
    return solver, status


def _minimal_core(layout_model: LayoutModel, core: list[str], budget: Budget) -> list[str]:
    """Drop each rule whose removal leaves the rest still infeasible (deletion filter)."""
    kept = list(core)
    for name in core:
        trial = [rule for rule in kept if rule != name]
        layout_model.model.clear_assumptions()
        layout_model.model.add_assumptions([layout_model.rules[r] for r in trial])
        if _settled_solve(layout_model, budget)[1] == cp_model.INFEASIBLE:
            kept = trial
    return kept


def _least_memory(tables: Tables, enforced: set[str], budget: Budget) -> Layout | None:
    """The layout of least memory under the `enforced` rules."""
    layout_model = LayoutModel(tables)
    for name, literal in layout_model.rules.items():
        layout_model.model.add(literal == int(name in enforced))
    layout_model.model.minimize(layout_model.memory)
    solver, status = _settled_solve(layout_model, budget)
    return None if status == cp_model.INFEASIBLE else layout_model.layout(solver)


def conflict(
    problem: SearchProblem, assumptions: CostAssumptions, budget: Budget
) -> tuple[Conflict, ...]:
    """A minimal set of the request's rules that no layout satisfies together; CutShort
    when the budget runs out first."""
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
    tables = build_tables(problem, assumptions, deadline=budget.deadline, stop=budget.stop)
    layout_model = LayoutModel(tables)  # no objective: presolve would otherwise blame all
    layout_model.model.add_assumptions(list(layout_model.rules.values()))
    solver, status = _settled_solve(layout_model, budget)
    if status != cp_model.INFEASIBLE:
        return ()  # a false INFEASIBLE earlier would show up here as no conflict
    by_index = {literal.index: name for name, literal in layout_model.rules.items()}
    core = [by_index[i] for i in solver.sufficient_assumptions_for_infeasibility()]
    core = _minimal_core(layout_model, core, budget)
    return tuple(_conflict_item(problem, tables, name, core, assumptions, budget) for name in core)


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
    rules = set(LayoutModel(tables).rules) - {name}
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
        f"needs {memory.total / GB:.1f} GB > {problem.memory_limit_bytes / GB:g} GB",
    )
