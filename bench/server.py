"""A real `layoutopt serve` on loopback, as the load benchmark and the tests start it, and
what /proc says of it (CPU time, resident memory, child processes). Linux only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

STARTUP_TIMEOUT_S = 30.0


def cpu_s_of(pid: int) -> float:
    """User plus system CPU time so far of the process and its live children (the solver
    processes of SOLVE_IN=processes), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return ticks / os.sysconf("SC_CLK_TCK") + sum(cpu_s_of(child) for child in children_of(pid))


def children_of(pid: int) -> list[int]:
    """The process's children, from /proc/<pid>/task/*/children (Linux 3.5+)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(child) for child in task.read_text().split()]
    return found


def rss_of(pid: int) -> int:
    """Resident memory in KiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# `layoutopt serve` as the console script runs it.
SERVE = "import sys; from api.cli import main; sys.exit(main())"


def start_server(port: int, env: dict[str, str], log: Any) -> subprocess.Popen[bytes]:
    """`layoutopt serve` on 127.0.0.1:`port`, settings from `env`, once it answers /readyz.
    No drain on SIGTERM unless `env` asks for one (DRAIN_S): stop_server is then prompt."""
    command = [sys.executable, "-c", SERVE, "serve", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(
        command,
        env={**os.environ, "DRAIN_S": "0", **env},
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1.0).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
    stop_server(server)
    raise RuntimeError(f"server did not come up in {STARTUP_TIMEOUT_S} s (exit {server.poll()})")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
