"""The deploy files agree with the app: probe paths exist, env names are settings, ports match.

Docker and Kubernetes are not available here; this loads the YAML and cross-checks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from api.http.app import create_app
from api.http.settings import Settings

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / name).read_text())  # type: ignore[no-any-return]


def get_paths() -> set[str]:
    paths = create_app().openapi()["paths"]
    return {path for path, operations in paths.items() if "get" in operations}


def test_probes_ask_routes_the_app_serves() -> None:
    container = load("k8s/deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"/readyz", "/healthz"} <= get_paths()


def test_environment_names_are_settings() -> None:
    # Settings ignores unknown variables, so a misspelt one would be silently dropped.
    known = {name.upper() for name in Settings.model_fields}
    container = load("k8s/deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    k8s_env = {entry["name"]: entry["value"] for entry in container["env"]}
    compose_env = load("compose.yaml")["services"]["layoutopt"]["environment"]
    for env in (k8s_env, compose_env):
        assert set(env) <= known
        Settings(**{name.lower(): value for name, value in env.items()})  # values validate


def test_workers_match_the_cpu_given() -> None:
    container = load("k8s/deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    workers = next(e["value"] for e in container["env"] if e["name"] == "WORKERS")
    assert container["resources"]["requests"]["cpu"] == container["resources"]["limits"]["cpu"]
    assert int(workers) == int(container["resources"]["limits"]["cpu"])
    limit_gb = memory_gb(container["resources"]["limits"]["memory"])
    compose = load("compose.yaml")["services"]["layoutopt"]
    compose_env = compose["environment"]
    k8s_env = {e["name"]: e["value"] for e in container["env"]}
    compose_gb = memory_gb(compose["mem_limit"])
    for gb, env in ((limit_gb, k8s_env), (compose_gb, compose_env)):
        per_solver = SOLVE_PEAK_GB + (
            WORKER_PROCESS_GB if env.get("SOLVE_IN") == "processes" else 0
        )
        cache_gb = Settings(**{k.lower(): v for k, v in env.items()}).cache_max_bytes / 1e9
        assert gb >= int(env["WORKERS"]) * per_solver + PROCESS_GB + cache_gb


# The largest search the size guard admits (10M layouts) peaks at about 0.32 GB for the whole
# CLI process, 0.11 GB of it imports (docs/performance.md); a container must hold one such
# solve per worker, or concurrent large searches get it OOM-killed.
SOLVE_PEAK_GB = 0.3
PROCESS_GB = 0.3
# With SOLVE_IN=processes each solver is a process of its own: its imports and what a solve
# leaves cached, 0.23-0.27 GB measured after a DeepSeek-V3-shaped optimize and frontier.
WORKER_PROCESS_GB = 0.25


def memory_gb(quantity: str) -> float:
    """Kubernetes (`3Gi`, `512Mi`) or compose (`3g`, `512m`) memory quantities in GB."""
    units = {"Gi": 2**30, "Mi": 2**20, "g": 2**30, "m": 2**20}
    for suffix, size in units.items():
        if quantity.endswith(suffix):
            return float(quantity.removesuffix(suffix)) * size / 1e9
    return float(quantity) / 1e9


def test_service_and_autoscaler_point_at_the_deployment() -> None:
    deployment, service, hpa = (
        load(f"k8s/{name}.yaml") for name in ("deployment", "service", "hpa")
    )
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    port_names = {
        port["name"] for port in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    assert service["spec"]["ports"][0]["targetPort"] in port_names
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def test_dockerfile_runs_as_a_user_and_checks_health() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in dockerfile
    user = next(line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER "))
    assert user not in ("root", "0")
    assert "HEALTHCHECK" in dockerfile and "/healthz" in dockerfile


def test_a_terminating_pod_has_time_to_drain_and_finish_its_solves() -> None:
    spec = load("k8s/deployment.yaml")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    env = {entry["name"].lower(): entry["value"] for entry in container["env"]}
    settings = Settings(**env)
    pause_s = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert settings.grace_s > settings.solver_time_limit_s  # a running solve can finish
    assert spec["terminationGracePeriodSeconds"] >= pause_s + settings.drain_s + settings.grace_s
