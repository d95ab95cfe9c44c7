"""What relaxing each rule of the request would buy: the best layout without it, re-solved
on the same model with the rule's enforcement literal let go (or the space widened, for
max_vpp and the node size; the memory interval's margin is relaxed on the same model, the
memory limit's literal let go and memory capped at the stated limit: search.memory_fit
point). Only layouts whose MFU ceiling reaches the optimum are priced
(optimizer/search/ceilings.py): a relaxed optimum that binds beats the optimum, and every
layout left out falls short of it.

"Binding" in a discrete problem is not zero slack (cpsat-notes.md): a rule binds when the
optimum without it has a higher MFU. Relaxed optima are the value of relaxing a rule, not
layouts to use.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from models.errors import InvalidSpec
from optimizer.costmodel import CostAssumptions, Estimate
from optimizer.explain.budget import Budget, priced
from optimizer.explain.words import _not_binding, _relaxation_words, point_fit_words
from optimizer.results import Relaxation
from optimizer.search import (
    EVEN_STAGES,
    KV_HEADS,
    MAX_EXPLAIN_CEILING_CELLS,
    MEMORY_FIT,
    MEMORY_LIMIT,
    MIN_INTERLEAVED_PP,
    Found,
    NoLayouts,
    SearchProblem,
    SolveSettings,
    Tables,
    at_point,
    best_layout_above,
    best_layout_by_ceilings,
    build_tables,
    choosable_model,
    engine_rules_broken,
    least_memory_beating,
    narrow_to_rules,
    placement_classes,
    reaching_problem,
    rule_names,
    solve_best,
    tie_floor,
    time_is_up,
)

# A relaxed optimum must beat the optimum by more than the solver's scaling to count.
BINDS_RELATIVE = 1e-7


def wide_tables(
    problem: SearchProblem, best: Estimate, assumptions: CostAssumptions, budget: Budget
) -> Tables:
    """The wide model's tables (the request's rules as literals) over the rows whose MFU
    ceiling reaches the optimum: each rule's relaxed optimum, if it binds, is among them, and
    so is each layout the memory limit's step up may name. Where nothing reaches it (the
    optimum's row always does, as the floor keeps what might tie with it), priced whole."""
    cut_short = partial(time_is_up, budget.deadline, budget.stop)
    try:
        # only the tuples whose ceiling reaches the optimum: the size guard counts those alone
        floored = reaching_problem(
            problem, assumptions, tie_floor(best.mfu), cut_short, MAX_EXPLAIN_CEILING_CELLS
        )
        return build_tables(floored, assumptions, deadline=budget.deadline, stop=budget.stop)
    except NoLayouts:
        return build_tables(problem, assumptions, deadline=budget.deadline, stop=budget.stop)


def _relaxed_problems(problem: SearchProblem) -> dict[str, SearchProblem]:
    """Rules relaxed by widening the space rather than dropping a literal."""
    wider_vpp = problem.max_vpp * 2
    cluster = problem.job.cluster
    doubled = {"gpus_per_node": cluster.gpus_per_node * 2}
    if cluster.nvlink_domain is not None or cluster.gpu.nvlink_domain_gpus is not None:
        doubled["nvlink_domain"] = cluster.nvlink_domain_size * 2
    bigger_node = problem.job.model_copy(update={"cluster": cluster.model_copy(update=doubled)})
    return {
        "max_vpp": replace(
            problem,
            knobs={**problem.knobs, "vpp": tuple(range(1, wider_vpp + 1))},
            max_vpp=wider_vpp,
        ),
        "node_size": replace(problem, job=bigger_node),
    }


def _has_margin(problem: SearchProblem) -> bool:
    return problem.memory_fit is not None and problem.memory_fit.margin


def _stated_limit_bytes(problem: SearchProblem) -> int | None:
    """The limit the memory interval's margin is taken under: relaxing the margin holds the
    estimate to it (the wide tables hold rows over the memory limit, for its relaxation)."""
    return None if problem.memory_fit is None else int(problem.memory_fit.limit_bytes)


def point_fit_when_none(
    problem: SearchProblem, assumptions: CostAssumptions, budget: Budget
) -> tuple[Relaxation, ...]:
    """For a request with no layout under the memory interval's margin: the best layout with
    the estimate alone held to the limit, if any (none where the request has no margin or
    the time is up)."""
    settings = budget.settings()
    if not _has_margin(problem) or settings is None:
        return ()
    point = at_point(problem)
    found = best_layout_by_ceilings(narrow_to_rules(point), assumptions, settings)
    if found.layout is None:
        if not found.proved:
            return ()
        return (Relaxation(MEMORY_FIT, point_fit_words(problem, None), None, None, binds=False),)
    relaxed = priced(point, found.layout, assumptions)
    return (Relaxation(MEMORY_FIT, point_fit_words(problem, relaxed), relaxed.mfu, relaxed),)


def _beyond(
    rule: str,
    wider: SearchProblem,
    problem: SearchProblem,
    assumptions: CostAssumptions,
    settings: SolveSettings,
    binds_above: float,
) -> Found:
    """The best layout of a widened space that beats `binds_above`, the optimum's MFU: its
    tables hold only the rows whose MFU ceiling reaches it (a floored search,
    optimizer/search/ceilings.py), so none coming back, proved, means the relaxation buys
    nothing. max_vpp's space is searched over its extra chunks alone: its others are the
    request's, which the optimum already beats."""
    space = narrow_to_rules(wider)
    if rule == "max_vpp":
        extra = tuple(vpp for vpp in space.knobs["vpp"] if vpp > problem.max_vpp)
        if not extra:
            return Found(None, True, 0)
        space = replace(space, knobs={**space.knobs, "vpp": extra})
    return best_layout_above(space, assumptions, settings, binds_above)


def relaxations(
    problem: SearchProblem,
    best: Estimate,
    assumptions: CostAssumptions,
    budget: Budget,
    tables: Tables,
) -> tuple[tuple[Relaxation, ...], bool, tuple[str, ...]]:
    """Each relaxable rule of the request, whether relaxing it raises the best MFU and, if so,
    what it would buy; whether every rule was settled within the budget; and, for each
    widened space too large to search, why (the others are still judged). `tables` are the
    wide model's (wide_tables, or every row): it names the rules, each re-solved over the
    rows it may then choose; an engine rule that some layout breaks but no row of the
    tables (only layouts below the floor) does not bind. max_vpp and the node size widen
    the space instead: only its rows whose MFU ceiling beats the optimum are priced
    (_beyond)."""
    with_literals = rule_names(tables)
    # the tables may hold only some of the problem's tuples: its rules are tested on them all
    beneath = engine_rules_broken(problem, placement_classes(problem)) - set(with_literals)
    rules = _named_in_order(problem, with_literals, beneath)
    tries: list[tuple[str, SearchProblem | None]] = [(rule, None) for rule in rules]
    if _has_margin(problem):  # the same rows, their memory held to the stated limit instead
        tries.append((MEMORY_FIT, None))
    tries += list(_relaxed_problems(problem).items())
    found = {}
    too_large: list[str] = []
    # a relaxed optimum short of this does not bind: no tie-break needed to say so
    binds_above = best.mfu * (1 + BINDS_RELATIVE)
    for rule, wider in tries:
        settings = budget.settings()
        if settings is None:
            break
        if rule in beneath:  # nothing reaching the optimum breaks it: nothing to solve
            found[rule] = (problem, Found(None, True, 0))
        elif wider is None:
            dropped = frozenset({MEMORY_LIMIT if rule == MEMORY_FIT else rule})
            cap = _stated_limit_bytes(problem) if rule == MEMORY_FIT else None
            rows = choosable_model(tables, dropped)
            found[rule] = (problem, solve_best(rows, settings, dropped, cap, binds_above))
        else:
            try:
                answer = _beyond(rule, wider, problem, assumptions, settings, binds_above)
            except InvalidSpec as error:  # the widened space is over the tables' size guard
                too_large.append(f"{rule} not relaxed: {error.message}")
                continue
            found[rule] = (wider, answer)
    judged = [_not_binding(problem, KV_HEADS, best)] if _kv_rule_idle(problem, rules) else []
    # A rule is unsettled when time ran out before a layout (relaxing only widens a feasible
    # space) or, for a verdict of "does not bind", before the proof that nothing beats it.
    unsettled = 0
    for rule, (space, answer) in found.items():
        relaxed = _priced_answer(space, answer, problem, best, assumptions)
        if relaxed is not None and relaxed.mfu > binds_above:
            step_up = None
            if rule == MEMORY_LIMIT:
                step_up = _smallest_step_up(problem, tables, best, assumptions, budget)
            words = _relaxation_words(problem, rule, best, relaxed, step_up)
            judged.append(Relaxation(rule, words, relaxed.mfu, relaxed, step_up=step_up))
        elif answer.proved and (relaxed is not None or space is not problem or rule in beneath):
            # a widened space's search is floored at the optimum: nothing back, nothing beats it
            judged.append(_not_binding(problem, rule, best))
        else:
            unsettled += 1
    settled = len(found) + len(too_large) == len(tries) and not unsettled
    return tuple(judged), settled, tuple(too_large)


def _priced_answer(
    space: SearchProblem,
    answer: Found,
    problem: SearchProblem,
    best: Estimate,
    assumptions: CostAssumptions,
) -> Estimate | None:
    """The relaxed optimum priced in its space; the optimum itself when it came back (most
    rules that do not bind), without pricing it again."""
    if answer.layout is None:
        return None
    if space is problem and answer.layout == best.layout:
        return best
    return priced(space, answer.layout, assumptions)


def _named_in_order(
    problem: SearchProblem, rules: tuple[str, ...], beneath: frozenset[str]
) -> tuple[str, ...]:
    """The rules as a wide model over every row names them: those with a literal, and the
    engine rules only rows below the floor break, in the engine's order among its others."""
    engine = [name for name in problem.engine_rules if name in rules or name in beneath]
    first = [rule for rule in rules if rule in (KV_HEADS, EVEN_STAGES, MIN_INTERLEAVED_PP)]
    rest = [rule for rule in rules if rule not in first and rule not in engine]
    return (*first, *engine, *rest)


def _smallest_step_up(
    problem: SearchProblem,
    tables: Tables,
    best: Estimate,
    assumptions: CostAssumptions,
    budget: Budget,
) -> Estimate | None:
    """Without the memory limit, the layout of least memory that beats the optimum: the
    smallest raise of the limit that buys anything (the next frontier point up)."""
    settings = budget.settings()
    if settings is None:
        return None
    unlimited = frozenset({MEMORY_LIMIT})
    layout_model = choosable_model(tables, unlimited)
    found = least_memory_beating(layout_model, settings, best.mfu, unlimited)
    if found.layout is None:
        return None
    step_up = priced(problem, found.layout, assumptions)
    return step_up if step_up.mfu > best.mfu * (1 + BINDS_RELATIVE) else None


def _kv_rule_idle(problem: SearchProblem, rules: tuple[str, ...]) -> bool:
    """The request keeps the KV-head rule, but every tp of the tables meets it (so the model
    holds no literal for it): every candidate tp, or every one of a tuple whose ceiling
    reaches the optimum (wide_tables). Relaxing it cannot help."""
    return problem.require_kv_divisibility and KV_HEADS not in rules
