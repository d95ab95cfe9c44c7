"""The search problem: a request's `search` object resolved against a job.

`resolve_space` turns the request into a `SearchProblem`: the valid (tp, pp, cp, dp) tuples,
the value list of every knob, and the user's restrictions, which the CP-SAT model enforces
with named literals (so that they can be relaxed and reported in infeasibility cores) and
the enumerator as masks. Which knobs a profile prices is data (`PRICED_KNOBS`): a profile
that prices more (cp, ZeRO-3, selective recompute) registers a wider entry and the search
opens up.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from models.errors import InvalidSpec
from models.hardware import fits_one_domain
from models.job import TrainingJob
from models.layout import Recompute, Schedule, chunks_hold_layers
from optimizer.costmodel import (
    DEGREE_COLUMNS,
    PLACEMENTS,
    LayoutGrid,
    device_capacity_bytes,
    recompute_code,
    schedule_code,
)
from optimizer.engines import Engine, EngineRule, rule_masks
from optimizer.search.space import SearchSpace

# Rules the user may relax; the CP-SAT model and the enumerator name them alike.
MEMORY_LIMIT = "memory_limit"
# Not a literal: the memory interval's margin, relaxed by holding the estimate alone to the
# limit (search.memory_fit point)
MEMORY_FIT = "memory_fit"
KV_HEADS = "kv_heads"
EVEN_STAGES = "even_stages"
MIN_INTERLEAVED_PP = "min_interleaved_pp"
# An engine's rules are relaxable rules too, named after the engine's own rule.
ENGINE_RULE_PREFIX = "engine_"


@dataclass(frozen=True)
class PricedKnobs:
    """The knob values a profile's formulas price; the search never leaves them."""

    cp: bool  # whether cp > 1 costs anything
    zero_stages: tuple[int, ...]
    recompute: tuple[Recompute, ...]
    micro_batches: tuple[int, ...] | None  # None: any size
    schedules: tuple[Schedule, ...] = (Schedule.ONE_F_ONE_B,)
    expert_parallel: bool = False  # whether ep > 1 (MoE all-to-alls) is priced
    # The search's default bound on interleaved chunks (a request's max_vpp overrides it).
    max_vpp: int = 4


PRICED_KNOBS: dict[str, PricedKnobs] = {
    # The plate prices tp, pp, vpp, ZeRO 0-2 and full recompute at micro-batch 1; under it
    # cp and ZeRO-3 would cost nothing, and a free search "prefers" cp = 128 with ZeRO-3.
    "workshop": PricedKnobs(
        cp=False,
        zero_stages=(0, 1, 2),
        recompute=(Recompute.NONE, Recompute.FULL),
        micro_batches=(1,),
        # The plate's v: workshop charges interleaving no sends, so an open bound is exploited.
        max_vpp=4,
    ),
    # Profile standard prices every knob (docs/cost-model.md). Interleaving's sends and
    # memory are charged, so the bound is the most chunks of a tuned recipe for the largest
    # preset: NVIDIA's Llama 3.1 405B (VP 8, dgxc-benchmarking); the explanation says what
    # more would buy.
    "standard": PricedKnobs(
        cp=True,
        zero_stages=(0, 1, 2, 3),
        recompute=(Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL),
        micro_batches=None,
        schedules=(Schedule.ONE_F_ONE_B, Schedule.ZERO_BUBBLE, Schedule.DUALPIPE),
        expert_parallel=True,
        max_vpp=8,
    ),
}


def priced_knobs(profile: str) -> PricedKnobs:
    return PRICED_KNOBS.get(profile, PRICED_KNOBS["workshop"])


# The knobs besides the degrees, in tie-break order after tp, pp, cp. Adding a knob here
# (with its values in `SearchProblem.knobs`) adds it to the enumerator and the CP-SAT model.
KNOBS: tuple[str, ...] = ("vpp", "micro_batch", "zero", "recompute", "schedule", "ep")


@dataclass(frozen=True)
class MemoryFit:
    """The rule a layout's memory is held to: under `interval`, the upper end of its memory
    interval (the point estimate times `upper_ratio`, its regime's worst-case measured over
    predicted peak) within the limit; under `point`, the estimate alone. `note`: why the rule
    is not the one the request asked for."""

    rule: str  # "interval" or "point" (search.memory_fit)
    limit_bytes: float  # the stated limit: search.memory_limit_gb or the device's
    upper_ratio: float = 1.0  # at least 1: the estimate itself is held to the limit too
    basis: str | None = None  # the runs the ratio rests on
    note: str | None = None

    @property
    def point_limit_bytes(self) -> float:
        """What the point estimate is held under."""
        return self.limit_bytes / self.upper_ratio

    @property
    def margin(self) -> bool:
        """Whether the rule holds the estimate under less than the limit."""
        return self.upper_ratio > 1.0


@dataclass(frozen=True)
class SearchProblem:
    """A search space resolved against one job: everything both searches enumerate."""

    job: TrainingJob
    profile: str
    degrees: np.ndarray  # (K, 4) int64 rows of (tp, pp, cp, dp), product = gpus
    knobs: dict[str, tuple[int, ...]]  # knob -> allowed values (recompute as codes)
    placements: tuple[int, ...]  # indices into PLACEMENTS
    memory_limit_bytes: float  # what the point estimate is held under (memory_fit's)
    require_kv_divisibility: bool
    fixed: dict[str, int]  # degree or knob -> value the user fixed
    allowed: dict[str, tuple[int, ...]]  # knob -> user's subset of the priced values
    max_vpp: int
    require_even_stages: bool = False
    min_interleaved_pp: int | None = None
    warnings: tuple[str, ...] = field(default=())
    engine: Engine | None = None  # whose rules the layout must keep (None: no engine's)
    # Rows whose MFU ceiling falls below this are left out of the tables: a search that needs
    # only layouts reaching it (optimizer/search/ceilings.py). None: every row.
    mfu_floor: float | None = None
    # The ceilings of the cells of these degree tuples when already computed (the tuples,
    # then [tuple, ceilings.CELL_AXES]), so that the floor's rows are not bounded twice; used
    # only while `degrees` are still those tuples. None: computed when needed.
    known_ceilings: tuple[np.ndarray, np.ndarray] | None = field(
        default=None, compare=False, repr=False
    )
    # The rule memory_limit_bytes comes from; None: the point estimate under the limit
    memory_fit: MemoryFit | None = None

    @property
    def gpus(self) -> int:
        return self.job.cluster.gpus

    @property
    def engine_rules(self) -> dict[str, EngineRule]:
        """The engine's rules by their search names (`engine_<rule>`)."""
        rules = () if self.engine is None else self.engine.rules
        return {ENGINE_RULE_PREFIX + rule.name: rule for rule in rules}

    def engine_breaks(self, grid: LayoutGrid) -> dict[str, np.ndarray]:
        """Per engine rule, the rows of `grid` that break it."""
        if self.engine is None:
            return {}
        masks = rule_masks(self.engine, self.job, grid)
        return {ENGINE_RULE_PREFIX + name: ~mask for name, mask in masks.items()}


def held_to(problem: SearchProblem, fit: MemoryFit) -> SearchProblem:
    """The same search with its layouts' memory held to `fit`."""
    return replace(problem, memory_limit_bytes=fit.point_limit_bytes, memory_fit=fit)


def at_point(problem: SearchProblem) -> SearchProblem:
    """The same search with the point estimate alone held to the stated limit."""
    fit = problem.memory_fit
    if fit is None or not fit.margin:
        return problem
    return held_to(problem, MemoryFit("point", fit.limit_bytes))


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


# Most (tp, pp, cp, dp) tuples a search may hold: every later step (placements, tables, the
# model's Booleans) grows with them. The presets reach a few hundred; 7,207,200 GPUs, with
# 576 divisors, would reach ~10^5.
MAX_DEGREE_TUPLES = 20_000


def degree_tuples(job: TrainingJob, cp_values: list[int], micro_batches: list[int]) -> np.ndarray:
    """Every (tp, pp, cp, dp) with product = gpus that the structural rules allow:
    tp divides the attention heads, pp <= layers, cp from `cp_values` (dividing seq_len),
    and dp * micro_batch divides the global batch for some allowed micro-batch. A filter for
    speed only: the CP-SAT model enforces the same rules itself (cpsat_structure.py).
    Vectorised over (pp, cp) per tp; refused past MAX_DEGREE_TUPLES."""
    gpus, model = job.cluster.gpus, job.model
    batch = job.training.global_batch
    gpu_divisors = np.asarray(divisors(gpus), dtype=np.int64)
    cps = np.asarray(cp_values, dtype=np.int64)
    micro = np.asarray(micro_batches, dtype=np.int64)
    blocks, count = [], 0
    for tp in gpu_divisors[model.num_attention_heads % gpu_divisors == 0].tolist():
        rest = gpus // tp
        pps = gpu_divisors[(rest % gpu_divisors == 0) & (gpu_divisors <= model.num_layers)]
        pp, cp = (a.ravel() for a in np.meshgrid(pps, cps, indexing="ij"))
        keep = rest % (pp * cp) == 0
        pp, cp = pp[keep], cp[keep]
        dp = rest // (pp * cp)
        keep = (batch % (dp[:, None] * micro[None, :]) == 0).any(axis=1)
        block = np.stack([np.full(int(keep.sum()), tp), pp[keep], cp[keep], dp[keep]], axis=1)
        count += len(block)
        if count > MAX_DEGREE_TUPLES:
            raise InvalidSpec(
                f"search space too large: more than {MAX_DEGREE_TUPLES:,} (tp, pp, cp, dp) "
                f"tuples divide gpus({gpus}); fix tp, pp or cp",
                "search",
            )
        blocks.append(block)
    return np.concatenate(blocks).astype(np.int64) if blocks else np.zeros((0, 4), np.int64)


def _opened(name: str, requested: list[Any] | None, priced: tuple[Any, ...], warnings: list[str]):
    """The requested values the profile prices; unpriced ones are dropped with a warning."""
    if requested is None:
        return tuple(priced)
    kept = tuple(value for value in requested if value in priced)
    dropped = [str(getattr(v, "value", v)) for v in requested if v not in priced]
    if dropped:
        shown = [str(getattr(v, "value", v)) for v in priced]
        fallback = "" if kept else f"; searching {shown} instead"
        warnings.append(f"this profile does not price {name} {dropped}: left out{fallback}")
    return kept or tuple(priced)


def _unsearched_chunks(num_layers: int, pp: int, vpp: int) -> list[str]:
    """A warning where the request fixes the num_layers + 2 chunks that evaluate prices (the
    embedding and loss a chunk each: models.layout.chunks_hold_layers) but the search, whose
    stage plans need a layer in every chunk, leaves out."""
    if vpp == 1 or pp * vpp <= num_layers or not chunks_hold_layers(num_layers, pp, vpp):
        return []
    return [
        f"pp({pp}) * vpp({vpp}) = {pp * vpp} chunks for num_layers({num_layers}): the search "
        "keeps a layer in every chunk and leaves this layout out; `evaluate` prices it, the "
        "embedding and the loss taking a chunk each"
    ]


def resolve_space(
    job: TrainingJob, space: SearchSpace, profile: str, engine: Engine | None = None
) -> SearchProblem:
    """Apply the profile's priced knobs to the request and list the valid degree tuples;
    `engine`'s rules join the request's as relaxable rules."""
    knobs, warnings = priced_knobs(profile), []
    cp_values = [1]
    if knobs.cp:
        cp_values = [c for c in divisors(job.training.seq_len) if job.cluster.gpus % c == 0]
    elif space.cp not in (None, 1):
        warnings.append(
            f"this profile does not price context parallelism: cp({space.cp}) ignored, cp = 1"
        )
    zero = _opened("ZeRO stages", space.zero_stages, knobs.zero_stages, warnings)
    schedules = _opened("schedules", space.schedules, knobs.schedules, warnings)
    ep_values = _expert_degrees(job, space, knobs, warnings)
    recompute = _opened("recompute", space.recompute, knobs.recompute, warnings)
    micro = space.micro_batches
    if knobs.micro_batches is not None:
        micro = list(_opened("micro-batch sizes", micro, knobs.micro_batches, warnings))
    fixed = {
        name: value
        for name, value in (
            ("tp", space.tp),
            ("pp", space.pp),
            ("cp", space.cp),
            ("vpp", space.vpp),
            ("ep", space.ep),
        )
        if value is not None and not (name == "cp" and not knobs.cp)
        if not (name == "ep" and len(ep_values) == 1)
    }
    placements = tuple(range(len(PLACEMENTS)))
    if space.placement is not None:
        placements = (PLACEMENTS.index(tuple(space.placement)),)
    elif engine is not None and engine.rank_orders:  # only the orders the engine lays ranks in
        placements = tuple(PLACEMENTS.index(order) for order in engine.rank_orders)
    limit_gb = space.memory_limit_gb
    if limit_gb is None:
        limit_gb = device_capacity_bytes(job.cluster.gpu, profile) / 1e9
    max_vpp = space.max_vpp or max(knobs.max_vpp, space.vpp or 1)
    if space.pp is not None and space.vpp is not None:
        warnings += _unsearched_chunks(job.model.num_layers, space.pp, space.vpp)
    return SearchProblem(
        job=job,
        profile=profile,
        degrees=degree_tuples(job, cp_values, list(micro)),
        knobs={
            "vpp": tuple(range(1, max_vpp + 1)),
            "micro_batch": tuple(micro),
            "zero": tuple(knobs.zero_stages),
            "recompute": tuple(recompute_code(r) for r in knobs.recompute),
            "schedule": tuple(schedule_code(s) for s in knobs.schedules),
            "ep": ep_values,
        },
        placements=placements,
        memory_limit_bytes=limit_gb * 1e9,
        require_kv_divisibility=space.require_tp_divides_kv_heads,
        require_even_stages=space.even_stages,
        min_interleaved_pp=space.min_interleaved_pp,
        fixed=fixed,
        allowed={
            "zero": zero,
            "recompute": tuple(recompute_code(r) for r in recompute),
            "schedule": tuple(schedule_code(s) for s in schedules),
        },
        max_vpp=max_vpp,
        warnings=tuple(warnings),
        engine=engine if engine is not None and engine.rules else None,
    )


def _expert_degrees(
    job: TrainingJob, space: SearchSpace, knobs: PricedKnobs, warnings: list[str]
) -> tuple[int, ...]:
    """ep values to search: the divisors of the expert count when the profile prices them."""
    if knobs.expert_parallel and job.model.is_moe:
        return tuple(divisors(job.model.num_experts))
    if space.ep not in (None, 1):
        warnings.append(
            f"ep({space.ep}) ignored: this profile and model search no expert parallelism, ep = 1"
        )
    return (1,)


def valid_knob_mask(
    job: TrainingJob,
    pp: np.ndarray,
    dp: np.ndarray,
    vpp: np.ndarray,
    micro_batch: np.ndarray,
    cp: np.ndarray | None = None,
    schedule: np.ndarray | None = None,
    ep: np.ndarray | None = None,
    structure: bool = True,
) -> np.ndarray:
    """Rows a layout may take: vpp > 1 only with pp > 1 and each chunk at least one layer (the
    search leaves out the num_layers + 2 chunks that evaluate also prices, the embedding and
    loss taking a chunk each: models.layout.chunks_hold_layers);
    dp * micro_batch divides the global batch; zero-bubble and DualPipe without interleaving,
    DualPipe on an even pp; ep divides dp * cp (models.layout's rules). `structure` False
    leaves out the first two (the CP-SAT model's own families then enforce them)."""
    layers, batch = job.model.num_layers, job.training.global_batch
    mask = np.ones(np.broadcast(pp, dp, vpp, micro_batch).shape, dtype=bool)
    if structure:
        mask &= (vpp == 1) | ((pp > 1) & (pp * vpp <= layers))
        mask &= batch % (dp * micro_batch) == 0
    if schedule is not None:
        dualpipe = schedule == schedule_code(Schedule.DUALPIPE)
        mask &= ((schedule == 0) | (vpp == 1)) & (~dualpipe | (pp % 2 == 0))
    if ep is not None and cp is not None:
        mask &= (dp * cp) % ep == 0
    return mask


def degree_columns(degrees: np.ndarray) -> dict[str, np.ndarray]:
    """(K, 4) degree rows as LayoutGrid's tp, pp, cp, dp columns."""
    return {name: degrees[:, i] for i, name in enumerate(DEGREE_COLUMNS)}


def narrow_to_rules(problem: SearchProblem) -> SearchProblem:
    """The same search with every rule applied to the domains up front: a smaller model for
    the solves that relax nothing (the optimum, the frontier). Relaxations and conflicts
    need the wide domains and the rules as literals."""
    degrees = problem.degrees
    keep = np.ones(len(degrees), dtype=bool)
    if problem.require_kv_divisibility:
        keep &= problem.job.model.num_kv_heads % degrees[:, 0] == 0
    for column, name in enumerate(("tp", "pp", "cp")):
        if name in problem.fixed:
            keep &= degrees[:, column] == problem.fixed[name]
    knobs = dict(problem.knobs)
    for knob, allowed in problem.allowed.items():
        knobs[knob] = tuple(value for value in knobs[knob] if value in allowed)
    for knob in set(problem.fixed) & set(KNOBS):
        knobs[knob] = tuple(value for value in knobs[knob] if value == problem.fixed[knob])
    return replace(problem, degrees=degrees[keep], knobs=knobs)


def fast_link_domain(problem: SearchProblem) -> int:
    """GPUs that share the fast links, as the profile prices them: workshop prices by node,
    other profiles by NVLink domain (which may span nodes, as in GB200 NVL72)."""
    cluster = problem.job.cluster
    return cluster.gpus_per_node if problem.profile == "workshop" else cluster.job_nvlink_domain


def on_fast_links(problem: SearchProblem, span: np.ndarray) -> np.ndarray:
    """Whether groups of `span` GPUs talk over NVLink, as the profile prices it: workshop's
    plate by size alone (t <= G), the others only when groups pack into whole domains."""
    domain = fast_link_domain(problem)
    return span <= domain if problem.profile == "workshop" else fits_one_domain(span, domain)
