"""`layoutopt plan SPEC.json`: many jobs on one cluster, the body of POST /v1/plan, solved
in this process. Exit status as every search: 0 optimal or feasible, 3 infeasible, 4
unknown, 2 a bad request."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from api.cli.common import BadRequest, emit, read_json
from api.cli.render import layout_line
from api.cli.search import exit_status
from api.schemas import PlanOut, PlanRequestIn, plan_out
from optimizer.planning import plan
from optimizer.planning.store import curve_cache

DEFAULT_TIME_LIMIT_S = 10.0


def _nodes_text(nodes: list[int]) -> str:
    """0-7,9: runs of consecutive ids."""
    runs: list[str] = []
    for node in nodes:
        if runs and node == int(runs[-1].split("-")[-1]) + 1:
            runs[-1] = f"{runs[-1].split('-')[0]}-{node}"
        else:
            runs.append(str(node))
    return ",".join(runs) or "-"


def _figure(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def _weighted_label(answer: PlanOut) -> str:
    """Tokens/s add up only when every job was priced: a job that brought its own throughput
    (no engine) counts in its own unit."""
    if any(job.engine is None for job in answer.jobs):
        return "weighted throughput (tokens/s and the measured jobs' own units)"
    return "weighted tokens/s"


def plan_text(answer: PlanOut) -> str:
    value, bound = _figure(answer.objective_value), _figure(answer.bound)
    gap = "-" if answer.gap is None else f"{answer.gap:.2%}"
    s = answer.solver
    lines = [
        f"status   {answer.status}   objective {answer.objective} {value} (bound {bound}, gap {gap}); "
        f"{_weighted_label(answer)} {_figure(answer.objective_terms.get('weighted_tokens_per_s'))}",
        f"solver   {s.wall_s:.2f} s: curves {s.curve_wall_s:.2f} s ({s.optimize_calls} optimize "
        f"calls, {s.curve_cache_hits} cached), solve {s.solve_wall_s:.2f} s, explanations "
        f"{s.explain_wall_s:.2f} s; racks spanned {answer.racks_spanned}",
        "",
    ]
    width = max([len(job.name) for job in answer.jobs] + [3])
    lines.append(
        f"{'job':<{width}}  {'pool':<8} {'GPUs':>6}  {'change':<8} {'tokens/s':>12}  nodes"
    )
    for job in answer.jobs:
        lines.append(
            f"{job.name:<{width}}  {job.pool or '-':<8} {job.gpus:>6}  {job.change:<8} "
            f"{job.tokens_per_s:>12,.0f}  {_nodes_text(job.nodes)}"
        )
        if job.best is not None:
            memory = f"{job.best.memory_gb.total:.1f} GB"
            lines.append(f"{'':<{width}}  {layout_line(job.best)}  memory {memory}")
        if job.placement is not None:
            lines.append(f"{'':<{width}}  racks: {job.placement.note}")
    lines += _explanations_text(answer)
    return "\n".join(lines)


def _explanations_text(answer: PlanOut) -> list[str]:
    lines: list[str] = []
    if answer.explanations is not None and answer.explanations.jobs:
        lines += ["", "who got less than its best alone, and why"]
        for short in answer.explanations.jobs:
            why = "; ".join(f"{r.code}: {r.message}" for r in short.reasons)
            lines.append(
                f"  - {short.job}: {short.got_gpus} GPUs of {short.got_pool or '-'} "
                f"({short.got_tokens_per_s:,.0f} tokens/s), alone {short.asked_gpus} of "
                f"{short.asked_pool} ({short.asked_tokens_per_s:,.0f}): {why}"
            )
    if answer.explanations is not None and answer.explanations.pools:
        lines += ["", "one more node"]
        lines += [f"  - {value.description}" for value in answer.explanations.pools]
    if answer.conflict:
        lines += ["", "conflict (a minimal set of rules that cannot all hold)"]
        lines += [f"  - {item.name}: {item.description}" for item in answer.conflict]
    if answer.warnings:
        lines += ["", "warnings"] + [f"  - {w}" for w in answer.warnings]
    return lines


def plan_request(args: argparse.Namespace) -> PlanRequestIn:
    path: Path | None = args.spec_file or args.spec
    if path is None:
        raise BadRequest("layoutopt plan needs a spec: layoutopt plan SPEC.json (- for stdin)")
    data: Any = read_json(path)
    if not isinstance(data, dict):
        raise BadRequest(f"{path} must hold a JSON object, the request body")
    for name in ("objective", "time_limit_s", "gap_limit", "explain"):
        value = getattr(args, name)
        if value is not None:
            data[name] = value
    if args.workers < 1:
        raise BadRequest(f"--workers must be at least 1, got {args.workers}")
    return PlanRequestIn.model_validate(data)


def run_plan(args: argparse.Namespace) -> int:
    request = plan_request(args)
    time_limit_s = request.time_limit_s or DEFAULT_TIME_LIMIT_S
    settings = request.settings(time_limit_s, args.workers)
    cache = curve_cache(args.curve_store)
    answer = plan_out(plan(request.to_problem(), settings, cache=cache))
    emit(answer, args.json, plan_text)
    return exit_status(answer.status)


def register_plan_command(commands: Any) -> None:
    cmd = commands.add_parser(
        "plan", help="many jobs on one cluster: each job's pool, GPUs, nodes and layout"
    )
    cmd.add_argument("spec_file", nargs="?", type=Path, metavar="SPEC", help="plan request JSON")
    cmd.add_argument("--spec", type=Path, help="the same, as a flag (- for standard input)")
    cmd.add_argument("--objective", choices=("throughput", "fairness", "deadlines", "tokens"))
    cmd.add_argument("--time-limit-s", type=float, dest="time_limit_s", help="default 10")
    cmd.add_argument("--gap-limit", type=float, dest="gap_limit", help="stop at this gap")
    cmd.add_argument(
        "--no-explain", action="store_false", dest="explain", default=None, help="the plan alone"
    )
    cmd.add_argument("--workers", type=int, default=1, help="CP-SAT workers (default 1)")
    cmd.add_argument(
        "--curve-store",
        default=os.environ.get("CURVE_STORE", ""),
        metavar="DIR",
        help="keep the scaling curves priced in DIR for the next plan (default $CURVE_STORE; "
        "none: memory only)",
    )
    cmd.add_argument("--json", action="store_true", help="print the exact JSON answer")
    cmd.set_defaults(run=run_plan)
