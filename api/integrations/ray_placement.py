"""A plan's jobs as Ray placement groups: one bundle per planned node, held on that very node.

Ray places bundles by resources, not node ids, so each Ray node is started with one custom
resource that names it as the plan does (`ray start --num-gpus 8 --resources
'{"layoutopt/h100/3": 1}'`, or `node_resources("h100", 3)` for `ray.cluster_utils`); a bundle
asking for that resource and the node's GPUs can only land there. A job the plan gives nothing
gets no group. Ray itself is optional (`pip install ".[ray]"`): only `placement_groups` needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.schemas.plan_answers import JobPlanOut, PlanOut

if TYPE_CHECKING:
    from ray.util.placement_group import PlacementGroup

RESOURCE_PREFIX = "layoutopt"


def node_resource(pool: str, node: int) -> str:
    """The custom resource that names node `node` of pool `pool` to Ray."""
    return f"{RESOURCE_PREFIX}/{pool}/{node}"


def node_resources(pool: str, node: int) -> dict[str, float]:
    """What a Ray node started for this plan node declares besides its GPUs."""
    return {node_resource(pool, node): 1.0}


def job_bundles(job: JobPlanOut) -> list[dict[str, float]]:
    """One bundle per node the plan gave the job: its GPUs there and the node's own resource."""
    if job.pool is None or not job.nodes:
        return []
    gpus_per_node = job.gpus // len(job.nodes)
    return [{"GPU": float(gpus_per_node), node_resource(job.pool, n): 1.0} for n in job.nodes]


def placement_groups(answer: PlanOut, name_prefix: str = "layoutopt-") -> dict[str, PlacementGroup]:
    """A placement group per job the plan runs, named `name_prefix` + the job's name (created,
    not waited for: `group.ready()` or `group.wait(timeout)`). Jobs that stay keep their old
    group; removing the groups of jobs that moved is the caller's, who knows which it made."""
    from ray.util.placement_group import placement_group

    return {
        job.name: placement_group(
            job_bundles(job), strategy="STRICT_SPREAD", name=f"{name_prefix}{job.name}"
        )
        for job in answer.jobs
        if job_bundles(job)
    }
