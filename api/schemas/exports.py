"""What the request's engine says of an answer's layout: each of its rules the layout breaks
(as warnings, the estimate's figures untouched) and the artefact that runs the layout on it
(`export`), or why it cannot (`export_error`).

HTTP, CLI and client share these, so every answer says the same of the same layout.
"""

from __future__ import annotations

from collections.abc import Sequence

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout
from optimizer import Estimate, OptimizeResult, ParetoResult
from optimizer.engines import Artefact, engine_placed, export, get_engine, violations

from .answers import (
    EstimateOut,
    ExportOut,
    OptimizeOut,
    ParetoOut,
    estimate_out,
    optimize_out,
    pareto_out,
)
from .requests import EvaluateRequest, PlanRequest, SearchRequest


def export_out(artefact: Artefact) -> ExportOut:
    return ExportOut(
        engine=artefact.engine,
        format=artefact.format,
        filename=artefact.filename,
        text=artefact.text,
    )


def export_answer(request: EvaluateRequest) -> ExportOut:
    """The request's layout in its engine's input, or InvalidSpec (field `engine`) listing
    every rule of the engine the layout breaks."""
    modules = request.assumptions.selective_recompute_modules
    engine = get_engine(request.engine)
    layout = engine_placed(request.layout, engine)
    return export_out(export(engine, request.job(), layout, modules))


def broken_rules(answer: EstimateOut, layout: Layout, engine: str, job: TrainingJob) -> list[str]:
    """Each rule of the engine the layout breaks, as a sentence, unless already warned."""
    return [w for w in violations(get_engine(engine), job, layout) if w not in answer.warnings]


def under_engine(
    answer: EstimateOut,
    layout: Layout,
    engine: str,
    job: TrainingJob,
    with_export: bool,
    recompute_modules: Sequence[str] | None = None,
) -> EstimateOut:
    """`answer` with the engine's broken rules among its warnings and, if asked, its export
    (with the request's selective module list, where it names one)."""
    broken = broken_rules(answer, layout, engine, job)
    update: dict[str, object] = {"warnings": [*answer.warnings, *broken]}
    if with_export:
        try:
            artefact = export(get_engine(engine), job, layout, recompute_modules)
            update["export"] = export_out(artefact)
        except InvalidSpec as refused:
            update["export_error"] = refused.message
    return answer.model_copy(update=update)


def evaluate_answer(request: EvaluateRequest, estimate: Estimate) -> EstimateOut:
    """The estimate of the request's layout, with what its engine says of it."""
    return under_engine(
        estimate_out(estimate),
        estimate.layout,
        request.engine,
        request.job(),
        with_export=True,
        recompute_modules=request.assumptions.selective_recompute_modules,
    )


def optimize_answer(request: SearchRequest, result: OptimizeResult) -> OptimizeOut:
    """The optimize answer; its best layout with the engine's broken rules (warned in the
    answer too) and its export."""
    answer = optimize_out(result)
    if answer.best is None or result.best is None:
        return answer
    modules = request.assumptions.selective_recompute_modules
    best = under_engine(
        answer.best, result.best.layout, request.engine, request.job(), True, modules
    )
    added = [w for w in best.warnings if w not in answer.warnings]
    return answer.model_copy(update={"best": best, "warnings": [*answer.warnings, *added]})


def pareto_answer(request: PlanRequest, result: ParetoResult) -> ParetoOut:
    """The frontier, each point warned of the engine's rules it breaks; no exports (small)."""
    answer = pareto_out(result)
    job = request.job()
    frontier, breaking = [], 0
    for point, estimate in zip(answer.frontier, result.frontier, strict=True):
        broken = broken_rules(point, estimate.layout, request.engine, job)
        breaking += bool(broken)
        frontier.append(point.model_copy(update={"warnings": [*point.warnings, *broken]}))
    warnings = list(answer.warnings)
    if breaking:
        label = get_engine(request.engine).label
        warnings.append(
            f"{breaking} of {len(frontier)} frontier points break {label}'s rules "
            "(each point's warnings name them)"
        )
    return answer.model_copy(update={"frontier": frontier, "warnings": warnings})
