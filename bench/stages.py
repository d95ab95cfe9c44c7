"""Stage-search benchmark: each pipeline rank's layers and recompute chosen by CP-SAT, beside
the even-split layout search (`optimize`, no explanations) on the same job in the same run,
and the CP-SAT stage model beside the exhaustive oracle on small models.

Run `.venv/bin/python -m bench.stages` (add `--reps N`, `--no-write`). Writes the "## Stage
search" section of docs/performance.md. Not a test: wall times depend on the machine and its
load, which the report records.
"""

from __future__ import annotations

import argparse

from bench.report import h100_job, machine_line, median_s, publish
from models.layout import Layout, resolve_layout
from optimizer import Request
from optimizer.costmodel import CostAssumptions
from optimizer.costmodel import stage_plans as sp
from optimizer.engines import get_engine
from optimizer.search import SolveSettings
from optimizer.searches import optimize, stage_plans
from optimizer.staging.oracle import ORACLE_MODEL, best_plan_exhaustive
from optimizer.staging.search import solve_candidate

SECTION = "## Stage search"
# (name, model, gpus, engine)
SCENARIOS = (
    ("plate: 405B on 16,384, megatron", "llama3-405b", 16384, "megatron"),
    ("plate: 405B on 16,384, generic", "llama3-405b", 16384, "generic"),
    ("70B on 1,024, generic", "llama3-70b", 1024, "generic"),
    ("8B on 64, megatron", "llama3-8b", 64, "megatron"),
)
SMALL = ORACLE_MODEL


def measure(name: str, model: str, gpus: int, engine: str, reps: int) -> str:
    job = h100_job(gpus, model)
    stage_s, found = median_s(
        lambda: stage_plans(
            Request(job, engine=get_engine(engine)), SolveSettings(time_limit_s=60)
        ),
        reps,
    )
    even_s, _ = median_s(
        lambda: optimize(Request(job, engine=get_engine(engine), explain=False)), reps
    )
    gain = 0.0
    if found.best is not None and found.even_best is not None:
        gain = found.best.price.mfu / found.even_best.price.mfu - 1
    return (
        f"| {name} | {stage_s:.2f} | {even_s:.2f} | {stage_s / even_s:.1f} | {found.proved} | "
        f"{found.layouts:,} | {found.solved:,} | {found.space_size:.1e} | {100 * gain:+.2f}% |"
    )


def measure_oracle(layout: Layout, uniform: bool, reps: int) -> str:
    job = h100_job(8 * layout.tp * layout.pp // 4, SMALL, global_batch=32)
    layout = resolve_layout(layout, job)
    a = CostAssumptions()
    limit = 0.9 * sp.price_plan(job, a, layout, sp.even_plan(job, layout)).memory_bytes
    modes = (0, 1, 2)
    oracle_s, oracle = median_s(
        lambda: best_plan_exhaustive(job, a, layout, modes, uniform, limit), reps
    )
    cpsat_s, (found, _, _) = median_s(
        lambda: solve_candidate(job, a, layout, modes, uniform, limit, SolveSettings(30)), reps
    )
    agree = abs(found.price.step_time_s / oracle.price.step_time_s - 1) < 1e-6
    return (
        f"| tp {layout.tp} pp {layout.pp} vpp {layout.vpp}, "
        f"{'one mode' if uniform else 'mode per rank'} | {oracle_s:.3f} | {cpsat_s:.3f} | "
        f"{oracle_s / cpsat_s:.1f} | {agree} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3, help="timed runs per figure (default 3)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    lines = [
        f"{machine_line()}, one CP-SAT worker. Rerun: `.venv/bin/python -m bench.stages`.",
        "",
        "The stage search (`layoutopt stages`, `POST /v1/stages`) beside the even-split layout "
        "search of the same job (`optimize`, no explanations), medians in seconds:",
        "",
        "| scenario | stage search s | even-split optimize s | ratio | proved | layouts | "
        "examined | stage plans | MFU gain |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *[measure(*scenario, args.reps) for scenario in SCENARIOS],
        "",
        "One layout's CP-SAT stage model beside the exhaustive oracle (every split and mode "
        "priced by the cost model) on an 8-layer model, memory limit 0.9x the even plan's:",
        "",
        "| layout | oracle s | CP-SAT s | oracle / CP-SAT | same step time |",
        "| --- | --- | --- | --- | --- |",
        *[
            measure_oracle(layout, uniform, args.reps)
            for layout in (Layout(tp=1, pp=4, zero=1), Layout(tp=1, pp=8, zero=0))
            for uniform in (True, False)
        ],
    ]
    publish(SECTION, lines, not args.no_write)


if __name__ == "__main__":
    main()
