"""Study throughput: scenarios per second for one grid on 1 and 2 local worker processes
and on a Dask LocalCluster (2 worker processes, one thread each), in one run, as ratios.

    .venv/bin/python -m bench.studies                # writes "## Studies" in docs/performance.md
    .venv/bin/python -m bench.studies --no-write

Each executor runs the same scenarios (the grid below, explanations off) once to warm its
workers (imports, presets) and then once timed, so start-up is reported apart from the
steady rate. Not a test: the figures depend on the machine and its load, which the report
records.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from api.scenarios import scenario_request
from optimizer.studies import (
    StudySpec,
    check_values,
    dask_executor,
    expand,
    in_flight_for,
    local_executor,
    run_settings,
    run_study,
)

REPORT = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
SECTION = "## Studies"
GRID: dict[str, Any] = {
    "base": {
        "model": "llama3-8b",
        "cluster": {"gpus": 64, "gpu": "h100-sxm"},
        "training": {"global_batch": 512, "seq_len": 4096},
        "explain": False,
        "time_limit_s": 10,
    },
    "grid": {
        "model": ["llama3-8b", "mistral-7b", "llama3-70b"],
        "cluster.gpus": [64, 128, 256, 512],
        "training.seq_len": [2048, 8192],
        "search.memory_limit_gb": [40, 80],
    },
}


@contextmanager
def local(workers: int) -> Iterator[tuple[Executor, int]]:
    with local_executor(workers) as pool:
        yield pool, workers


@contextmanager
def dask_local_cluster() -> Iterator[tuple[Executor, int]]:
    from distributed import LocalCluster

    with (
        LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        dask_executor(cluster.scheduler_address) as pair,
    ):
        yield pair


def measure(
    name: str, executor: Callable[[], AbstractContextManager[tuple[Executor, int]]]
) -> dict[str, Any]:
    spec = StudySpec.model_validate(GRID)
    check_values(spec, scenario_request)
    scenarios, settings = expand(spec), run_settings(spec, scenario_request)
    start = time.perf_counter()
    with executor() as (pool, workers):
        ready_s = time.perf_counter() - start
        list(run_study(scenarios, settings, pool, in_flight_for(workers)))  # warm the workers
        warm_s = time.perf_counter() - start - ready_s
        timed = time.perf_counter()
        rows = list(run_study(scenarios, settings, pool, in_flight_for(workers)))
        wall_s = time.perf_counter() - timed
    statuses = sorted({row["status"] for row in rows})
    return {
        "name": name,
        "scenarios": len(rows),
        "ready_s": ready_s,
        "cold_s": warm_s,
        "wall_s": wall_s,
        "per_s": len(rows) / wall_s,
        "statuses": ", ".join(statuses),
    }


def report(rows: list[dict[str, Any]]) -> list[str]:
    one = rows[0]["per_s"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores "
        f"(load average {load} just after), Python {platform.python_version()}. Rerun: "
        "`.venv/bin/python -m bench.studies`.",
        "",
        f"The grid: {rows[0]['scenarios']} scenarios (3 models x 4 GPU counts x 2 sequence lengths x "
        "2 memory limits, explanations off, one CP-SAT worker each), run once to warm the workers "
        "and once timed.",
        "",
        "| executor | scenarios/s | vs 1 local worker | timed wall s | executor start s | first (cold) pass s | statuses |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['name']} | {row['per_s']:.1f} | {row['per_s'] / one:.2f}x | {row['wall_s']:.2f} | "
            f"{row['ready_s']:.2f} | {row['cold_s']:.2f} | {row['statuses']} |"
        )
    return lines


def write_section(lines: list[str]) -> None:
    text = REPORT.read_text()
    body = "\n".join(lines) + "\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: f"{SECTION}\n\n{body}\n", text, count=1)
    else:
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\n{body}"
    REPORT.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    rows = [
        measure("local, 1 worker process", lambda: local(1)),
        measure("local, 2 worker processes", lambda: local(2)),
        measure("Dask LocalCluster, 2 workers x 1 thread", dask_local_cluster),
    ]
    lines = report(rows)
    print("\n".join(lines))
    if not args.no_write:
        write_section(lines)
        print(f"wrote {REPORT}")


if __name__ == "__main__":
    main()
