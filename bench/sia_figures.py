"""What a run inside Sia's simulator comes to (issue 47): average and p99 JCT, makespan,
GPU-hours and restarts a job as Sia's utils/print_run_stats.py counts them, the worst
finish-time fairness, each round's plan latency and the allocations Sia's cluster would refuse,
read from the simulator's log and output; and the report's tables (bench/sia_simulator.py runs
the policies).

The simulator's own modules (`applications`, `job`, `simulator_config`) are imported inside
the functions that need them: they are on the path only once bench/sia_simulator.py has put
a checkout there.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from bench.sia_mapping import SiaCluster, percentile, rejected

SIA_COMMIT = "aaf7a0d"

POLICIES = ("planner-a", "planner-b", "sia", "gavel", "pollux")

# The isolated runs step the job ten rounds at a time: the job's profile fit is their cost.
ISOLATED_STEP_S = 600


def isolated_jct_s(row: Any, share_gpus: float, cluster: SiaCluster, max_nodes: Any) -> float:
    """The job alone on its share of the cluster, Sia's yardstick of finish-time fairness
    (ftf_simulator.py: total GPUs over the job's average contention, each GPU type in turn,
    the JCTs weighted by the type's GPUs). Here the simulator's own job model runs on a
    fixed allocation of that many GPUs (at least one), packed on whole nodes, where
    ftf_simulator runs the policy over it and interpolates floor and ceiling: the policy
    alone on a cluster of that size gives the job that size when it scales."""
    from applications import APPLICATIONS
    from job import Job

    apps = {
        t: APPLICATIONS[t][row.application] for t in cluster if row.application in APPLICATIONS[t]
    }
    total, weight = 0.0, 0
    for gpu_type, (nodes, per_node) in cluster.items():
        if gpu_type not in apps:
            continue
        gpus = max(1, min(round(share_gpus), min(nodes, max_nodes[gpu_type]) * per_node))
        placement = [per_node] * (gpus // per_node) + ([gpus % per_node] if gpus % per_node else [])
        job = Job(
            row.name,
            apps,
            0,
            target_num_replicas=row.num_replicas,
            target_batch_size=row.batch_size,
        )
        job.migrate(gpu_type, placement)
        while job.completion_time is None:
            job.step(ISOLATED_STEP_S)
        total += nodes * per_node * job.completion_time
        weight += nodes * per_node
    return total / weight


def worst_ftf(log_lines: list[dict], workload: Path, cluster: SiaCluster, max_nodes: Any) -> float:
    """The largest JCT over isolated JCT among the finished jobs (Sia's finish-time
    fairness: at most 1 means no job would have finished sooner on its fair share)."""
    import pandas

    total_gpus = sum(n * g for n, g in cluster.values())
    last = {j["name"]: j for j in log_lines[-1]["submitted_jobs"]}
    worst = 0.0
    for row in pandas.read_csv(workload).itertuples():
        job = last.get(row.name)
        if job is None or job["completion_time"] is None:
            continue
        jct = job["completion_time"] - job["submission_time"]
        share = total_gpus / max(job.get("n_avg") or 1.0, 1.0)
        worst = max(worst, jct / isolated_jct_s(row, share, cluster, max_nodes))
    return worst


def ftf_figures(log_lines: list[dict], workload: Path, stdout_path: Path) -> dict[str, float]:
    """The worst finish-time fairness of a run and the wall time its isolated runs took."""
    import simulator_config as sim_config  # as the run left it (scaled, if it was)

    cluster = {
        t: (n, sim_config.cluster_ngpus_per_node[t]) for t, n in sim_config.cluster_nnodes.items()
    }
    start = time.perf_counter()
    with open(stdout_path, "a") as sink, contextlib.redirect_stdout(sink):
        worst = worst_ftf(log_lines, workload, cluster, sim_config.cluster_max_physical_nnodes)
    return {"worst_ftf": worst, "ftf_wall_s": time.perf_counter() - start}


def logged_rejections(log_lines: list[dict]) -> int:
    """Rejected allocations found in a finished run's log (capacity and node limits; the
    log keeps no goodput tables, so the counts are not checked against them)."""
    import simulator_config as sim_config

    cluster = {
        t: (n, sim_config.cluster_ngpus_per_node[t]) for t, n in sim_config.cluster_nnodes.items()
    }
    found = 0
    for entry in log_lines:
        allocations = {
            job["name"]: (job["allocation"][0], tuple(job["allocation"][1]))
            for job in entry["submitted_jobs"]
            if job["completion_time"] is None and job["allocation"]
        }
        found += len(rejected(allocations, None, cluster, sim_config.cluster_max_physical_nnodes))
    return found


def latencies_from_stdout(stdout: str) -> list[float]:
    """Each round's policy time, from the simulator's 'Policy optimization took X ms'; for
    Pollux (cluster_unaware.py prints no such line), its 'Scheduling compute time: X ms',
    the round less the jobs' stepping: the policy and the reallocation after it."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("Policy optimization took "):
            found.append(float(line.split()[3].rstrip(",").removesuffix("ms")) / 1000.0)
        elif line.startswith("Scheduling compute time: "):
            found.append(float(line.split()[3].removesuffix("ms")) / 1000.0)
    return found


def figures(log_lines: list[dict], interval_s: float) -> dict[str, float]:
    """Average and p99 JCT, makespan (hours), GPU-hours and restarts a job, as Sia's
    utils/print_run_stats.py counts them, from the simulator's log."""
    last = log_lines[-1]["submitted_jobs"]
    done = [j for j in last if j["completion_time"] is not None]
    jcts = [j["completion_time"] - j["submission_time"] for j in done] or [0.0]
    makespan = max((j["completion_time"] for j in done), default=0.0) - min(
        j["submission_time"] for j in last
    )
    gpu_s = 0.0
    for entry in log_lines:
        for job in entry["submitted_jobs"]:
            allocation = job["allocation"]
            if job["completion_time"] is None and allocation and allocation[0] is not None:
                gpu_s += len(allocation[1]) * interval_s
    return {
        "jobs": len(last),
        "finished": len(done),
        "avg_jct_h": sum(jcts) / len(jcts) / 3600.0,
        "p99_jct_h": percentile(jcts, 0.99) / 3600.0,
        "makespan_h": makespan / 3600.0,
        "gpu_hours_per_job": gpu_s / 3600.0 / len(last),
        "restarts_per_job": sum(j["num_restarts"] or 0 for j in last) / len(last),
    }


def trace_name(trace: str) -> str:
    """`philly/workload-1` as philly-workload-1; a CSV's path as its file's name."""
    return Path(trace).stem if trace.endswith(".csv") else trace.replace("/", "-")


INTRO = [
    f"Sia's simulator (siasosp23/artifacts, `sia-simulator/` at commit {SIA_COMMIT}), its "
    "64-GPU cluster (6 nodes of 4 T4, 3 of 8 RTX 2080Ti, 2 of 8 A100), from a checkout "
    "outside the project. Rerun: `SIA_PATH=<checkout>/sia-simulator python -m "
    "bench.sia_simulator run --trace <workload> --policy <policy> --out <dir>` for each "
    "policy, then `python -m bench.sia_simulator report <dir> --write`, in a Python with the "
    "simulator's dependencies and this project (bench/sia_simulator.py says which).",
    "",
    "- planner-a: our planner each round, on the goodput table Sia's own policy builds, "
    "as the coefficients Sia's solver is given (g^p rounded to two decimals), "
    "Sia's objective (its p = -0.5, weights, lambda_n) and Sia's restart factor as the "
    "restart cost (bench/sia_mapping.py); sia, gavel, pollux: the simulator's own entry "
    "points with run_experiment.sh's flags. planner-b is not run: no GPT job in these "
    "workloads (bench/sia_simulator.py).",
    "- JCT, makespan, GPU-hours and restarts as Sia's utils/print_run_stats.py counts them; "
    "plan p50/p95: the policy's optimize() wall time a round (the planner's includes the "
    "mapping both ways); rejected: allocations Sia's cluster would refuse or re-spread "
    "(bench/sia_mapping.py `rejected`; counted for the planner only).",
    "- worst FTF: the largest JCT over the job's JCT alone on its share of the cluster (all "
    "GPUs over its average contention, each GPU type weighted by its GPUs, as Sia's "
    "ftf_simulator.py), the isolated run being the simulator's job model on a fixed "
    "allocation of that share rather than the policy over it: an approximation of Sia's.",
    "",
]


def report_lines(found: list[dict[str, Any]]) -> list[str]:
    """One table per trace; ratios against Sia's run on the same trace."""
    lines = list(INTRO)
    for trace in sorted({trace_name(r["trace"]) for r in found}):
        rows = [r for r in found if trace_name(r["trace"]) == trace]
        sia = next((r for r in rows if r["policy"] == "sia"), None)
        jobs = rows[0]["jobs"]
        lines += [
            f"`{trace}` ({jobs} jobs):",
            "",
            "| policy | finished | avg JCT h | p99 JCT h | makespan h | GPU-h a job | "
            "restarts a job | worst FTF | plan p50 s | plan p95 s | rejected | "
            "vs Sia: avg / p99 / makespan |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in sorted(rows, key=lambda r: POLICIES.index(r["policy"])):
            ratio = "-"
            if sia is not None:
                ratio = " / ".join(
                    f"{r[k] / sia[k]:.2f}" for k in ("avg_jct_h", "p99_jct_h", "makespan_h")
                )
            ftf = f"{r['worst_ftf']:.2f}" if r.get("worst_ftf") is not None else "-"
            lines.append(
                f"| {r['policy']} | {r['finished']}/{r['jobs']} | {r['avg_jct_h']:.2f} | "
                f"{r['p99_jct_h']:.2f} | {r['makespan_h']:.2f} | {r['gpu_hours_per_job']:.2f} | "
                f"{r['restarts_per_job']:.2f} | {ftf} | {r['plan_p50_s']:.3f} | "
                f"{r['plan_p95_s']:.3f} | {'-' if r.get('rejected') is None else r['rejected']} | "
                f"{ratio} |"
            )
        lines.append("")
    lines.append("Each run's figures were taken (a run read back with --reuse: when it was read):")
    lines.append("")
    lines += [f"- {r['policy']}, `{trace_name(r['trace'])}`: {r['machine']}" for r in found]
    return lines
