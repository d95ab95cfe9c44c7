"""The Slurm integration's sidecar: what `deploy/slurm/job_submit.lua` runs for a job that opts in.

    python3 slurm_submit.py CONFIG.json TIMEOUT_S < job.json

Standard library only, so it runs on a controller without layoutopt installed: copy it beside
`job_submit.lua`. It reads the job as the Lua script saw it (its name, comment, partition
and the live jobs of `slurm.jobs`), builds one `/v1/plan` request (the controller's pools
from CONFIG, the nodes other jobs hold as unavailable, the job's plan entry from its comment),
asks the server within TIMEOUT_S and prints `key=value` lines the Lua script applies:
`status=planned` and the fields to set, or `status=unchanged` and a `reason`. Every Slurm string
it prints is built from CONFIG (node names, GRES types, features) and integers; nothing the
submitter wrote reaches a field but through the planner's answer (docs/schedulers.md, "Slurm").
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

OPT_IN = "layoutopt:"
ADMIN_NOTE = "layoutopt:"  # the prefix of the admin comment a planned job carries
# Slurm's base job states (slurm.h: JOB_PENDING 0, JOB_RUNNING 1, JOB_SUSPENDED 2) and the
# flag of a job still releasing its nodes (JOB_COMPLETING, 0x8000).
JOB_STATE_BASE = 0xFF
PENDING, RUNNING, SUSPENDED = 0, 1, 2
COMPLETING = 0x8000
LAYOUT_KEYS = ("tp", "pp", "cp", "dp", "micro_batch")
# Within the Lua script's hard timeout: the HTTP call gives up first (Python's start and the
# output take the rest), and the planner stops before that (the answer's transfer takes the rest).
HTTP_MARGIN_S = 0.5
PLAN_MARGIN_S = 1.0
MIN_PLAN_S = 0.2


class Unchanged(Exception):
    """Why the job is left as submitted."""


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list as names: `gpu[01-03,7],login` -> gpu01 gpu02 gpu03 gpu7
    login. Ranges keep their zero padding; a name may carry several bracket groups."""
    names: list[str] = []
    for part in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", text):
        names += _expand_one(part.strip())
    return [name for name in names if name]


def _expand_one(name: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", name)
    if match is None:
        return [name]
    head, tail = name[: match.start()], name[match.end() :]
    expanded: list[str] = []
    for piece in match.group(1).split(","):
        low, _, high = piece.partition("-")
        width = len(low)
        for number in range(int(low), int(high or low) + 1):
            expanded += _expand_one(f"{head}{number:0{width}d}{tail}")
    return expanded


def held_nodes(jobs: Iterable[Mapping[str, Any]]) -> set[str]:
    """Nodes other jobs hold: running, suspended or completing ones' allocations, and the
    nodes an earlier plan gave a job still pending (recorded in its admin comment)."""
    held: set[str] = set()
    for job in jobs:
        state = int(job.get("state") or 0)
        if state & COMPLETING or state & JOB_STATE_BASE in (RUNNING, SUSPENDED):
            held.update(expand_hostlist(job.get("nodes") or ""))
        elif state & JOB_STATE_BASE == PENDING:
            held.update(_planned_nodes(job.get("admin_comment") or ""))
    return held


def _planned_nodes(admin_comment: str) -> list[str]:
    if not admin_comment.startswith(ADMIN_NOTE):
        return []
    match = re.search(r"\bnodes=([^;\s]+)", admin_comment)
    return expand_hostlist(match.group(1)) if match else []


def pool_nodes(pool: Mapping[str, Any]) -> list[str]:
    """A configured pool's Slurm node names in plan order (node id i is the i-th name)."""
    nodes = pool["nodes"]
    return expand_hostlist(nodes) if isinstance(nodes, str) else [str(n) for n in nodes]


def plan_job(comment: str, name: str) -> dict[str, Any]:
    """The job's entry of the plan: the JSON after `layoutopt:` in its comment (one entry of
    `/v1/plan`'s `jobs`, its `name` taken from the Slurm job)."""
    if not comment.startswith(OPT_IN):
        raise Unchanged(f"the comment does not start with {OPT_IN!r}")
    try:
        entry = json.loads(comment[len(OPT_IN) :])
    except json.JSONDecodeError as error:
        raise Unchanged(f"the comment after {OPT_IN!r} is not JSON: {error}") from None
    if not isinstance(entry, dict):
        raise Unchanged(f"the comment after {OPT_IN!r} is not a JSON object")
    return {**entry, "name": (name or "job")[:100]}


def plan_request(
    config: Mapping[str, Any], job: Mapping[str, Any], time_limit_s: float
) -> dict[str, Any]:
    """One `/v1/plan` request: the configured pools the job may use, what other jobs hold as
    unavailable, this job alone to place."""
    held = held_nodes(job.get("jobs") or [])
    pools = []
    for pool in open_pools(config, job.get("partition")):
        names = pool_nodes(pool)
        plan_pool = {key: pool[key] for key in ("gpus_per_node", "nodes_per_rack") if key in pool}
        plan_pool |= {"name": pool["name"], "gpu": pool["gpu"], "nodes": len(names)}
        plan_pool["unavailable_nodes"] = [i for i, node in enumerate(names) if node in held]
        pools.append(plan_pool)
    return {
        "cluster": {"pools": pools},
        "jobs": [plan_job(job.get("comment") or "", job.get("name") or "")],
        "objective": config.get("objective", "throughput"),
        "time_limit_s": time_limit_s,
        "explain": False,
    }


def open_pools(config: Mapping[str, Any], partition: str | None) -> list[Mapping[str, Any]]:
    """The pools a job submitted to `partition` may be placed in: a pool bound to another
    partition is not (a job that names none may go to any)."""
    pools = [p for p in config["pools"] if not partition or p.get("partition") in (None, partition)]
    if not pools:
        raise Unchanged(f"no configured pool serves partition {partition}")
    return pools


def rewrite(
    config: Mapping[str, Any], answer: Mapping[str, Any], features: str = ""
) -> dict[str, str]:
    """The Slurm fields the plan's answer sets for its one job: node list and count, GPUs per
    node as GRES, the pool's feature (and partition, where configured) and an admin comment
    carrying the layout."""
    (job,) = answer["jobs"]
    if job["pool"] is None or not job["nodes"]:
        raise Unchanged(f"the plan gives it nothing now (status {answer['status']})")
    pool = next(p for p in config["pools"] if p["name"] == job["pool"])
    names = pool_nodes(pool)
    nodes = [names[int(node)] for node in job["nodes"]]
    gpus_per_node = int(job["gpus"]) // len(nodes)
    gres_type = f":{pool['gres_type']}" if pool.get("gres_type") else ""
    fields = {
        "req_nodes": ",".join(nodes),
        "min_nodes": str(len(nodes)),
        "max_nodes": str(len(nodes)),
        "tres_per_node": f"gres:gpu{gres_type}:{gpus_per_node}",
        "admin_comment": admin_note(pool["name"], job, nodes),
    }
    if pool.get("feature"):
        fields["features"] = _with_feature(features, pool["feature"])
    if pool.get("partition"):
        fields["partition"] = pool["partition"]
    return fields


def _with_feature(features: str, feature: str) -> str:
    """The pool's feature ANDed to the job's own, when those are plain names joined by `&`;
    otherwise the job's own stay (the planned node list pins the pool anyway)."""
    if not features:
        return str(feature)
    return f"{features}&{feature}" if re.fullmatch(r"[\w.-]+(&[\w.-]+)*", features) else features


def admin_note(pool: str, job: Mapping[str, Any], nodes: list[str]) -> str:
    """What the plan chose, for `scontrol show job` and the job's launcher to read: one word
    (`layoutopt:pool=h100;gpus=16;nodes=h2,h3;tp=1;...`), as `scontrol -o` splits on spaces."""
    note = [f"pool={pool}", f"gpus={int(job['gpus'])}", f"nodes={','.join(nodes)}"]
    layout = (job.get("best") or {}).get("layout") or {}
    note += [f"{key}={int(layout[key])}" for key in LAYOUT_KEYS if key in layout]
    return ADMIN_NOTE + ";".join(note)


def ask(url: str, body: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
    """POST the plan; any failure or a non-200 answer leaves the job as submitted."""
    request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/plan",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer: dict[str, Any] = json.load(response)
            return answer
    except urllib.error.HTTPError as error:
        detail = error.read(300).decode(errors="replace")
        raise Unchanged(f"the server answered {error.code}: {detail}") from None
    except (OSError, ValueError) as error:  # refused, timed out, reset, not JSON
        raise Unchanged(f"no plan from {url}: {error}") from None


def decide(config: Mapping[str, Any], job: Mapping[str, Any], timeout_s: float) -> dict[str, str]:
    """The fields to set, or `Unchanged` with the reason."""
    time_limit_s = max(MIN_PLAN_S, timeout_s - PLAN_MARGIN_S)
    body = plan_request(config, job, min(time_limit_s, config.get("time_limit_s", time_limit_s)))
    answer = ask(config["url"], body, max(MIN_PLAN_S, timeout_s - HTTP_MARGIN_S))
    return rewrite(config, answer, job.get("features") or "")


def lines(fields: Mapping[str, str]) -> str:
    """`key=value` lines, one per field, no newline inside a value."""
    return "".join(f"{key}={' '.join(str(value).split())}\n" for key, value in fields.items())


def main(argv: list[str]) -> int:
    try:
        config_path, timeout_s = argv[1], float(argv[2])
        with open(config_path, encoding="utf-8") as config_file:
            config = json.load(config_file)
        job = json.loads(sys.stdin.buffer.read().decode("utf-8", errors="replace"))
        fields = {"status": "planned", **decide(config, job, timeout_s)}
    except Unchanged as reason:
        fields = {"status": "unchanged", "reason": str(reason)}
    except Exception as error:  # a scheduler must never be blocked by a bug of ours
        fields = {"status": "unchanged", "reason": f"{type(error).__name__}: {error}"}
    sys.stdout.write(lines(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
