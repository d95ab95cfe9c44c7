"""HTTP load: many concurrent clients against a real server on loopback, for a bounded time.

    .venv/bin/python -m bench.load                      # 20 s, 32 clients, 20% optimize
    .venv/bin/python -m bench.load --duration-s 60 --clients 64 --optimize-share 0.5

Starts `layoutopt serve` on a free 127.0.0.1 port, mixes evaluate requests (a grid of valid
layouts, so some repeat and hit the cache) with optimize requests (a few jobs, short time
limits), and reports throughput, p50/p99 latency by operation, answers by status, and the
server's resident memory at start, after warm-up and at the end. Stops the server itself.
The load generator shares the machine's cores with the server: figures are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from api.client import KEEPALIVE_EXPIRY_S
from api.schemas import PLATE_EXAMPLE, EvaluateRequest
from bench.server import cpu_s_of, free_port, rss_of, start_server, stop_server
from models.errors import InvalidSpec
from optimizer.costmodel import evaluate

RETRY_PAUSE_S = 0.05  # after a 503, so refused clients do not spin on the loop
PROBE_EVERY_S = 0.1  # a liveness prober beside the load, as a kubelet would be
REQUEST_TIMEOUT_S = 60.0


@dataclass
class Tally:
    # by (operation, "2xx" or "503"): how long answers and refusals took
    latencies_s: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)  # "200", "503", "transport:...", ...
    probe_s: list[float] = field(default_factory=list)  # GET /healthz, one every PROBE_EVERY_S

    def record(self, operation: str, status: str, latency_s: float) -> None:
        self.statuses[status] += 1
        answer = "2xx" if status.startswith("2") else status
        if answer in ("2xx", "503"):
            self.latencies_s.setdefault((operation, answer), []).append(latency_s)


def evaluate_bodies() -> list[dict[str, Any]]:
    """Valid evaluate requests for Llama 3 405B on 16,384 GPUs over a grid of layouts."""
    bodies = []
    grid = itertools.product((1, 2, 4, 8), (4, 8, 16), (1, 2, 4), (1, 2), (0, 1, 2))
    for tp, pp, vpp, micro_batch, zero in grid:
        layout = {"tp": tp, "pp": pp, "vpp": vpp, "micro_batch": micro_batch, "zero": zero}
        body = {**PLATE_EXAMPLE, "layout": {**PLATE_EXAMPLE["layout"], **layout}}
        request = EvaluateRequest.model_validate(body)
        try:
            evaluate(request.job(), request.layout, request.profile, request.assumptions)
        except InvalidSpec:
            continue
        bodies.append(body)
    return bodies


def optimize_bodies(time_limit_s: float, profile: str) -> list[dict[str, Any]]:
    """A few optimize requests: three models on a few cluster sizes, priced under `profile`
    ("default": the field left out, so the service's defaults apply, profile standard and
    engine megatron, as a request that names neither gets them)."""
    base = {key: value for key, value in PLATE_EXAMPLE.items() if key not in ("layout", "profile")}
    if profile != "default":
        base["profile"] = profile
    jobs = itertools.product(("llama3-8b", "llama3-70b", "llama3-405b"), (1024, 4096, 16384))
    return [
        {**base, "model": model, "cluster": {**base["cluster"], "gpus": gpus}}
        | {"time_limit_s": time_limit_s}
        for model, gpus in jobs
    ]


async def one_client(
    http: httpx.AsyncClient,
    deadline: float,
    bodies: dict[str, list[dict[str, Any]]],
    optimize_share: float,
    tally: Tally,
    rng: random.Random,
) -> None:
    while time.monotonic() < deadline:
        operation = "optimize" if rng.random() < optimize_share else "evaluate"
        start = time.perf_counter()
        try:
            response = await http.post(f"/v1/{operation}", json=rng.choice(bodies[operation]))
            status = str(response.status_code)
        except httpx.HTTPError as error:
            status = f"transport:{type(error).__name__}"
        tally.record(operation, status, time.perf_counter() - start)
        if status == "503":
            await asyncio.sleep(RETRY_PAUSE_S)


async def drive(
    base_url: str, args: argparse.Namespace, tally: Tally, server_pid: int
) -> list[int]:
    """Run the clients until the deadline; sample the server's RSS once a second meanwhile."""
    bodies = {
        "evaluate": evaluate_bodies(),
        "optimize": optimize_bodies(args.optimize_time_limit_s, args.optimize_profile),
    }
    # Idle connections retire before uvicorn's 5 s keep-alive closes them under a request.
    limits = httpx.Limits(
        max_connections=args.clients,
        max_keepalive_connections=args.clients,
        keepalive_expiry=KEEPALIVE_EXPIRY_S,
    )
    deadline = time.monotonic() + args.duration_s
    rss_kb = [rss_of(server_pid)]
    async with httpx.AsyncClient(
        base_url=base_url, limits=limits, timeout=REQUEST_TIMEOUT_S
    ) as http:
        clients = [
            one_client(http, deadline, bodies, args.optimize_share, tally, random.Random(seed))
            for seed in range(args.clients)
        ]
        sampler = sample_rss(server_pid, deadline, rss_kb)
        await asyncio.gather(sampler, probe(base_url, args.duration_s, tally), *clients)
    rss_kb.append(rss_of(server_pid))
    return rss_kb


# A liveness prober in a process of its own, as a kubelet is: the load generator's busy
# event loop would otherwise add its own delay to every probe it times.
PROBER = """
import json, sys, time, httpx
url, duration_s, every_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
seconds, statuses = [], []
deadline = time.monotonic() + duration_s
with httpx.Client(base_url=url, timeout=60) as http:
    while time.monotonic() < deadline:
        start = time.perf_counter()
        statuses.append(http.get("/healthz").status_code)
        seconds.append(time.perf_counter() - start)
        time.sleep(every_s)
print(json.dumps({"seconds": seconds, "statuses": statuses}))
"""


async def probe(base_url: str, duration_s: float, tally: Tally) -> None:
    """GET /healthz every PROBE_EVERY_S from another process, for `duration_s`."""
    prober = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROBER,
        base_url,
        str(duration_s),
        str(PROBE_EVERY_S),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await prober.communicate()
    found = json.loads(out)
    tally.probe_s += found["seconds"]
    tally.statuses.update(f"probe {status}" for status in found["statuses"])


async def sample_rss(pid: int, deadline: float, samples: list[int]) -> None:
    while time.monotonic() < deadline:
        await asyncio.sleep(1.0)
        samples.append(rss_of(pid))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def server_metrics(base_url: str) -> dict[str, float]:
    """Every sample line of /metrics, by its name and labels."""
    text = httpx.get(f"{base_url}/metrics", timeout=5.0).text
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def server_quantile_ms(metrics: dict[str, float], route: str, fraction: float) -> str:
    """The upper bound of the histogram bucket holding the quantile of the server's own
    request time: what the server spent, without the load generator's queueing."""
    prefix = f'layoutopt_http_request_duration_seconds_bucket{{method="POST",route="{route}",le="'
    buckets = sorted(
        (float(name[len(prefix) : -2]), count)
        for name, count in metrics.items()
        if name.startswith(prefix)
    )
    if not buckets or buckets[-1][1] == 0:
        return "-"
    wanted = fraction * buckets[-1][1]
    bound = next(bound for bound, count in buckets if count >= wanted)
    return "> 30,000" if bound == float("inf") else f"<= {bound * 1000:,.0f}"


def logged_latencies_ms(log_text: str) -> dict[tuple[str, int], list[float]]:
    """The server's own time per request, from its JSON access log: by (path, status)."""
    found: dict[tuple[str, int], list[float]] = {}
    for line in log_text.splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("message") == "request":
            key = (entry["path"], int(entry["status"]))
            found.setdefault(key, []).append(float(entry["duration_ms"]))
    return found


def logged_table(latencies_ms: dict[tuple[str, int], list[float]]) -> list[str]:
    lines = [
        "",
        "server-side time, from its access log (the load generator's queueing excluded):",
        "",
        "| path | status | count | p50 ms | p99 ms | max ms |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for (path, status), values in sorted(latencies_ms.items()):
        p50, p99 = (percentile(values, q) for q in (0.5, 0.99))
        lines.append(
            f"| {path} | {status} | {len(values):,} | {p50:,.1f} | {p99:,.1f} | {max(values):,.1f} |"
        )
    return lines


def report(
    args: argparse.Namespace,
    tally: Tally,
    rss_kb: list[int],
    cpu_s: float,
    metrics: dict[str, float],
    latencies_ms: dict[tuple[str, int], list[float]],
) -> str:
    total = sum(tally.statuses.values())
    server_errors = sum(
        n for status, n in tally.statuses.items() if status.startswith("5") and status != "503"
    )
    lines = [
        f"{args.clients} clients, {args.duration_s:g} s, {args.optimize_share:.0%} optimize "
        f"(time limit {args.optimize_time_limit_s:g} s, profile {args.optimize_profile}); "
        f"server WORKERS={args.workers} "
        f"QUEUE_DEPTH={args.queue_depth} CACHE_SIZE={args.cache_size}",
        "",
        f"- throughput: {total / args.duration_s:,.1f} requests/s ({total:,} requests)",
        "- answers by status: "
        + ", ".join(f"{status}: {n:,}" for status, n in sorted(tally.statuses.items())),
        f"- 5xx other than 503: {server_errors}",
        "",
        "| operation | answer | count | p50 ms | p99 ms |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for (operation, answer), latencies in sorted(tally.latencies_s.items()):
        p50, p99 = (percentile(latencies, q) * 1000 for q in (0.5, 0.99))
        lines.append(f"| {operation} | {answer} | {len(latencies):,} | {p50:,.1f} | {p99:,.1f} |")
    warm = rss_kb[min(len(rss_kb) - 1, max(1, len(rss_kb) // 4))]
    lines += [
        "",
        f"- server RSS: {rss_kb[0] / 1024:,.1f} MiB at start, {warm / 1024:,.1f} MiB after "
        f"warm-up, {max(rss_kb) / 1024:,.1f} MiB peak, {rss_kb[-1] / 1024:,.1f} MiB at the end",
    ]
    lines.append(
        f"- server CPU: {cpu_s:,.1f} s in {args.duration_s:g} s "
        f"({cpu_s / args.duration_s:.2f} cores busy on average, "
        f"{cpu_s / max(total, 1) * 1000:.1f} ms per request)"
    )
    lines += ["", "| route | server p50 ms | server p99 ms |", "| --- | ---: | ---: |"]
    for route in ("/v1/evaluate", "/v1/optimize"):
        bounds = [server_quantile_ms(metrics, route, q) for q in (0.5, 0.99)]
        lines.append(f"| {route} | {bounds[0]} | {bounds[1]} |")
    lines += logged_table(latencies_ms)
    if tally.probe_s:
        p50, p99 = (percentile(tally.probe_s, q) * 1000 for q in (0.5, 0.99))
        lines += [
            "",
            f"- /healthz probe (another process, every {PROBE_EVERY_S:g} s): p50 {p50:,.1f} ms, "
            f"p99 {p99:,.1f} ms, max {max(tally.probe_s) * 1000:,.1f} ms "
            f"({len(tally.probe_s)} probes)",
        ]
    wanted = ("layoutopt_cache_hits_total", "layoutopt_rejections_total")
    lines.append("")
    lines += [f"- `{name}` {value:g}" for name, value in metrics.items() if name.startswith(wanted)]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.load", description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--optimize-share", type=float, default=0.2)
    parser.add_argument("--optimize-time-limit-s", type=float, default=2.0)
    parser.add_argument(
        "--optimize-profile",
        choices=("default", "standard", "workshop"),
        default="default",
        help="the optimize requests' profile; default: none named, so the service's default "
        "(standard, engine megatron) applies. Runs before 2026-12-02 sent the plate "
        "example's workshop",
    )
    parser.add_argument("--workers", type=int, default=2, help="server WORKERS")
    parser.add_argument("--queue-depth", type=int, default=8, help="server QUEUE_DEPTH")
    parser.add_argument("--cache-size", type=int, default=1024, help="server CACHE_SIZE")
    parser.add_argument(
        "--solve-in",
        choices=("threads", "processes"),
        default="processes",
        help="server SOLVE_IN: a worker process per solver thread (as `make run` and the "
        "manifests serve), or the solves in the threads themselves",
    )
    args = parser.parse_args(argv)
    if not 0 < args.duration_s <= 600 or not 0 < args.clients <= 1000:
        parser.error("--duration-s must be in (0, 600] and --clients in (0, 1000]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    tally = Tally()
    env = {
        "WORKERS": str(args.workers),
        "QUEUE_DEPTH": str(args.queue_depth),
        "CACHE_SIZE": str(args.cache_size),
        "SOLVE_IN": args.solve_in,
        "LOG_LEVEL": "info",
    }
    with tempfile.TemporaryFile() as log:
        server = start_server(port, env, log)
        try:
            cpu_start_s = cpu_s_of(server.pid)
            rss_kb = asyncio.run(drive(base_url, args, tally, server.pid))
            cpu_s = cpu_s_of(server.pid) - cpu_start_s
            metrics = server_metrics(base_url)
        finally:
            stop_server(server)
        log.seek(0)
        latencies_ms = logged_latencies_ms(log.read().decode())
    print(report(args, tally, rss_kb, cpu_s, metrics, latencies_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
