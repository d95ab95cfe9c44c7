"""A plan turned into Ray placement groups, on a real Ray cluster of fake GPU nodes
(`ray.cluster_utils.Cluster`): every bundle lands on the node the plan named."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.integrations.ray_placement import job_bundles, node_resource, node_resources
from api.schemas import PlanOut

NODES = 4
PLAN = {
    "cluster": {"pools": [{"name": "h100", "gpu": "h100-sxm", "nodes": NODES}]},
    "jobs": [
        {"name": "big", "weight": 2.0, "throughput": {"h100-sxm": {"16": 2000.0, "24": 2800.0}}},
        {"name": "small", "throughput": {"h100-sxm": {"8": 900.0}}},
    ],
    "time_limit_s": 10,
}


@pytest.fixture
def answer(api: TestClient) -> PlanOut:
    response = api.post("/v1/plan", json=PLAN)
    assert response.status_code == 200, response.text
    planned = PlanOut.model_validate(response.json())
    # big at 24 GPUs: 2 * 1 + 900 / 900 = 3; at 16 with small: 2 * 2000/2800 + 1 = 2.43
    assert [(job.name, job.gpus) for job in planned.jobs] == [("big", 24), ("small", 8)]
    return planned


def test_each_planned_node_is_one_bundle_asking_for_that_node(answer: PlanOut) -> None:
    big, small = answer.jobs
    assert job_bundles(big) == [{"GPU": 8.0, node_resource("h100", n): 1.0} for n in big.nodes]
    assert len(job_bundles(small)) == 1 and set(big.nodes).isdisjoint(small.nodes)


@pytest.fixture
def ray_cluster() -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[ray]')")
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False},
    )
    for node in range(NODES):  # fake GPUs: Ray counts them, nothing runs on them
        cluster.add_node(num_cpus=1, num_gpus=8, resources=node_resources("h100", node))
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()
    cluster.shutdown()


def test_placement_groups_land_on_the_planned_nodes(answer: PlanOut, ray_cluster: Any) -> None:
    from ray.util.placement_group import placement_group_table

    from api.integrations.ray_placement import placement_groups

    groups = placement_groups(answer)
    assert sorted(groups) == ["big", "small"]
    names = {node["NodeID"]: node["Resources"] for node in ray_cluster.nodes()}
    for job in answer.jobs:
        assert groups[job.name].wait(30), f"{job.name}'s group was never placed"
        where = placement_group_table(groups[job.name])["bundles_to_node_id"]
        landed = sorted(
            int(resource.rsplit("/", 1)[1])
            for node_id in where.values()
            for resource in names[node_id]
            if resource.startswith("layoutopt/")
        )
        assert landed == sorted(job.nodes), job.name
