"""deploy/slurm/job_submit.lua in a real Slurm: slurmctld and one slurmd per node on loopback
(auth/none), GPUs declared as GRES, the planner's HTTP API on uvicorn. A job that opts in is
rewritten to what the plan says, asked of the planner here by a request written by hand;
without an answer in time the job is accepted as submitted, within the timeout. The sidecar's
own rules are tests/test_slurm_sidecar.py's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from api.http.app import create_app
from api.http.settings import Settings
from bench.server import free_port

ROOT = Path(__file__).resolve().parents[1]
BINARIES = ("slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "squeue", "sinfo")
TIMEOUT_S = 3
START_TIMEOUT_S = 20.0
# Two pools of 8-GPU nodes, as slurm.conf declares them and the controller's config names them.
NODES = {"h100": ["h1", "h2", "h3"], "a100": ["a1", "a2"]}
GPU = {"h100": "h100-sxm", "a100": "a100-80gb"}
POOLS = [
    {"name": pool, "gpu": GPU[pool], "nodes": f"{names[0][0]}[1-{len(names)}]"}
    | {"gres_type": pool, "feature": pool}
    for pool, names in NODES.items()
]
ENTRY = {"request": {"model": "llama3-8b", "training": {"global_batch": 256, "seq_len": 4096}}}
OPT_IN = "layoutopt:" + json.dumps(ENTRY, separators=(",", ":"))


def slurm_conf(root: Path, ports: dict[str, int]) -> str:
    lines = [
        "ClusterName=layoutopt-test",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={ports['ctld']}",
        f"SlurmdPort={ports['slurmd']}",
        "SlurmUser=root",
        "AuthType=auth/none",
        "CredType=cred/none",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/slurmctld.log",
        f"SlurmdLogFile={root}/slurmd-%n.log",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/builtin",
        "GresTypes=gpu",
        "JobSubmitPlugins=lua",
        "ReturnToService=2",
        "KillWait=1",  # a cancelled job's step gives up its node within a second
    ]
    for pool, names in NODES.items():
        lines += [
            f"NodeName={name} NodeHostname=localhost Port={ports[name]} CPUs=2 RealMemory=1000 "
            f"Gres=gpu:{pool}:8 Features={pool}"
            for name in names
        ]
    lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def gres_conf(root: Path) -> str:
    """8 GPUs a node; slurmd's gres/gpu keeps only GPUs with a File, so each has an empty one
    (slurmd logs that it is no device and counts it)."""
    lines = ["AutoDetect=off"]
    for pool, names in NODES.items():
        for name in names:
            for gpu in range(8):
                (root / "dev" / f"{name}-gpu{gpu}").touch()
            lines.append(f"NodeName={name} Name=gpu Type={pool} File={root}/dev/{name}-gpu[0-7]")
    return "\n".join(lines) + "\n"


@dataclass
class Slurm:
    root: Path
    env: dict[str, str]

    told: str = ""  # what the last command printed on its standard error

    def run(self, *args: str, timeout: float = 15) -> str:
        done = subprocess.run(
            args, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
        self.told = done.stderr
        return done.stdout

    def sbatch(self, *args: str) -> int:
        where = ["--chdir", str(self.root), "--output", str(self.root / "job-%j.out")]
        submitted = self.run("sbatch", "--parsable", *where, *args, "--wrap", "sleep 20")
        return int(submitted.split(";")[0])

    def job(self, job_id: int) -> dict[str, str]:
        """`scontrol show job -o` as fields (the values read here hold no spaces)."""
        words = self.run("scontrol", "show", "job", "-o", str(job_id)).split()
        return dict(word.split("=", 1) for word in words if "=" in word)

    def point_at(self, url: str) -> None:
        config = {"url": url, "pools": POOLS}
        (self.root / "layoutopt.json").write_text(json.dumps(config))

    def log(self) -> str:
        return (self.root / "slurmctld.log").read_text(errors="replace")


def wait_for(condition: Any, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    # the daemons live in /usr/sbin, which a CI shell's PATH may leave out
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    missing = [name for name in BINARIES if shutil.which(name, path=path) is None]
    if missing:
        pytest.skip(
            f"Slurm is not installed ({', '.join(missing)} not on PATH; apt-get "
            "install slurm-wlm slurm-wlm-basic-plugins)"
        )
    if os.geteuid() != 0:
        pytest.skip("slurmd runs jobs as their users and must start as root")
    root = tmp_path_factory.mktemp("slurm")
    names = [name for pool in NODES.values() for name in pool]
    for directory in ("state", "dev", *(f"spool/{name}" for name in names)):
        (root / directory).mkdir(parents=True)
    ports = {name: free_port() for name in ("ctld", "slurmd", *names)}
    (root / "slurm.conf").write_text(slurm_conf(root, ports))
    (root / "gres.conf").write_text(gres_conf(root))
    # installed as an operator would: both files beside slurm.conf, the config beside them
    shutil.copy(ROOT / "deploy" / "slurm" / "job_submit.lua", root)
    shutil.copy(ROOT / "api" / "integrations" / "slurm_submit.py", root)
    env = {
        **os.environ,
        "PATH": path,
        "SLURM_CONF": str(root / "slurm.conf"),
        "LAYOUTOPT_SLURM_TIMEOUT_S": str(TIMEOUT_S),
        # an interpreter, not a version manager's shim: a controller's python3 starts at once
        "LAYOUTOPT_SLURM_PYTHON": sys.executable,
    }
    cluster = Slurm(root, env)
    cluster.point_at("http://127.0.0.1:9")
    daemons = [
        subprocess.Popen(
            ["slurmctld", "-D", "-i"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
    ]
    try:
        daemons += [
            subprocess.Popen(
                ["slurmd", "-D", "-N", name],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
            for name in names
        ]
        wait_for(lambda: idle_nodes(cluster) == sorted(names), "every node idle")
        yield cluster
    finally:
        stop(cluster, daemons)


def idle_nodes(cluster: Slurm) -> list[str]:
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
    )
    return sorted(done.stdout.split())


def stop(cluster: Slurm, daemons: list[subprocess.Popen[bytes]]) -> None:
    """Jobs cancelled first (their slurmstepd outlives slurmd), then the daemons."""
    subprocess.run(["scancel", "--user", "root"], env=cluster.env, check=False, timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["squeue", "-h", "-o", "%i"], env=cluster.env, capture_output=True, check=False
        )
        if done.returncode != 0 or not done.stdout.strip():
            break
        time.sleep(0.2)
    for daemon in daemons:
        daemon.terminate()
    for daemon in daemons:
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    for pid in job_steps_in(cluster.root):  # a job the cancel missed
        os.kill(pid, signal.SIGKILL)


def job_steps_in(root: Path) -> list[int]:
    """The slurmstepd processes of jobs run in `root` (each works in its job's directory)."""
    found = []
    for process in Path("/proc").glob("[0-9]*"):
        try:
            if (process / "comm").read_text().strip() == "slurmstepd" and (
                process / "cwd"
            ).resolve().is_relative_to(root.resolve()):
                found.append(int(process.name))
        except OSError:  # gone meanwhile
            continue
    return found


@pytest.fixture
def planner() -> Iterator[str]:
    """The HTTP API on a real uvicorn server in this process (the app already imported, so it
    starts in a moment; `layoutopt serve` in a process took 14 s to import on a loaded machine)."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(Settings()), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, "the planner serving")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def planned(url: str, unavailable: dict[str, list[int]]) -> dict[str, Any]:
    """The planner's own answer for the job, its nodes named as slurm.conf names them."""
    pools = [
        {"name": pool, "gpu": GPU[pool], "nodes": len(NODES[pool]), "unavailable_nodes": held}
        for pool, held in unavailable.items()
    ]
    body = {"cluster": {"pools": pools}, "jobs": [{**ENTRY, "name": "wrap"}], "time_limit_s": 10}
    response = httpx.post(f"{url}/v1/plan", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "optimal"
    (job,) = answer["jobs"]
    return job | {"names": [NODES[job["pool"]][n] for n in job["nodes"]]}


def test_a_job_that_opts_in_gets_the_planned_nodes_gres_and_features(
    slurm: Slurm, planner: str
) -> None:
    slurm.point_at(planner)
    # a job that does not opt in holds h1 (running on a real slurmd) and is left alone
    busy = slurm.sbatch("-w", "h1", "--gres=gpu:h100:8")
    wait_for(lambda: slurm.job(busy)["JobState"] == "RUNNING", "the busy job running")
    # The plugin's view of the jobs is refreshed only if a job changed in a later second than
    # the last change it saw (job_submit_lua.c: last_lua_jobs_update >= last_job_update, both
    # time_t): the first planned job is submitted a second after the busy job started, so the
    # second planned job's view holds it
    time.sleep(max(0.0, int(time.time()) + 1.1 - time.time()))
    assert "AdminComment" not in slurm.job(busy)

    # asked first, so the server has the job's curves when the plugin asks
    first = planned(planner, {"h100": [0], "a100": []})
    job_id = slurm.sbatch("--hold", "--gres=gpu:1", "--comment", OPT_IN)
    assert slurm.told.strip() == f"sbatch: {slurm.job(job_id)['AdminComment']}"
    expect_planned(slurm, slurm.job(job_id), first)
    assert "h1" not in first["names"]

    # a second such job: the first one's planned nodes are held although it has not started
    held = [NODES[first["pool"]].index(name) for name in first["names"]]
    second = planned(planner, {"h100": [0], "a100": []} | {first["pool"]: sorted({0, *held})})
    assert set(second["names"]).isdisjoint(first["names"])
    job = slurm.job(slurm.sbatch("--hold", "--gres=gpu:1", "--comment", OPT_IN))
    expect_planned(slurm, job, second)


def test_a_request_the_planner_refuses_leaves_the_job_as_submitted_and_runs_nothing(
    slurm: Slurm, planner: str
) -> None:
    slurm.point_at(planner)
    # shell in the job's name and comment: the script hands both over in a file, never a shell
    mark = slurm.root / "pwned"
    shell = f"'; touch {mark}; $(touch {mark}) `touch {mark}` \\"
    comment = "layoutopt:" + json.dumps({"request": {"model": f"no-such-model{shell}"}})
    job_id = slurm.sbatch("--hold", "--gres=gpu:1", "-J", f"odd{shell}"[:60], "--comment", comment)
    job = slurm.job(job_id)
    assert (job["ReqNodeList"], job["TresPerNode"]) == ("(null)", "gres:gpu:1")
    assert "AdminComment" not in job
    (logged,) = [
        line
        for line in slurm.log().splitlines()
        if "left as submitted: the server answered 422" in line
    ]
    assert "unknown model preset" in logged
    assert not mark.exists()


def expect_planned(slurm: Slurm, job: dict[str, str], plan: dict[str, Any]) -> None:
    layout = plan["best"]["layout"]
    gpus_per_node = plan["gpus"] // len(plan["nodes"])
    assert slurm.run("scontrol", "show", "hostnames", job["ReqNodeList"]).split() == plan["names"]
    assert job["NumNodes"] == f"{len(plan['names'])}-{len(plan['names'])}"
    assert job["TresPerNode"] == f"gres:gpu:{plan['pool']}:{gpus_per_node}"
    assert job["Features"] == plan["pool"]
    assert job["AdminComment"] == "layoutopt:" + ";".join(
        [f"pool={plan['pool']}", f"gpus={plan['gpus']}", f"nodes={','.join(plan['names'])}"]
        + [f"{key}={layout[key]}" for key in ("tp", "pp", "cp", "dp", "micro_batch")]
    )


class Silent:
    """A port that accepts connections (the kernel's backlog) and never answers."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


@pytest.mark.parametrize("server", ["refusing", "silent"])
def test_without_a_plan_in_time_the_job_is_accepted_as_submitted(slurm: Slurm, server: str) -> None:
    with Silent() as silent_url:
        slurm.point_at(silent_url if server == "silent" else f"http://127.0.0.1:{free_port()}")
        started = time.monotonic()
        job = slurm.job(slurm.sbatch("--hold", "--gres=gpu:1", "-J", server, "--comment", OPT_IN))
        took_s = time.monotonic() - started
    assert took_s < TIMEOUT_S + 1.5
    assert (job["ReqNodeList"], job["NumNodes"], job["TresPerNode"]) == (
        "(null)",
        "1",
        "gres:gpu:1",
    )
    assert job["Features"] == "(null)" and "AdminComment" not in job
    (logged,) = [
        line.split(": left as submitted: ", 1)[1]
        for line in slurm.log().splitlines()
        if f"layoutopt: job {server}: left as submitted: " in line
    ]
    if server == "refusing":
        assert "Connection refused" in logged
    else:  # the sidecar's own HTTP timeout, or the hard one around it under a heavy load
        assert "timed out" in logged or f"no answer within {TIMEOUT_S} s" in logged
