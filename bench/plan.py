"""Planning benchmark: the CP-SAT planner against the exhaustive oracle (small instances),
a greedy plan, the same objective solved by CBC, and Sia's formulation (configurations
without layout or placement, the p-norm, CBC), on the same instances.

Run `.venv/bin/python -m bench.plan` (`--no-write` to only print). Writes the "## Planning"
section of docs/performance.md. Not a test: times depend on the machine and its load,
which the report records; scaling curves (optimize calls) are timed apart from the solves.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.plan_instances import eight_jobs, hundred_jobs
from bench.report import machine_line, publish
from bench.sia import mip_on_values, sia_plan
from models.errors import InvalidSpec
from optimizer.costmodel import evaluate
from optimizer.planning import Curves, PlanProblem, PlanResult, PlanSettings, build_curves, plan
from optimizer.planning.enumerator import exhaustive
from optimizer.planning.greedy import greedy_plan
from optimizer.planning.options import OptionTable, option_table
from optimizer.planning.problem import released_from_failures
from tests.planning_cases import choice_of, random_instance

SECTION = "## Planning"
TIME_LIMIT_S = 10.0


def priced_curves(problem: PlanProblem) -> Curves:
    """Every point priced, whatever it takes (the benchmark times it apart)."""
    settings = PlanSettings(curve_time_limit_s=10.0)
    return build_curves(problem, settings, time.perf_counter() + 3600)


def fixed_layout_throughput(problem: PlanProblem, table: OptionTable) -> list[list[float]]:
    """Sia's configurations come without a layout: each job keeps the layout best at its
    smallest configuration of each pool, data parallelism scaled (0 where it is invalid
    or does not fit)."""
    rows = []
    for j, options in enumerate(table.options):
        reference: dict[int | None, Any] = {}
        for option in sorted(options[1:], key=lambda o: o.nodes):
            if option.point is not None and option.point.estimate is not None:
                reference.setdefault(option.pool, option.point.estimate.layout)
        row = [0.0]
        for option in options[1:]:
            layout = reference.get(option.pool)
            row.append(0.0 if layout is None else _priced(problem, j, option, layout))
        rows.append(row)
    return rows


def _priced(problem: PlanProblem, j: int, option: Any, layout: Any) -> float:
    job, pool = problem.jobs[j], problem.pools[option.pool]
    try:
        fixed = layout.model_copy(update={"dp": None})
        request = job.on_pool(pool, option.nodes)
        estimate = evaluate(request.job, fixed, request.profile, request.assumptions)
    except InvalidSpec:
        return 0.0
    return estimate.tokens_per_s_per_gpu * option.gpus if estimate.fits else 0.0


def realised(
    problem: PlanProblem,
    table: OptionTable,
    choice: tuple[int, ...],
    throughput: list[list[float]] | None = None,
) -> dict[str, float]:
    """Weighted tokens/s over the horizon, the p-mean of each job's throughput over its best
    alone (0 if any job gets nothing), and how many jobs get nothing."""
    weighted, powered, nothing = 0.0, 0.0, 0
    for j, o in enumerate(choice):
        job, option = problem.jobs[j], table.options[j][o]
        tokens = option.tokens_per_s if throughput is None else throughput[j][o]
        kept = 1.0 - (job.restart_s / problem.horizon_s if option.restarts else 0.0)
        share = tokens * kept / table.alone_tokens_per_s[j] if table.alone_tokens_per_s[j] else 0.0
        weighted += job.weight * tokens * kept
        nothing += share <= 0
        powered += job.weight * share**problem.fairness_p if share > 0 else 0.0
    weights = sum(job.weight for job in problem.jobs)
    p_mean = 0.0 if nothing else (powered / weights) ** (1 / problem.fairness_p)
    return {"weighted": weighted, "p_mean": p_mean, "nothing": nothing}


def least_racks(problem: PlanProblem, table: OptionTable, choice: tuple[int, ...]) -> int:
    """The fewest racks the chosen node counts could span, job by job."""
    total = 0
    for j, o in enumerate(choice):
        option = table.options[j][o]
        if option.pool is not None:
            total += -(-option.nodes // problem.pools[option.pool].rack_nodes)
    return total


def sequential_racks(problem: PlanProblem, table: OptionTable, choice: tuple[int, ...]) -> int:
    """Racks spanned when each pool's jobs, largest first, take the lowest free node ids
    (Sia's `alloc_to_placement_fast`): placement without topology."""
    racks = 0
    for p, pool in enumerate(problem.pools):
        free = [n for n in range(pool.nodes) if n not in pool.unavailable]
        mine = [
            (table.options[j][o].nodes, j)
            for j, o in enumerate(choice)
            if table.options[j][o].pool == p
        ]
        for nodes, _ in sorted(mine, reverse=True):
            taken, free = free[:nodes], free[nodes:]
            racks += len({pool.rack_of(n) for n in taken})
    return racks


def ours(
    problem: PlanProblem, curves: Curves, gap: float = 0.0
) -> tuple[dict[str, Any], PlanResult]:
    start = time.perf_counter()
    result = plan(problem, PlanSettings(TIME_LIMIT_S, gap_limit=gap, explain=False), curves)
    wall_s = time.perf_counter() - start
    table = option_table(problem, curves)
    choice = choice_of(problem, table, result)
    row = realised(problem, table, choice)
    settled = f"objective settled in {result.stats.objective_solve_s:.2f} s"
    topology = "topology proved" if result.stats.topology_proved else "topology best found"
    racks = None
    if result.racks_spanned is not None:
        racks = result.racks_spanned - least_racks(problem, table, choice)
    note = f"{topology}, {settled}" if problem.assign_nodes else settled
    row.update(status=result.status, racks=racks, solve_s=wall_s, gap=result.gap, note=note)
    return row, result


def _row(
    status: str, metrics: dict[str, float], racks: int | None, solve_s: float, note: str = ""
) -> dict[str, Any]:
    return {
        **metrics,
        "status": status,
        "racks": racks,
        "solve_s": solve_s,
        "gap": None,
        "note": note,
    }


def compare(
    name: str, problem: PlanProblem, curves: Curves, gaps: tuple[float, ...] = (0.0,)
) -> list[list[str]]:
    table = option_table(problem, curves)
    rows: list[tuple[str, dict[str, Any]]] = []
    for gap in gaps:
        row, _ = ours(problem, curves, gap)
        rows.append((f"CP-SAT planner{' (gap 1%)' if gap else ''}", row))
    start = time.perf_counter()
    greedy = greedy_plan(problem, table, problem.cells() if problem.assign_nodes else ())
    greedy_s = time.perf_counter() - start
    if greedy is not None:
        racks = (
            _greedy_racks(problem, greedy) - least_racks(problem, table, greedy.choice)
            if problem.assign_nodes
            else None
        )
        rows.append(
            ("greedy", _row("feasible", realised(problem, table, greedy.choice), racks, greedy_s))
        )
    mip = mip_on_values(problem, table, 60.0)
    if mip.choice:
        racks = (
            sequential_racks(problem, table, mip.choice) - least_racks(problem, table, mip.choice)
            if problem.assign_nodes
            else None
        )
        rows.append(
            (
                "CBC, same objective",
                _row(
                    mip.status,
                    realised(problem, table, mip.choice),
                    racks,
                    mip.wall_s,
                    "sequential placement",
                ),
            )
        )
    fixed = fixed_layout_throughput(problem, table)
    sia = sia_plan(problem, table, fixed, 60.0)
    if sia.choice:
        racks = (
            sequential_racks(problem, table, sia.choice) - least_racks(problem, table, sia.choice)
            if problem.assign_nodes
            else None
        )
        note = "fixed layouts, its own normalisation, sequential placement"
        rows.append(
            (
                "Sia (CBC)",
                _row(
                    sia.status, realised(problem, table, sia.choice, fixed), racks, sia.wall_s, note
                ),
            )
        )
    return [_cells(name, problem.objective, method, row) for method, row in rows]


def _greedy_racks(problem: PlanProblem, greedy: Any) -> int:
    cells = problem.cells()
    return len({(j, cells[c].pool, cells[c].rack) for (j, c), n in greedy.nodes_in.items() if n})


def _cells(name: str, objective: str, method: str, row: dict[str, Any]) -> list[str]:
    racks = "-" if row["racks"] is None else str(row["racks"])
    gap = "" if not row.get("gap") else f" (gap {row['gap']:.2%})"
    return [
        name,
        objective,
        method,
        f"{row['status']}{gap}",
        f"{row['weighted']:,.0f}",
        f"{row['p_mean']:.4f}",
        str(int(row["nothing"])),
        racks,
        f"{row['solve_s']:.3f}",
        row["note"],
    ]


def oracle_rows(seeds: range) -> list[str]:
    """The small instances: CP-SAT against the exhaustive oracle and greedy against both."""
    agree, solve_ms, greedy_ratio, infeasible = 0, [], [], 0
    for seed in seeds:
        for objective in ("throughput", "fairness", "deadlines"):
            problem, curves = random_instance(seed, objective)
            start = time.perf_counter()
            result = plan(problem, PlanSettings(20, explain=False), curves)
            solve_ms.append((time.perf_counter() - start) * 1e3)
            # the oracle solves what the planner solves: pinned jobs on failed nodes released
            problem, _ = released_from_failures(problem)
            table = option_table(problem, curves)
            best = exhaustive(problem, table)
            if best is None:
                infeasible += 1
                agree += result.status == "infeasible"
                continue
            agree += result.status == "optimal" and result.value_units == best[0]
            greedy = greedy_plan(problem, table, problem.cells())
            if greedy is not None and problem.objective == "throughput" and best[0] > 0:
                greedy_ratio.append(
                    sum(table.values[j][o] for j, o in enumerate(greedy.choice)) / best[0]
                )
    total = len(seeds) * 3
    return [
        f"- Oracle: {agree} of {total} seeded instances (3 jobs, 16 nodes in two pools, racks of 4, "
        f"some with NVLink domains of two nodes; {infeasible} infeasible) give the oracle's "
        f"objective (or infeasible, with a conflict); median plan {statistics.median(solve_ms):.0f} ms, "
        f"max {max(solve_ms):.0f} ms. Greedy reaches {statistics.mean(greedy_ratio):.1%} of the optimum "
        f"on average (throughput objective), {min(greedy_ratio):.1%} at worst.",
    ]


def report(args: argparse.Namespace) -> list[str]:
    lines = [
        f"{machine_line()}, one CP-SAT worker, time limit 10 s. Rerun: "
        "`.venv/bin/python -m bench.plan`.",
        "",
    ]
    lines += oracle_rows(range(args.seeds))
    header = [
        "instance",
        "objective",
        "method",
        "status",
        "weighted tokens/s",
        "p-mean fairness",
        "jobs given nothing",
        "racks beyond the fewest",
        "solve s",
        "notes",
    ]
    table = [header, ["---"] * len(header)]
    notes = []
    for name, build, gaps in (
        ("8 jobs, 16,384 GPUs", eight_jobs, (0.0,)),
        ("100 jobs, counts only", hundred_jobs, (0.01, 0.0)),
    ):
        problem = build()
        curves = priced_curves(problem)
        notes.append(
            f"- {name}: scaling curves {curves.wall_s:.1f} s ({curves.optimize_calls} optimize calls, {curves.cache_hits} from the cache, {len(curves.left_out)} without a layout), apart from every solve below."
        )
        objectives = ("throughput", "fairness") if problem.assign_nodes else ("fairness",)
        for objective in objectives:
            table += compare(name, _with(problem, objective), curves, gaps)
    lines += notes + [""] + ["| " + " | ".join(row) + " |" for row in table]
    return lines


def _with(problem: PlanProblem, objective: str) -> PlanProblem:
    from dataclasses import replace

    return replace(problem, objective=objective)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-write", action="store_true", help="print, leave the docs alone")
    parser.add_argument("--seeds", type=int, default=12, help="small instances (x 3 objectives)")
    args = parser.parse_args()
    lines = report(args)
    publish(SECTION, lines, not args.no_write)


if __name__ == "__main__":
    main()
