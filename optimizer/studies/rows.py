"""One scenario run into one flat row: its overrides, what was proved, the layout, MFU,
memory by part, what binds it, throughput, and days and GPU-hours to train.

A row is a flat dict of scalars (JSON text for the few nested values), the same in CSV,
Parquet, JSONL and the HTTP stream. A scenario that fails is a row with its error and the
status `error`, never an exception: a study outlives any one of its scenarios.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any, Literal

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout
from optimizer.costmodel import Estimate
from optimizer.request import Request
from optimizer.results import OptimizeResult, ParetoResult
from optimizer.search import SolveSettings, StopSignal
from optimizer.searches import evaluate_on, optimize, pareto, stage_plans
from optimizer.staging import StageSearch
from optimizer.studies.spec import Compute, Parse, Scenario, ScenarioError, StudySpec

Row = dict[str, Any]
# What a row says was proved: the search statuses, `evaluated` for a priced layout (nothing
# searched, so nothing proved), `error` for a scenario that could not be run.
RowStatus = Literal["optimal", "feasible", "infeasible", "unknown", "evaluated", "error"]
FAILED: frozenset[str] = frozenset({"error"})
SECONDS_PER_DAY = 86_400
SECONDS_PER_HOUR = 3_600
DEFAULT_TIME_LIMIT_S = 10.0

JOB_COLUMNS = ("model_name", "gpu_name", "gpus", "nodes", "global_batch", "seq_len")
LAYOUT_COLUMNS = (
    "tp", "pp", "cp", "dp", "ep", "vpp", "micro_batch", "micro_batches", "zero",
    "recompute", "schedule", "placement",
)  # fmt: skip
MEMORY_PARTS = (
    "weights", "gradients", "optimizer", "activations", "fragmentation", "runtime", "total",
    "capacity",
)  # fmt: skip
ESTIMATE_COLUMNS = (
    *LAYOUT_COLUMNS,
    "mfu", "hfu", "bubble", "fits",
    *(f"memory_{part}_gb" for part in MEMORY_PARTS),
    "step_time_s", "tokens_per_s_per_gpu", "tokens_per_s", "days_to_train", "gpu_hours", "cost",
    "export_error",
)  # fmt: skip
RESULT_COLUMNS = (
    "compute", "status", "error", "error_field",
    *JOB_COLUMNS, "engine",
    *ESTIMATE_COLUMNS,
    "binding", "binding_relaxed_mfu", "binding_buys_mfu", "binding_all",
    "bound", "gap", "conflict", "frontier_points", "frontier", "warnings", "solver_wall_s", "wall_s",
    "stage_layers", "stage_recompute", "even_mfu", "stage_gain",
)  # fmt: skip
# Timings differ run to run; every other column is a function of the scenario alone.
TIMING_COLUMNS = ("solver_wall_s", "wall_s")


@dataclass(frozen=True)
class RunSettings:
    """What every scenario of a study shares; travels to worker processes (so: picklable)."""

    compute: Compute
    parse: Parse
    train_tokens: float
    gpu_hour_cost: float | dict[str, float] | None = None
    override_paths: tuple[str, ...] = ()
    default_time_limit_s: float = DEFAULT_TIME_LIMIT_S
    max_time_limit_s: float | None = None  # the server's cap


def run_settings(
    spec: StudySpec, parse: Parse, max_time_limit_s: float | None = None
) -> RunSettings:
    return RunSettings(
        spec.compute,
        parse,
        spec.train_tokens,
        spec.gpu_hour_cost,
        tuple(spec.override_paths()),
        max_time_limit_s=max_time_limit_s,
    )


def columns(override_paths: tuple[str, ...] | list[str]) -> list[str]:
    """Every row's columns in order: the key, the overrides, then the figures."""
    return ["key", "index", *override_paths, *RESULT_COLUMNS]


def run_scenario(scenario: Scenario, settings: RunSettings, stop: StopSignal | None = None) -> Row:
    """The scenario's row; its failures are rows too (status `error`)."""
    start = time.perf_counter()
    row: Row = {"status": "error"}
    try:
        request = settings.parse(settings.compute, scenario.request)
        row.update(job_fields(request.job), engine=request.engine_name)
        row.update(_answer_fields(request, settings, stop))
    except (ScenarioError, InvalidSpec) as error:
        row.update(error=error.message, error_field=error.field)
    except Exception as error:  # a fault of ours: the row says so, the study goes on
        row.update(error=f"internal error ({type(error).__name__}: {error})")
    row["wall_s"] = round(time.perf_counter() - start, 4)
    return complete(scenario, settings, row)


def error_row(scenario: Scenario, settings: RunSettings, message: str) -> Row:
    """The row of a scenario whose run never reported (its worker died or was lost)."""
    return complete(scenario, settings, {"status": "error", "error": message})


def complete(scenario: Scenario, settings: RunSettings, figures: Row) -> Row:
    """The row with every column, the scenario's identity first."""
    row: Row = {"key": scenario.key, "index": scenario.index, "compute": settings.compute}
    for path in settings.override_paths:
        row[path] = cell(scenario.overrides.get(path))
    row.update(figures)
    return {name: row.get(name) for name in columns(settings.override_paths)}


def cell(value: Any) -> Any:
    """A scalar as it is; an object or list as canonical JSON text (one column, one type)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def job_fields(job: TrainingJob) -> Row:
    cluster = job.cluster
    return {
        "model_name": job.model.name,
        "gpu_name": cluster.gpu.name,
        "gpus": cluster.gpus,
        "nodes": math.ceil(cluster.gpus / cluster.gpus_per_node),
        "global_batch": job.training.global_batch,
        "seq_len": job.training.seq_len,
    }


def _budget(request: Request, settings: RunSettings, stop: StopSignal | None) -> SolveSettings:
    """The request's time limit (the study's default, capped by the server's), one worker."""
    asked = request.time_limit_s or settings.default_time_limit_s
    cap = settings.max_time_limit_s
    return SolveSettings(asked if cap is None else min(asked, cap), 1, stop or StopSignal())


def _answer_fields(request: Request, settings: RunSettings, stop: StopSignal | None) -> Row:
    """The row's figures of what the study computes, priced and ruled as the request's
    engine runs it."""
    job = request.job
    if settings.compute == "evaluate":
        estimate = evaluate_on(request)
        return {"status": "evaluated", "warnings": _json(estimate.warnings)} | _estimate_fields(
            estimate, job, settings
        )
    budget = _budget(request, settings, stop)
    if settings.compute == "stages":
        return _stage_fields(stage_plans(request, budget), job, settings)
    if settings.compute == "pareto":
        return _pareto_fields(pareto(request, budget), job, settings)
    return _optimize_fields(optimize(request, budget), job, settings)


def _optimize_fields(result: OptimizeResult, job: TrainingJob, settings: RunSettings) -> Row:
    row: Row = {
        "status": result.status,
        "bound": _round(result.solver.bound, 4),
        "gap": _round(result.solver.gap, 4),
        "warnings": _json(result.warnings),
        "solver_wall_s": round(result.solver.wall_s + result.solver.explain_wall_s, 4),
    }
    if result.conflict:  # why no layout exists: the smallest set of clashing rules
        row["conflict"] = _json([c.description for c in result.conflict])
    if result.best is not None:
        row.update(_estimate_fields(result.best, job, settings))
        row.update(_binding_fields(result, result.best.mfu))
    return row


def _binding_fields(result: OptimizeResult, mfu: float) -> Row:
    """The rule whose relaxing buys the most, and what it buys (explanations on only)."""
    if not result.binding:
        return {}
    top = max(result.binding, key=lambda rule: rule.relaxed_mfu or 0.0)
    relaxed = top.relaxed_mfu
    return {
        "binding": top.name,
        "binding_relaxed_mfu": _round(relaxed, 4),
        "binding_buys_mfu": None if relaxed is None else round(relaxed - mfu, 4),
        "binding_all": ";".join(rule.name for rule in result.binding),
    }


def _stage_fields(result: StageSearch, job: TrainingJob, settings: RunSettings) -> Row:
    """The best layout and stage plan: its degrees, MFU, fullest rank and throughput, each
    rank's layers and recompute, and what the plan buys over the best even split."""
    row: Row = {"status": result.status, "solver_wall_s": round(result.wall_s, 4)}
    best, even = result.best, result.even_best
    if even is not None:
        row["even_mfu"] = round(even.price.mfu, 4)
    if best is None:
        return row
    layout, plan, price = best.layout, best.plan, best.price
    per_gpu = job.training.tokens_per_step / (price.step_time_s * job.cluster.gpus)
    modes = {mode.value for mode in plan.recompute}
    row.update(
        _layout_fields(layout, layout.micro_batches(job.training.global_batch)),
        recompute=modes.pop() if len(modes) == 1 else "per_stage",
        mfu=round(price.mfu, 4),
        hfu=round(price.hfu, 4),
        fits=True,
        memory_total_gb=round(price.memory_bytes / 1e9, 2),
        step_time_s=round(price.step_time_s, 4),
        tokens_per_s_per_gpu=round(per_gpu, 2),
        stage_layers=json.dumps(list(plan.layers)),
        stage_recompute=json.dumps([mode.value for mode in plan.recompute]),
        stage_gain=None if even is None else round(price.mfu / even.price.mfu - 1, 4),
    )
    return row | _training_time(per_gpu, job, settings)


def _pareto_fields(result: ParetoResult, job: TrainingJob, settings: RunSettings) -> Row:
    points = [[round(p.memory.total / 1e9, 2), round(p.mfu, 4)] for p in result.frontier]
    row: Row = {
        "status": result.status,
        "frontier_points": len(points),
        "frontier": json.dumps(points),
        "warnings": _json(result.warnings),
        "solver_wall_s": round(result.wall_s, 4),
    }
    if result.frontier:  # the best-MFU end stands for the scenario
        row.update(_estimate_fields(result.frontier[-1], job, settings))
    return row


def _layout_fields(layout: Layout, micro_batches: int) -> Row:
    return {
        "tp": layout.tp,
        "pp": layout.pp,
        "cp": layout.cp,
        "dp": layout.data_parallel_size,
        "ep": layout.ep,
        "vpp": layout.vpp,
        "micro_batch": layout.micro_batch,
        "micro_batches": micro_batches,
        "zero": layout.zero,
        "recompute": layout.recompute.value,
        "schedule": layout.schedule.value,
        "placement": "<".join(layout.placement),
    }


def _estimate_fields(estimate: Estimate, job: TrainingJob, settings: RunSettings) -> Row:
    layout, memory = estimate.layout, estimate.memory
    row: Row = _layout_fields(layout, estimate.micro_batches) | {
        "mfu": round(estimate.mfu, 4),
        "hfu": _round(estimate.hardware_flops_utilization, 4),
        "bubble": round(estimate.bubble, 4),
        "fits": estimate.fits,
        "step_time_s": round(estimate.step_time_s, 4),
        "tokens_per_s_per_gpu": round(estimate.tokens_per_s_per_gpu, 2),
        "export_error": estimate.export_error,  # the engine's refusal, as HTTP answers carry it
    }
    for part in MEMORY_PARTS:
        row[f"memory_{part}_gb"] = round(getattr(memory, part) / 1e9, 2)
    return row | _training_time(estimate.tokens_per_s_per_gpu, job, settings)


def gpu_hour_price(settings: RunSettings, gpu: str) -> float | None:
    """The price of one GPU-hour of `gpu`: the study's one price, or its price for that type."""
    prices = settings.gpu_hour_cost
    if not isinstance(prices, dict):
        return prices
    if gpu not in prices:
        raise ScenarioError(
            f"gpu_hour_cost has no price for gpu {gpu!r} (it prices {', '.join(sorted(prices))})",
            "gpu_hour_cost",
        )
    return prices[gpu]


def _training_time(tokens_per_s_per_gpu: float, job: TrainingJob, settings: RunSettings) -> Row:
    """Days, GPU-hours and cost to train `train_tokens` at this throughput."""
    gpus = job.cluster.gpus
    tokens_per_s = tokens_per_s_per_gpu * gpus
    if tokens_per_s <= 0:
        return {"tokens_per_s": 0.0}
    wall_s = settings.train_tokens / tokens_per_s
    gpu_hours = gpus * wall_s / SECONDS_PER_HOUR
    price = gpu_hour_price(settings, job.cluster.gpu.name)
    return {
        "tokens_per_s": round(tokens_per_s, 1),
        "days_to_train": round(wall_s / SECONDS_PER_DAY, 3),
        "gpu_hours": round(gpu_hours, 1),
        "cost": None if price is None else round(gpu_hours * price, 2),
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _json(items: tuple[str, ...] | list[str]) -> str:
    return json.dumps(list(items))
