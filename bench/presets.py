"""Every model preset on the GPU counts the test suite uses: `optimize` under the default
profile and engine, alone and with its explanations, medians in one run.

Run `.venv/bin/python -m bench.presets` (add `--reps N`, `--no-write`). Writes the "## Presets"
section of docs/performance.md. Issue 13's target: each within 2 s, MoE included.
"""

from __future__ import annotations

import argparse

from bench.report import h100_job, machine_line, median_s, publish
from models.job import TrainingJob
from optimizer import Request, SolveSettings
from optimizer.searches import optimize

SECTION = "## Presets"
TARGET_S = 2.0
CASES = (
    ("llama3-8b", (8, 64, 1024)),
    ("mistral-7b", (64,)),
    ("llama3-70b", (1024, 6144)),
    ("qwen2.5-72b", (1024,)),
    ("llama3-405b", (16384, 24576)),
    ("mixtral-8x7b", (256,)),
    ("deepseek-v3-shaped", (2048, 16384)),
)


def timed(job: TrainingJob, explain: bool, reps: int) -> tuple[float, str]:
    # a Request's defaults, every route's: profile standard under Megatron-LM
    def run():
        return optimize(Request(job, explain=explain), SolveSettings(time_limit_s=60))

    seconds, result = median_s(run, reps)
    return seconds, result.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3, help="timed runs per figure (default 3)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    rows = []
    for model, counts in CASES:
        for gpus in counts:
            job = h100_job(gpus, model)
            alone_s, status = timed(job, False, args.reps)
            explained_s, _ = timed(job, True, args.reps)
            within = "yes" if max(alone_s, explained_s) <= TARGET_S else "no"
            rows.append(
                f"| {model} | {gpus:,} | {status} | {alone_s:.2f} | {explained_s:.2f} | {within} |"
            )
    lines = [
        f"{machine_line()}, one CP-SAT worker, profile standard, engine megatron (the "
        "searches' defaults), 2,048 x 8,192 tokens. Rerun: `.venv/bin/python -m bench.presets`.",
        "",
        f"| model | GPUs | status | optimize s | with explanations s | within {TARGET_S:g} s |",
        "| --- | ---: | --- | ---: | ---: | --- |",
        *rows,
    ]
    publish(SECTION, lines, not args.no_write)


if __name__ == "__main__":
    main()
