"""The plan request (`POST /v1/plan`, `layoutopt plan`, `Client.plan`): a cluster snapshot
(pools of nodes, racks, NVLink domains, unavailable nodes) and a list of jobs, each the
request every route takes (less its cluster) with what it may be given and where it runs."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    Field,
    Strict,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from api.schemas.requests import GpuRef, ModelRef
from models.errors import InvalidSpec
from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.presets import gpu_presets
from models.strict import REQUEST_CONFIG, JsonInt
from models.training import TrainingSpec
from optimizer import (
    DEFAULT_PROFILE,
    CostAssumptions,
    ProfileName,
    Request,
    SearchSpace,
    StopSignal,
)
from optimizer.engines import DEFAULT_ENGINE, EngineName, EngineSettingsIn, get_engine
from optimizer.planning import (
    DEFAULT_FAIRNESS_P,
    Deadline,
    MeasuredThroughput,
    PlanJob,
    PlanProblem,
    PlanSettings,
    Pool,
    Running,
)

PLAN_EXAMPLE: dict[str, Any] = {
    "cluster": {
        "pools": [
            {
                "name": "h100",
                "gpu": "h100-sxm",
                "nodes": 32,
                "gpus_per_node": 8,
                "nodes_per_rack": 8,
                "unavailable_nodes": [31],
            },
            {"name": "b200", "gpu": "b200", "nodes": 16, "gpus_per_node": 8, "nodes_per_rack": 8},
        ]
    },
    "jobs": [
        {
            "name": "pretrain-70b",
            "request": {"model": "llama3-70b", "training": {"global_batch": 512, "seq_len": 8192}},
            "weight": 2.0,
            "min_gpus": 64,
            "node_counts": [8, 16],
            "running": {"pool": "h100", "nodes": [0, 1, 2, 3, 4, 5, 6, 7]},
            "restart_minutes": 15,
        },
        {
            "name": "finetune-8b",
            "request": {"model": "llama3-8b", "training": {"global_batch": 256, "seq_len": 8192}},
            "node_counts": [2, 4, 8],
        },
        {
            "name": "eval-7b",
            "request": {"model": "mistral-7b", "training": {"global_batch": 128, "seq_len": 4096}},
            "node_counts": [1, 2],
            "preemptible": False,
        },
    ],
    "objective": "throughput",
    "time_limit_s": 10,
}


def _date_text(value: Any) -> Any:
    """A date is ISO 8601 text, as the schema publishes: not a number of seconds."""
    if not isinstance(value, str | datetime):
        raise ValueError(
            "a date is an ISO 8601 string with its time zone, e.g. 2026-05-01T00:00:00Z"
        )
    return value


# An ISO 8601 date with its time zone; strings convert (JSON has no dates), numbers do not.
IsoDate = Annotated[AwareDatetime, Strict(False), BeforeValidator(_date_text)]

MAX_POOLS = 16
MAX_JOBS = 500
MAX_NODES = 100_000
Name = Field(min_length=1, max_length=100)


class PoolIn(BaseModel):
    """Nodes of one GPU type."""

    model_config = REQUEST_CONFIG

    name: str = Name
    gpu: GpuRef
    nodes: JsonInt = Field(gt=0, le=MAX_NODES)
    gpus_per_node: JsonInt = Field(8, gt=0, le=1024)
    nvlink_domain: JsonInt | None = Field(
        None,
        gt=0,
        le=100_000,
        description="GPUs sharing NVLink (GB200 NVL72: 72 with 4 per node); default one node.",
    )
    nodes_per_rack: JsonInt | None = Field(
        None,
        gt=0,
        le=MAX_NODES,
        description="Nodes per rack or rail group; default the whole pool.",
    )
    unavailable_nodes: list[JsonInt] = Field(
        default_factory=list, max_length=MAX_NODES, description="Busy or failed node ids (0-based)."
    )

    def to_domain(self) -> Pool:
        return Pool(
            self.name,
            self.gpu,
            self.nodes,
            self.gpus_per_node,
            self.nvlink_domain,
            self.nodes_per_rack,
            frozenset(self.unavailable_nodes),
        )


class PlanClusterIn(BaseModel):
    model_config = REQUEST_CONFIG

    pools: list[PoolIn] = Field(min_length=1, max_length=MAX_POOLS)


class RunningIn(BaseModel):
    """Where a running job runs now."""

    model_config = REQUEST_CONFIG

    pool: str = Name
    nodes: list[JsonInt] = Field(min_length=1, max_length=MAX_NODES)


class DeadlineIn(BaseModel):
    """`tokens` still to train, within `hours` from the plan's `now` or by the date `by`."""

    model_config = REQUEST_CONFIG

    tokens: float = Field(gt=0, le=1e18)
    hours: float | None = Field(None, gt=0, le=1e6)
    by: IsoDate | None = Field(None, description="ISO 8601 date; needs the plan's `now`.")

    @model_validator(mode="after")
    def _one_of(self) -> DeadlineIn:
        if (self.hours is None) == (self.by is None):
            raise ValueError("a deadline gives exactly one of hours and by")
        return self


class JobRequestIn(BaseModel):
    """What the job trains: the request every route takes, less the cluster (the plan
    chooses it)."""

    model_config = REQUEST_CONFIG

    model: ModelRef
    training: TrainingSpec = TrainingSpec()
    profile: ProfileName = Field(
        DEFAULT_PROFILE,
        description=f"Cost-model profile; default {DEFAULT_PROFILE}, as every route.",
    )
    assumptions: CostAssumptions = CostAssumptions()
    search: SearchSpace = SearchSpace()
    engine: EngineName = Field(
        DEFAULT_ENGINE,
        description="The training engine that runs the job: its rules bound every layout of "
        "the job's scaling curve, its gradient sync prices them, and its artefact is the job's "
        f"`export`. Default {DEFAULT_ENGINE}, as every route.",
    )
    engine_settings: EngineSettingsIn = {}

    def to_request(self, cluster: ClusterSpec) -> Request:
        """The job's request on `cluster`, its engine resolved once here."""
        job = TrainingJob(model=self.model, cluster=cluster, training=self.training)
        engine = get_engine(self.engine, self.engine_settings)
        return Request(job, self.search, None, self.profile, self.assumptions, engine)


GPU_COUNT_PATTERN = r"^[1-9][0-9]{0,7}$"


def _gpu_count(key: str) -> str:
    if not re.fullmatch(GPU_COUNT_PATTERN, key):
        raise ValueError(f"{key[:20]!r} is not a GPU count: a whole number from 1, as a JSON key")
    return key


GpuCount = Annotated[
    str,
    AfterValidator(_gpu_count),
    WithJsonSchema({"type": "string", "pattern": GPU_COUNT_PATTERN}),
]
MeasuredFigure = Annotated[float, Field(gt=0, le=1e18)]
MeasuredIn = Annotated[
    dict[
        Annotated[str, StringConstraints(min_length=1, max_length=100)],
        Annotated[dict[GpuCount, MeasuredFigure], Field(min_length=1, max_length=64)],
    ],
    Field(
        min_length=1,
        max_length=MAX_POOLS * 4,
        description="The job's own measured throughput, per GPU type (a pool's GPU name) and "
        'GPU count, in the job\'s own unit: `{"a100-80gb": {"8": 1200.0, "16": 2300.0}}`. The '
        "plan then prices nothing for the job and gives it no layout; counts that are not whole "
        "nodes of a pool are not offered there. With it the job's `request` is optional and, "
        "when given, only names what it trains.",
    ),
]


class JobIn(BaseModel):
    model_config = REQUEST_CONFIG

    name: str = Name
    request: JobRequestIn | None = None
    throughput: MeasuredIn | None = None
    # a floor, not gt=0: a subnormal weight (5e-324) made the objective's integer scale
    # infinite, and the plan an internal error
    weight: float = Field(
        1.0, ge=1e-6, le=1000, description="Its share of the objective (1e-6 to 1,000)."
    )
    min_gpus: JsonInt = Field(1, gt=0, le=10_000_000)
    max_gpus: JsonInt | None = Field(None, gt=0, le=10_000_000)
    node_counts: list[JsonInt] | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Node counts to price; default powers of two.",
    )
    movable: bool = Field(True, description="A running job may change nodes; false pins it.")
    resizable: bool = Field(True, description="A running job may change its GPU count.")
    preemptible: bool = Field(True, description="May be given nothing.")
    running: RunningIn | None = None
    restart_minutes: float = Field(
        10.0, ge=0, le=100_000, description="Training lost when moved or resized."
    )
    checkpoint_minutes: float | None = Field(
        None,
        gt=0,
        le=100_000,
        description="Minutes between its checkpoints, for a job that cannot save one before it "
        "is moved: a move or resize then also loses half an interval of training on average, "
        "and after a failure a deadline counts that training again. Unset: it saves on demand.",
    )
    deadline: DeadlineIn | None = None

    @model_validator(mode="after")
    def _priced_or_measured(self) -> JobIn:
        if self.request is None and self.throughput is None:
            raise ValueError("a job gives its `request` (to be priced) or its `throughput`")
        return self


class PlanRequestIn(BaseModel):
    """A cluster snapshot, the jobs, and the objective a scheduler chose."""

    model_config = REQUEST_CONFIG

    cluster: PlanClusterIn
    jobs: list[JobIn] = Field(max_length=MAX_JOBS)
    objective: Literal["throughput", "fairness", "deadlines", "tokens"] = Field(
        "throughput",
        description="throughput: the sum of each job's weight times its share of its best "
        "alone; tokens: weighted tokens/s summed as they are (jobs of different sizes trade "
        "unevenly); fairness: Sia's p-norm of the shares; deadlines: met weight, then throughput.",
    )
    fairness_p: float = Field(
        DEFAULT_FAIRNESS_P, ge=-10, lt=0, description="The p-norm's exponent (Sia: -0.5)."
    )
    horizon_minutes: float = Field(
        60.0, gt=0, le=1e6, description="How long the plan holds: restart costs spread over it."
    )
    now: IsoDate | None = Field(None, description="The plan's now, for deadlines given by date.")
    assign_nodes: bool = Field(
        True, description="false: pools and GPU counts only (Sia's problem)."
    )
    time_limit_s: float | None = Field(
        None, gt=0, le=600, description="Whole call; default the server's."
    )
    gap_limit: float = Field(
        0.0, ge=0, le=1, description="Stop at this relative gap; 0 proves optimality."
    )
    explain: bool = Field(True, description="Who got less and why, what one more node buys.")

    def to_problem(self) -> PlanProblem:
        pools = tuple(pool.to_domain() for pool in self.cluster.pools)
        # each job's request starts on one node of the first pool; the plan moves it
        start = pools[0].cluster(1)
        jobs = tuple(self._job(i, job, start) for i, job in enumerate(self.jobs))
        return PlanProblem(
            pools, jobs, self.objective, self.fairness_p, self.horizon_minutes, self.assign_nodes
        )

    def settings(
        self, time_limit_s: float, workers: int = 1, stop: StopSignal | None = None
    ) -> PlanSettings:
        return PlanSettings(
            time_limit_s, workers, 0, self.gap_limit, self.explain, stop=stop or StopSignal()
        )

    def _job(self, i: int, job: JobIn, start: ClusterSpec) -> PlanJob:
        measured = None if job.throughput is None else self._measured(i, job.throughput)
        # a measured job is priced from its figures alone: its request is not asked
        request = None if job.request is None or measured else job.request.to_request(start)
        running = (
            None if job.running is None else Running(job.running.pool, tuple(job.running.nodes))
        )
        return PlanJob(
            job.name,
            request,
            job.weight,
            job.min_gpus,
            job.max_gpus,
            None if job.node_counts is None else tuple(sorted(set(job.node_counts))),
            job.movable,
            job.resizable,
            job.preemptible,
            running,
            job.restart_minutes,
            deadline=self._deadline(i, job.deadline),
            measured=measured,
            checkpoint_minutes=job.checkpoint_minutes,
        )

    def _measured(self, i: int, table: dict[str, dict[str, float]]) -> MeasuredThroughput:
        """The job's own figures, each GPU type a pool's or a preset's (a typo would otherwise
        leave the job nowhere to run without a word)."""
        pools = {pool.gpu.name for pool in self.cluster.pools}
        for gpu in table:
            if gpu not in pools and gpu not in gpu_presets():
                raise InvalidSpec(
                    f"job {self.jobs[i].name!r}: throughput measured on {gpu!r}, neither a "
                    f"pool's GPU type ({', '.join(sorted(pools))}) nor a GPU preset",
                    "jobs.throughput",
                )
        return MeasuredThroughput.of(
            {
                gpu: {int(count): value for count, value in counts.items()}
                for gpu, counts in table.items()
            }
        )

    def _deadline(self, i: int, deadline: DeadlineIn | None) -> Deadline | None:
        if deadline is None:
            return None
        if deadline.hours is not None:
            return Deadline(deadline.tokens, deadline.hours)
        if self.now is None or deadline.by is None:
            raise InvalidSpec(
                f"job {self.jobs[i].name!r}: a deadline given by date needs the plan's `now`: "
                "the plan never reads the "
                "clock, so that the same request always gives the same plan",
                "jobs.deadline.by",
            )
        hours = (deadline.by - self.now).total_seconds() / 3600
        if hours <= 0:
            raise InvalidSpec(
                f"job {self.jobs[i].name!r}: its deadline {deadline.by} is not after now",
                "jobs.deadline.by",
            )
        return Deadline(deadline.tokens, hours)
