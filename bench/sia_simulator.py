"""The planner inside Sia's simulator (issue 47): Sia's own cluster, jobs, traces and
restart delays, our planner choosing each round's allocations, and Sia, Gavel and Pollux
run on the same trace on the same machine.

The simulator is not part of this project (its artifact has no licence): the harness
imports it at run time from a checkout the user fetched, `SIA_PATH` (its `sia-simulator/`
folder), and runs in a Python that has its dependencies (numpy 1.26, pandas 1.5, cvxpy,
cylp, scipy, rich, psutil, autograd, ecos; pymoo 0.4.2.1 for Pollux) and this project
installed: this project first,
then `pip install numpy==1.26.4 pandas==1.5.3` (OR-Tools declares numpy and pandas 2, but
CP-SAT runs with these; the simulator needs pandas 1.5's `DataFrame.append`).

    SIA_PATH=/path/to/artifacts/sia-simulator python -m bench.sia_simulator run \\
        --trace philly/workload-1 --policy planner-a --out /tmp/sia-runs
    python -m bench.sia_simulator report /tmp/sia-runs --write

Policies:
- `planner-a`: each round, the goodput table Sia's own policy builds (its profiled
  throughput models, its configurations, normalised to the smallest, as in
  `SiaPolicy.optimize_mip`) is each job's measured throughput, as the coefficients Sia's
  solver is given (g^p rounded to two decimals, `sia_rounded`); the planner's `fairness`
  objective with Sia's p and weights is Sia's objective (bench/sia_mapping.py); a restart
  costs what Sia's restart factor takes off (`restart_factor`: the application's restart
  delay, the job's age and past restarts); a job Sia would keep (it is checkpointing) is
  pinned. Solver against solver on the same curves, the same restart cost. The planner
  names each job's GPUs (fewest Sia nodes first); with `--packed` it plans pools and
  counts only and the harness packs them onto nodes (`place_counts`), as Sia's policy
  places after its solve: at 2,048 GPUs the planner's node model alone takes seconds
  to build.
- `sia`, `gavel`, `pollux`: the simulator's own `multi_simulate`, with the arguments of its
  `run_experiment.sh` (Sia: p = -0.5, lambda_a 0.01, lambda_n 1.1, 60 s rounds, projected
  throughputs; Gavel: 360 s rounds; Pollux: heterogeneity-unaware, p = -1).
- `planner-b` (the planner's own cost-model curves for the GPT job) is refused with the
  reason: the Philly and Saturn workloads hold no GPT job, and the simulator's `gpt_pmp`
  application has no throughput ratios (cluster.py skips it) and no T4 profile, so its Sia
  path cannot run a GPT job.

Each run writes `<policy>-<trace>.log` (the simulator's log, one JSON line a round; the
trace `philly/workload-1` as `philly-workload-1`, a CSV's path as its name), `.stdout` and
`.json` (the figures) under `--out`; `run --reuse` reads a finished run's log back, `ftf`
adds the finish-time fairness (slow: an isolated run per job and GPU type) to a run made
with `--no-ftf`, `report` reads the `.json`s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from bench.report import machine_line, publish
from bench.sia_figures import (
    POLICIES,
    figures,
    ftf_figures,
    latencies_from_stdout,
    logged_rejections,
    report_lines,
    trace_name,
)
from bench.sia_mapping import (
    SiaAllocation,
    SiaCluster,
    SiaJob,
    allocation_of,
    gpu_slots,
    percentile,
    place_counts,
    plan_jobs,
    pools_of,
    rejected,
    sia_rounded,
)
from models.errors import InvalidSpec
from optimizer.planning import MAX_CELL_VARIABLES, PlanProblem, PlanSettings, plan

SECTION = "## The planner inside Sia's simulator"
INTERVAL_S = {"gavel": 360}  # the rest: 60 s rounds, as run_experiment.sh
NO_MODE_B = (
    "planner-b: the Philly and Saturn workloads hold no GPT job, and the simulator's gpt_pmp "
    "application cannot run under its Sia path (cluster.py computes no throughput ratios for "
    "it, and it has no T4 profile): there is no GPT job for the planner's own curves to price"
)
HORIZON_S = PlanProblem.horizon_minutes * 60.0
ZERO_ALLOC_GAIN = 1e-4  # sia.py: a configuration's goodput at or below it is no option


def fail(line: str) -> NoReturn:
    """Exit 2 with one line, as the project's CLI does for bad input."""
    print(line, file=sys.stderr)
    raise SystemExit(2)


def sia_path() -> Path:
    """The simulator's folder, from SIA_PATH; exit 2 with a line when it is not one."""
    where = os.environ.get("SIA_PATH", "")
    if not where or not (Path(where) / "sia.py").is_file():
        fail(
            "set SIA_PATH to a checkout's sia-simulator/ folder (siasosp23/artifacts; "
            f"this project copies none of its code): {where or 'unset'!r} has no sia.py"
        )
    return Path(where).resolve()


def import_simulator(path: Path) -> None:
    """Put the simulator on the import path; it opens its traces relative to its folder."""
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    os.chdir(path)


def sia_goodput(policy: Any, info: Any) -> dict[str, dict[int, float]]:
    """The goodput row Sia's policy builds for one adaptive job (sia.py `optimize_mip`):
    for each GPU type, its configurations within the job's replica range, priced by the
    job's profiled model (`_compute_goodputs_v2`, projected from another type when that
    type is unprofiled), normalised so that the smallest is the job's scale unit; a type
    with nothing profiled offers its scale unit alone at goodput = scale unit."""
    rows: dict[str, dict[int, float]] = {}
    unprofiled: dict[str, int] = {}
    profiled_anywhere = any(fn is not None for fn in info.speedup_fn.values())
    for gpu_type in policy.cluster_ordering:
        unit = info.scale_unit[gpu_type]
        if policy.share_max_replicas:
            most, least = max(info.max_replicas.values()), min(info.min_replicas.values())
        else:
            most, least = info.max_replicas[gpu_type], info.min_replicas[gpu_type]
        most, least = max(1, most), max(1, least)
        fn = info.speedup_fn[gpu_type]
        if not profiled_anywhere or (fn is None and not policy.project_throughputs):
            unprofiled[gpu_type] = unit
            continue
        nodes, gpus = policy.configs[gpu_type]
        valid = (gpus <= most * unit) & (gpus >= least * unit)
        if unit > 1:
            valid &= gpus % unit == 0
        if not valid.any():
            unprofiled[gpu_type] = unit
            continue
        values = policy._compute_goodputs_v2(info, gpu_type, nodes[valid], gpus[valid])
        rows[gpu_type] = {int(n): float(v) for n, v in zip(gpus[valid], values, strict=True)}
    least_value = min(
        (v for row in rows.values() for v in row.values() if v > ZERO_ALLOC_GAIN), default=1.0
    )
    least_unit = next(
        (info.scale_unit[t] for t, row in rows.items() if least_value in row.values()), 1
    )
    scale = least_unit / least_value
    table = {
        t: {n: v * scale for n, v in row.items() if v * scale > ZERO_ALLOC_GAIN}
        for t, row in rows.items()
    }
    for gpu_type, unit in unprofiled.items():
        table[gpu_type] = {unit: float(unit)}
    return table


def restart_factor(info: Any, restart_s: float) -> float:
    """The share of its goodput Sia leaves a job it would restart (sia.py, the Pollux
    factor it runs with): (age - restarts * delay) / (age + delay), 1 while the job is
    younger than one delay. The planner is given the same as a restart cost: the horizon
    times one minus it (`PlanProblem.horizon_minutes`, a restart's loss spread over it)."""
    if info.age < restart_s:
        return 1.0
    return max(info.age - (info.num_restarts or 0) * restart_s, 0.0) / (info.age + restart_s)


def cluster_of(node_infos: Mapping[str, Mapping[int, Any]]) -> dict[str, tuple[int, int]]:
    """Sia's node infos as GPU type -> (nodes, GPUs a node)."""
    return {
        gpu_type: (len(nodes), max(n.resources["nvidia.com/gpu"] for n in nodes.values()))
        for gpu_type, nodes in node_infos.items()
        if nodes
    }


@dataclass
class RoundLog:
    """What the planner policy kept of each round."""

    latency_s: list[float] = field(default_factory=list)  # optimize(), mapping included
    plan_s: list[float] = field(default_factory=list)  # the plan call alone
    objective_s: list[float] = field(default_factory=list)  # its solve that settled the objective
    topology_unproved: int = 0  # rounds whose node packing was not proved fewest racks
    rejected: list[str] = field(default_factory=list)
    unsolved: int = 0  # rounds whose plan had no assignment (previous allocations kept)
    statuses: dict[str, int] = field(default_factory=dict)


def planner_policy_class(sia_policy: type) -> type:
    """A SiaPolicy whose optimize() asks our planner (the simulator's cluster dispatches on
    isinstance(policy, SiaPolicy), so it steps the jobs exactly as for Sia)."""

    class PlannerPolicy(sia_policy):  # type: ignore[misc,valid-type]
        def __init__(self, restart_s: Any, time_limit_s: float, packed: bool = False, **kw: Any):
            super().__init__(**kw)
            self.restart_s = restart_s
            self.packed = packed
            self.settings = PlanSettings(time_limit_s=time_limit_s, explain=False, gap_limit=1e-4)
            self.rounds = RoundLog()

        def optimize(self, job_infos: Any, node_infos: Any, prev_allocs: Any) -> Any:
            start = time.perf_counter()
            cluster = cluster_of(node_infos)
            jobs = [
                SiaJob(
                    name,
                    sia_rounded(sia_goodput(self, info)),
                    HORIZON_S * (1.0 - restart_factor(info, self.restart_s(name))),
                    bool(getattr(info, "scaling_underway", False)),
                )
                for name, info in job_infos.items()
            ]
            allocations = plan_round(
                jobs, cluster, prev_allocs, self.settings, self.rounds, self.packed
            )
            limits = {t: self.cluster_max_physical_nnodes(t, cluster) for t in cluster}
            tables = {job.name: job.goodput for job in jobs}
            self.rounds.rejected += rejected(allocations, tables, cluster, limits)
            self.rounds.latency_s.append(time.perf_counter() - start)
            return allocations

        def cluster_max_physical_nnodes(self, gpu_type: str, cluster: SiaCluster) -> int:
            import simulator_config  # the simulator's, on the path once it is imported

            return (
                int(simulator_config.cluster_max_physical_nnodes.get(gpu_type, 0))
                or (cluster[gpu_type][0])
            )

    return PlannerPolicy


def plan_round(
    jobs: list[SiaJob],
    cluster: SiaCluster,
    previous: Mapping[str, SiaAllocation],
    settings: PlanSettings,
    rounds: RoundLog,
    packed: bool = False,
) -> dict[str, SiaAllocation]:
    """One round: the plan problem, the plan, each job's allocation in Sia's format.
    `packed`: the planner plans pools and counts, and the harness packs them onto Sia's
    nodes (`place_counts`), as Sia's own policy does after its solve."""
    kept = {j.name: previous[j.name] for j in jobs if j.name in previous}
    running = gpu_slots(kept, cluster)
    pools = pools_of(cluster)
    # nodes named by the planner while the model's jobs x racks stays within its cap; past it
    # (2,048 GPUs and hundreds of jobs) pools and counts only, packed here
    name_nodes = not packed and len(jobs) * sum(pool.racks for pool in pools) <= MAX_CELL_VARIABLES
    problem = PlanProblem(
        pools=pools,
        jobs=plan_jobs(jobs, running),
        objective="fairness",
        fairness_p=-0.5,
        assign_nodes=name_nodes,
    )
    start = time.perf_counter()
    try:
        result = plan(problem, settings)
    except InvalidSpec as error:  # too large a round (PlanTooLarge): Sia's allocations kept
        rounds.plan_s.append(time.perf_counter() - start)
        rounds.statuses["refused"] = rounds.statuses.get("refused", 0) + 1
        rounds.rejected.append(f"round refused: {error.message}")
        rounds.unsolved += 1
        return {j.name: kept.get(j.name, (None, ())) for j in jobs}
    rounds.plan_s.append(time.perf_counter() - start)
    rounds.objective_s.append(result.stats.objective_solve_s)
    rounds.topology_unproved += name_nodes and not result.stats.topology_proved
    rounds.statuses[result.status] = rounds.statuses.get(result.status, 0) + 1
    if not result.jobs:
        rounds.unsolved += 1
        return {j.name: kept.get(j.name, (None, ())) for j in jobs}
    if not name_nodes:
        return place_counts(result.jobs, cluster, kept)
    return {a.name: allocation_of(a, cluster, kept.get(a.name)) for a in result.jobs}


def simulate_planner(
    workload_csv: Path,
    log_path: Path,
    time_limit_s: float,
    max_rounds: int | None = None,
    scale: int | None = None,
    packed: bool = False,
) -> RoundLog:
    """The simulator's round loop (multi_simulator.py `multi_simulate`, without its tables
    printed) with the planner as the policy, Sia's settings otherwise."""
    import pandas
    import simulator_config as sim_config
    from cluster import Cluster
    from sia import SiaPolicy, get_restart_penalty

    if scale is not None:  # as multi_simulate's --cluster_scale: x each type's nodes
        for gpu_type in sim_config.cluster_nnodes:
            sim_config.cluster_nnodes[gpu_type] *= scale
    ngpus = {k: sim_config.cluster_ngpus_per_node[k] for k in sim_config.cluster_nnodes}
    policy = planner_policy_class(SiaPolicy)(
        get_restart_penalty,
        time_limit_s,
        packed,
        p_fairness=-0.5,
        restart_penalty=30,
        lambda_a=0.01,
        lambda_n=1.1,
        project_throughputs=True,
        share_max_replicas=True,
    )
    policy.populate_valid_configs(
        sim_config.cluster_nnodes, ngpus, sim_config.cluster_max_physical_nnodes
    )
    cluster = Cluster(
        pandas.read_csv(workload_csv),
        policy,
        sim_config.cluster_nnodes,
        ngpus,
        max_physical_nodes=sim_config.cluster_max_physical_nnodes,
    )
    for job in cluster.jobs:
        if job.category == "rigid":
            job.seed_profiles_rigid(ngpus)
    while not cluster.all_complete() and (max_rounds is None or len(cluster.logs) < max_rounds):
        cluster.step(60)
    cluster.output_logs(str(log_path))
    return policy.rounds


def simulate_baseline(policy: str, workload_csv: Path, log_path: Path, scale: int | None) -> None:
    """The simulator's own entry point for Sia, Gavel or Pollux, run_experiment.sh's flags."""
    if policy == "pollux":
        import numpy

        # its policy (pollux_unaware.py) still says np.int and np.float, aliases of the
        # builtins that numpy 1.24 removed
        for alias, builtin in (("int", int), ("float", float), ("bool", bool)):
            if not hasattr(numpy, alias):
                setattr(numpy, alias, builtin)
        from multi_simulator_unaware import multi_simulate
    else:
        from multi_simulator import multi_simulate
    args = argparse.Namespace(
        workload=str(workload_csv),
        policy=policy,
        policy_p_val=-1.0 if policy == "pollux" else -0.5,
        mip_lambda_a=0.01,
        mip_lambda_n=1.1,
        cluster_scale=scale,
        project_throughputs=True,
        share_max_replicas=True,
        disable_bsz_tuning=False,
        oracle_num_nodes=0,
        oracle_num_replicas=0,
        interval=INTERVAL_S.get(policy, 60),
        output=str(log_path),
        debug=False,
        nfuture=5,
    )
    multi_simulate(args)


def add_ftf(args: argparse.Namespace) -> None:
    """The FTF of a run made with --no-ftf, added to its figures."""
    path = sia_path()
    workload = workload_csv(path, args.trace)
    stem = Path(args.out).resolve() / f"{args.policy}-{trace_name(args.trace)}"
    if not stem.with_suffix(".json").is_file():
        fail(f"no run's figures at {stem.with_suffix('.json')}: run it first")
    import_simulator(path)
    log_lines = [json.loads(line) for line in stem.with_suffix(".log").read_text().splitlines()]
    result = json.loads(stem.with_suffix(".json").read_text())
    result.update(ftf_figures(log_lines, workload, stem.with_suffix(".stdout")))
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


def workload_csv(path: Path, trace: str) -> Path:
    """A workload under the simulator's workloads/ (`philly/workload-1`) or a CSV's path."""
    found = Path(trace) if trace.endswith(".csv") else path / "workloads" / f"{trace}.csv"
    if not found.is_file():
        fail(f"--trace {trace!r}: no {found}")
    return found.resolve()


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.policy == "planner-b":
        fail(NO_MODE_B)
    path = sia_path()
    workload = workload_csv(path, args.trace)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{args.policy}-{trace_name(args.trace)}"
    log_path, stdout_path = stem.with_suffix(".log"), stem.with_suffix(".stdout")
    import_simulator(path)
    start = time.perf_counter()
    rounds = None
    reused = args.reuse and log_path.is_file() and stdout_path.is_file()
    with (
        open(stdout_path, "a" if reused else "w", buffering=1) as sink,
        contextlib.redirect_stdout(sink),
    ):
        if reused:
            pass  # a finished run's log and output: its figures only
        elif args.policy == "planner-a":
            rounds = simulate_planner(
                workload,
                log_path,
                args.time_limit_s,
                args.max_rounds,
                args.cluster_scale,
                args.packed,
            )
        else:
            simulate_baseline(args.policy, workload, log_path, args.cluster_scale)
    wall_s = time.perf_counter() - start
    log_lines = [json.loads(line) for line in log_path.read_text().splitlines() if line]
    result: dict[str, Any] = dict(figures(log_lines, INTERVAL_S.get(args.policy, 60)))
    if args.ftf:
        result.update(ftf_figures(log_lines, workload, stdout_path))
    if rounds is None:
        latency = latencies_from_stdout(stdout_path.read_text())
        result.update(rejected=logged_rejections(log_lines) if args.policy == "planner-a" else None)
    else:
        latency = rounds.latency_s
        result.update(
            rejected=len(rounds.rejected),
            rejected_examples=rounds.rejected[:5],
            unsolved_rounds=rounds.unsolved,
            plan_statuses=rounds.statuses,
            plan_call_p95_s=percentile(rounds.plan_s, 0.95),
            objective_solve_p95_s=percentile(rounds.objective_s, 0.95),
            topology_unproved_rounds=rounds.topology_unproved,
            time_limit_s=args.time_limit_s,
            packed=args.packed,
        )
    result.update(
        policy=args.policy,
        trace=args.trace,
        rounds=len(latency),
        plan_p50_s=percentile(latency, 0.5),
        plan_p95_s=percentile(latency, 0.95),
        wall_s=wall_s,
        machine=machine_line(),
    )
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sia_simulator", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("run", help="simulate one workload under one policy")
    one.add_argument("--trace", required=True, help="a workload under workloads/, no .csv")
    one.add_argument("--policy", choices=POLICIES, required=True)
    one.add_argument("--out", default="sia-runs", help="folder for the log and figures")
    one.add_argument("--time-limit-s", type=float, default=10.0, help="each plan call's")
    one.add_argument("--cluster-scale", type=int, default=None, help="x the cluster's nodes")
    one.add_argument("--max-rounds", type=int, default=None, help="planner: stop after these")
    one.add_argument(
        "--packed",
        action="store_true",
        help="planner: plan pools and counts, pack them onto Sia's nodes here (as Sia does)",
    )
    one.add_argument(
        "--no-ftf", dest="ftf", action="store_false", help="skip the isolated runs of the FTF"
    )
    one.add_argument("--reuse", action="store_true", help="figures of a finished run's log")
    ftf = commands.add_parser("ftf", help="add the FTF to a run made with --no-ftf")
    ftf.add_argument("--trace", required=True)
    ftf.add_argument("--policy", choices=POLICIES, required=True)
    ftf.add_argument("--out", default="sia-runs")
    rep = commands.add_parser("report", help="the figures of the runs in a folder")
    rep.add_argument("runs", help="the folder `run --out` wrote")
    rep.add_argument("--write", action="store_true", help="into docs/performance.md")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
    elif args.command == "ftf":
        add_ftf(args)
    else:
        report(Path(args.runs), args.write)


def report(runs: Path, write: bool) -> None:
    found = [json.loads(p.read_text()) for p in sorted(runs.glob("*.json"))]
    if not found:
        fail(f"{runs}: no run's figures (.json) in it")
    lines = report_lines(found)
    publish(SECTION, lines, write)


if __name__ == "__main__":
    main()
