"""`layoutopt stages`: the layout and stage plan of least step time, each pipeline rank's
layers (and recompute mode where the engine allows) chosen by the solver."""

from __future__ import annotations

import argparse
from typing import Any

from api.cli.common import add_job_flags, emit
from api.cli.search import DEFAULT_TIME_LIMIT_S, add_search_flags, exit_status, search_request
from api.schemas import StagePlanOut, StagesOut, StagesRequest, stages_answer
from optimizer import SolveSettings, stage_plans


def plan_lines(title: str, plan: StagePlanOut) -> list[str]:
    x = plan.layout
    lines = [
        f"{title}: tp {x.tp}, pp {x.pp}, cp {x.cp}, dp {x.dp}, vpp {x.vpp}, micro-batch "
        f"{x.micro_batch}, ZeRO-{x.zero}, {x.schedule}: MFU {100 * plan.mfu:.2f}%, step "
        f"{plan.step_time_s:.3f} s, fullest rank {plan.memory_gb:.1f} GB",
        "  rank  layers  recompute   memory GB   ms per micro-batch",
    ]
    lines += [
        f"  {r.rank:>4}  {r.layers:>6}  {r.recompute:<10}  {r.memory_gb:>9.1f}   {1e3 * r.time_s:>8.1f}"
        for r in plan.ranks
    ]
    lines.append(f"  --pipeline-model-parallel-layout '{plan.pipeline_layout}'")
    if plan.export is not None:
        lines.append(
            f"  the whole {plan.export.engine} launch ({plan.export.filename}): --json, best.export"
        )
    return lines


def stages_text(answer: StagesOut) -> str:
    s = answer.solver
    lines = [
        f"status: {answer.status} ({s.wall_s:.2f} s: {s.layouts} layouts, {s.examined} examined,"
        f" {s.pruned} pruned by their bound; {s.plans:.3g} stage plans)"
    ]
    if answer.best is not None:
        lines += plan_lines("best", answer.best)
    if answer.even_best is not None and answer.gain is not None:
        lines.append(
            f"even split at one mode: MFU {100 * answer.even_best.mfu:.2f}%; the plan "
            f"buys {100 * answer.gain:+.2f}%"
        )
    if answer.status == "feasible":
        lines.append("not proved optimal: the time ran out before every layout was examined")
    if answer.memory_fit is not None:
        lines.append(f"memory fit ({answer.memory_fit.rule}): {answer.memory_fit.description}")
    return "\n".join(lines)


def run_stages(args: argparse.Namespace) -> int:
    data: dict[str, Any] = search_request(args).model_dump(mode="json", exclude_unset=True)
    if args.per_stage_recompute is not None:
        data["per_stage_recompute"] = args.per_stage_recompute
    request = StagesRequest.model_validate(data)
    domain = request.to_request()
    budget = SolveSettings(request.time_limit_s or DEFAULT_TIME_LIMIT_S, args.workers)
    answer = stages_answer(domain, stage_plans(domain, budget))
    emit(answer, args.json, stages_text)
    return exit_status(answer.status)


def register_stages_command(commands: Any) -> None:
    stages_cmd = commands.add_parser(
        "stages", help="the best layout with each pipeline rank's layers and recompute chosen"
    )
    add_job_flags(stages_cmd)
    add_search_flags(stages_cmd)
    stages_cmd.add_argument(
        "--per-stage-recompute",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let ranks recompute in different modes (default: where the engine can launch it)",
    )
    stages_cmd.set_defaults(run=run_stages)
