"""A request as the optimiser takes it: the job, what may be searched or the layout to
price, and how it is priced (profile, assumptions, engine), parsed once at the edge and
handed on whole, as torchtitan builds its `ParallelDims` once from the config.

    request = Request(job, space=SearchSpace(max_vpp=4), engine=get_engine("torchtitan"))
    optimize(request, SolveSettings(time_limit_s=10))

Every route shares its defaults: profile `standard` (it charges every knob a search turns,
so an answer's layout evaluated again gives the answer's figures) and engine `megatron`
(optimizer.engines.DEFAULT_ENGINE). The workshop plate and the engine-agnostic model are
asked for by name; `engine=None` prices with no engine's rules, gradient sync or verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout
from optimizer.calibration import Reach, within_reach
from optimizer.costmodel import CostAssumptions
from optimizer.engines import DEFAULT_ENGINE, Engine, engine_assumptions, get_engine
from optimizer.search import SearchSpace

DEFAULT_PROFILE = "standard"
DEFAULT_ENGINE_SPEC = get_engine(DEFAULT_ENGINE)


@dataclass(frozen=True)
class Request:
    """One request, every route's: what `evaluate`, `optimize`, `pareto`, `stage_plans`,
    a plan's jobs, a calibration's runs and a study's scenarios take."""

    job: TrainingJob
    space: SearchSpace = field(default_factory=SearchSpace)
    layout: Layout | None = None  # the layout `evaluate` prices; the searches choose one
    profile: str = DEFAULT_PROFILE
    assumptions: CostAssumptions = field(default_factory=CostAssumptions)  # the request's own
    engine: Engine | None = DEFAULT_ENGINE_SPEC
    explain: bool = True  # optimize: what binds the optimum and what each choice buys
    per_stage_recompute: bool | None = None  # stage_plans: None, where the engine allows it
    time_limit_s: float | None = None  # what the request asks; the caller's budget caps it

    @property
    def engine_name(self) -> str | None:
        return None if self.engine is None else self.engine.name

    @cached_property
    def reach(self) -> Reach:
        """The request's assumptions with a calibration's fitted values held to their reach
        (optimizer.calibration.reach): outside it the default prices them, and `notes` say
        which and why."""
        return within_reach(self.assumptions, self.job, self.engine)

    @property
    def notes(self) -> tuple[str, ...]:
        """What every answer to the request warns of how it is priced: a calibration's values
        outside their reach, an engine release priced by another's profile."""
        release = None if self.engine is None else self.engine.release
        stands_in = () if release is None or release.note is None else (release.note,)
        return stands_in + tuple(self.reach.notes)

    @cached_property
    def priced(self) -> CostAssumptions:
        """The request's assumptions within their reach, with its engine's way of running
        laid under them (its gradient sync, kernels, overlaps); no engine: the
        engine-agnostic figures."""
        if self.engine is None:
            return self.reach.assumptions
        return engine_assumptions(self.engine, self.reach.assumptions, self.job.training.precision)

    @property
    def recompute_modules(self) -> Sequence[str] | None:
        """The request's selective recompute module list, where it names one."""
        return self.assumptions.selective_recompute_modules

    def on(self, cluster: ClusterSpec) -> Request:
        """The same request for the same job on `cluster` (a plan moves its jobs so)."""
        job = self.job.model_copy(update={"cluster": cluster})
        return replace(self, job=job)
