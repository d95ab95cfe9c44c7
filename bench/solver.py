"""Solver benchmark: CP-SAT `optimize` and `pareto` beside the numpy enumerator, same process.

Run `.venv/bin/python -m bench.solver` (add `--reps N`, `--no-write`). Writes the table into
the "## Solver" section of docs/performance.md, with the text of bench/solver_notes.md under
it, and leaves the other sections alone. Not a test: wall times depend on the machine and its
load, which the report records.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ortools

from bench.report import h100_job, publish
from models.job import TrainingJob
from optimizer import Request, SolveSettings
from optimizer.costmodel import evaluate
from optimizer.engines import get_engine
from optimizer.search import SearchSpace, build_tables, enumerator, narrow_to_rules
from optimizer.searches import optimize, pareto, prepare_search

SECTION = "## Solver"


@dataclass(frozen=True)
class Scenario:
    name: str
    model: str
    gpus: int
    space: SearchSpace = SearchSpace()
    profile: str = "workshop"
    engine: str | None = None  # None: no engine's rules, the engine-agnostic prices

    def job(self) -> TrainingJob:
        return h100_job(self.gpus, self.model)

    def request(self) -> Request:
        engine = None if self.engine is None else get_engine(self.engine)
        return Request(self.job(), self.space, profile=self.profile, engine=engine)


SCENARIOS = (
    Scenario("plate: 405B on 16,384", "llama3-405b", 16384),
    Scenario("405B on 24,576", "llama3-405b", 24576),
    Scenario("405B on 98,304", "llama3-405b", 98304),
    Scenario("70B on 6,144, 40 GB", "llama3-70b", 6144, SearchSpace(memory_limit_gb=40)),
    Scenario("8B on 1,024", "llama3-8b", 1024),
    Scenario("405B on 64 (infeasible)", "llama3-405b", 64),
    Scenario("standard: plate", "llama3-405b", 16384, profile="standard"),
    Scenario("standard: 70B on 6,144", "llama3-70b", 6144, profile="standard"),
    # the searches' defaults as a request meets them: profile standard under Megatron-LM
    Scenario(
        "standard, megatron: plate", "llama3-405b", 16384, profile="standard", engine="megatron"
    ),
    Scenario(
        "standard, megatron: 70B on 6,144",
        "llama3-70b",
        6144,
        profile="standard",
        engine="megatron",
    ),
)


def median_s(run: Callable[[], Any], reps: int) -> tuple[float, Any, float]:
    """Median wall time of `reps` runs after one warm-up, the last answer, and the median
    process CPU time (all threads): less sensitive to other jobs on a shared machine."""
    answer = run()
    walls, cpus = [], []
    for _ in range(reps):
        start, start_cpu = time.perf_counter(), time.process_time()
        answer = run()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return statistics.median(walls), answer, statistics.median(cpus)


def measure(scenario: Scenario, reps: int) -> dict[str, Any]:
    request = scenario.request()
    job, profile = request.job, request.profile

    def enumerate_best() -> Any:
        problem, costs = prepare_search(request)
        return enumerator.best_layout(problem, costs)

    def enumerate_frontier() -> Any:
        problem, costs = prepare_search(request)
        return enumerator.frontier_points(problem, costs)

    def argmax_best() -> Any:
        """The same pruned table as the optimum's CP-SAT model, searched by a numpy argmax
        and re-priced by `evaluate`, as optimize re-prices its answer."""
        problem, costs = prepare_search(request)
        layout = enumerator.best_of_tables(build_tables(narrow_to_rules(problem), costs))
        return None if layout is None else evaluate(job, layout, profile, costs)

    def search(run: Callable[..., Any], explain: bool = True) -> Callable[[], Any]:
        return lambda: run(replace(request, explain=explain), SolveSettings(time_limit_s=60.0))

    optimize_s, result, optimize_cpu_s = median_s(search(optimize, explain=False), reps)
    explained_s, _, _ = median_s(search(optimize), max(1, reps // 3))
    pareto_s, frontier, pareto_cpu_s = median_s(search(pareto), max(1, reps // 3))
    enum_best_s, expected, _ = median_s(enumerate_best, reps)
    enum_frontier_s, expected_frontier, _ = median_s(enumerate_frontier, reps)
    argmax_s, argmax, _ = median_s(argmax_best, reps) if profile == "standard" else (None, None, 0)
    costs = prepare_search(request)[1]
    expected_mfu = None if expected is None else evaluate(job, expected, profile, costs).mfu
    got_mfu = None if result.best is None else result.best.mfu
    agrees = _same_mfu(got_mfu, expected_mfu)
    if argmax_s is not None:
        agrees = agrees and _same_mfu(got_mfu, None if argmax is None else argmax.mfu)
    return {
        "scenario": scenario.name,
        "status": result.status,
        "proved": result.solver.proved_optimal,
        "optimize_s": optimize_s,
        "optimize_cpu_s": optimize_cpu_s,
        "pareto_cpu_s": pareto_cpu_s,
        "explained_s": explained_s,
        "pareto_s": pareto_s,
        "points": len(frontier.frontier),
        "enum_best_s": enum_best_s,
        "enum_frontier_s": enum_frontier_s,
        "argmax_s": argmax_s,
        "agrees": agrees and len(frontier.frontier) == len(expected_frontier),
    }


def _same_mfu(got: float | None, expected: float | None) -> bool:
    if got is None or expected is None:
        return got is None and expected is None
    return abs(got - expected) <= 1e-6 * expected


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| scenario | status | optimize ms (CPU) | + explanations ms | pareto ms (CPU) | points | "
        "enumerator best ms | enumerator frontier ms | argmax of pruned table ms | "
        "optimize / enum | optimize / argmax | pareto / enum | agrees |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        status = row["status"] + (" (proved)" if row["proved"] else " (NOT proved)")
        argmax_s = row["argmax_s"]
        argmax = "-" if argmax_s is None else f"{argmax_s * 1e3:.0f}"
        by_argmax = "-" if argmax_s is None else f"{row['optimize_s'] / argmax_s:.2g}x"
        lines.append(
            f"| {row['scenario']} | {status} | {row['optimize_s'] * 1e3:.0f} "
            f"({row['optimize_cpu_s'] * 1e3:.0f}) | {row['explained_s'] * 1e3:.0f} | "
            f"{row['pareto_s'] * 1e3:.0f} ({row['pareto_cpu_s'] * 1e3:.0f}) | {row['points']} | "
            f"{row['enum_best_s'] * 1e3:.1f} | {row['enum_frontier_s'] * 1e3:.1f} | {argmax} | "
            f"{row['optimize_s'] / row['enum_best_s']:.2g}x | {by_argmax} | "
            f"{row['pareto_s'] / row['enum_frontier_s']:.2g}x | {'yes' if row['agrees'] else 'NO'} |"
        )
    return lines


# What the table's columns are and what the figures say, written under it as they stand
# (a text edited by hand: rerun the benchmark after a change it describes).
NOTES = Path(__file__).with_name("solver_notes.md").read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=9, help="timed runs per figure (default 9)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    rows = [measure(scenario, args.reps) for scenario in SCENARIOS]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    header = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores "
        f"(load average {load}), Python {platform.python_version()}, OR-Tools "
        f"{ortools.__version__}, one CP-SAT worker. Rerun: `.venv/bin/python -m bench.solver`."
    )
    lines = [header, "", *table(rows), "", NOTES]
    publish(SECTION, lines, not args.no_write)


if __name__ == "__main__":
    main()
