"""Rules shared in shape between engines (each engine supplies its label and source), the
rules every engine's offers imply, and their evaluation on grids and single layouts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout, Recompute, Schedule, resolve_layout
from optimizer.costmodel import LayoutGrid, recompute_code, schedule_code

from .base import Engine, EngineRule, Feature, Offers

# --- rules implied by what an engine offers -------------------------------------------


def offer_rules(label: str, offers: Offers) -> tuple[EngineRule, ...]:
    """One rule per knob whose values the engine restricts (none for knobs it runs fully)."""
    rules = (
        _schedule_rule(label, offers),
        _choice_rule(label, "zero", "ZeRO stages", offers.zero, lambda x: x.zero),
        _choice_rule(
            label,
            "recompute",
            "recompute modes",
            {recompute_code(r): f for r, f in offers.recompute.items()},
            lambda x: x.recompute,
            names={recompute_code(r): r.value for r in Recompute},
        ),
        _degree_rule(label, "tp", "tensor parallelism", offers.tensor_parallel),
        _degree_rule(label, "cp", "context parallelism", offers.context_parallel),
        _degree_rule(label, "ep", "expert parallelism", offers.expert_parallel),
    )
    return tuple(rule for rule in rules if rule is not None)


def _schedule_rule(label: str, offers: Offers) -> EngineRule | None:
    runs = [s for s, f in offers.schedules.items() if f.offered]
    interleaves = offers.interleaving.offered
    if len(runs) == len(Schedule) and interleaves:
        return None
    codes = np.asarray([schedule_code(s) for s in runs], dtype=np.int64)
    names = [s.value for s in runs] + (["1f1b interleaved (vpp > 1)"] if interleaves else [])
    reasons = [f.source for s, f in offers.schedules.items() if not f.offered]
    if not interleaves:
        reasons.append(offers.interleaving.source)

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        # Without a pipeline no schedule runs: the row's schedule is moot and exported as none.
        known = np.isin(grid.schedule_codes, codes)
        return (grid.pp == 1) | (known & ((grid.vpp == 1) | interleaves))

    def detail(job: TrainingJob, layout: Layout) -> str:
        if layout.schedule in runs:
            return f"vpp {layout.vpp} interleaves {layout.schedule.value}"
        return f"schedule {layout.schedule.value} is not one of them"

    shown = ", ".join(names) + ("" if interleaves else " (no interleaving)")
    return EngineRule(
        name="schedule",
        description=f"{label} runs only the pipeline schedules {shown} when pp > 1",
        source="; ".join(dict.fromkeys(reasons)),
        check=check,
        detail=detail,
    )


def _choice_rule(
    label: str,
    knob: str,
    noun: str,
    features: Mapping[int, Feature],
    column: Callable[[LayoutGrid], np.ndarray],
    names: Mapping[int, str] | None = None,
) -> EngineRule | None:
    """`column(grid)` must be one of the values `features` marks offered."""
    runs = [value for value, f in features.items() if f.offered]
    if len(runs) == len(features):
        return None
    values = np.asarray(runs, dtype=np.int64)
    shown = [str((names or {}).get(v, v)) for v in runs]

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.isin(column(grid), values)

    def detail(job: TrainingJob, layout: Layout) -> str:
        value = getattr(layout, knob)
        return f"{knob} {getattr(value, 'value', value)} is not one of them"

    return EngineRule(
        name=knob,
        description=f"{label} runs only the {noun} {', '.join(shown)}",
        source="; ".join(dict.fromkeys(f.source for f in features.values() if not f.offered)),
        check=check,
        detail=detail,
    )


def _degree_rule(label: str, dim: str, noun: str, feature: Feature) -> EngineRule | None:
    if feature.offered:
        return None

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray(getattr(grid, "expert_parallel" if dim == "ep" else dim) == 1)

    def detail(job: TrainingJob, layout: Layout) -> str:
        return f"{dim} = {getattr(layout, dim)}"

    return EngineRule(
        name=dim,
        description=f"{label} has no {noun} this project prices: {dim} must be 1",
        source=feature.source,
        check=check,
        detail=detail,
    )


# --- rules of the same shape in several engines ---------------------------------------


def heads_divisible_by_tp(label: str, source: str) -> EngineRule:
    return _count_divisible_by_tp("heads_divisible_by_tp", "num_attention_heads", label, source)


def kv_heads_divisible_by_tp(label: str, source: str) -> EngineRule:
    return _count_divisible_by_tp("kv_heads_divisible_by_tp", "num_kv_heads", label, source)


def _count_divisible_by_tp(name: str, field: str, label: str, source: str) -> EngineRule:
    """The model's `field` (a count of heads) split evenly over tp."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray(getattr(job.model, field) % grid.tp == 0)

    def detail(job: TrainingJob, layout: Layout) -> str:
        count = getattr(job.model, field)
        return f"{count} % {layout.tp} = {count % layout.tp}"

    return EngineRule(name, f"{label} requires {field} % tp == 0", source, check, detail)


def experts_divisible_by_ep(label: str, source: str) -> EngineRule:
    """ep > 1 needs a mixture-of-experts model whose expert count ep divides."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        ep, experts = grid.expert_parallel, job.model.num_experts
        return np.asarray((ep == 1) | ((experts > 0) & (experts % ep == 0)))

    def detail(job: TrainingJob, layout: Layout) -> str:
        experts = job.model.num_experts
        return f"num_experts {experts} % ep {layout.ep} = {experts % layout.ep}"

    return EngineRule(
        "experts_divisible_by_ep",
        f"{label} requires num_experts % ep == 0 (and experts at all when ep > 1)",
        source,
        check,
        detail,
    )


def seq_len_divisible_by_2cp(label: str, source: str) -> EngineRule:
    """Load-balanced causal CP splits each sequence into 2 * cp chunks."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray((grid.cp == 1) | (job.training.seq_len % (2 * grid.cp) == 0))

    def detail(job: TrainingJob, layout: Layout) -> str:
        seq = job.training.seq_len
        return f"{seq} % {2 * layout.cp} != 0"

    return EngineRule(
        "seq_len_divisible_by_2cp",
        f"{label} requires seq_len % (2 * cp) == 0 when cp > 1",
        source,
        check,
        detail,
    )


def batch_identity(label: str, identity: str, source: str) -> EngineRule:
    """global batch = micro-batch * micro-batches * dp, in the engine's own words."""

    def check(job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
        return np.asarray(job.training.global_batch % (grid.micro_batch * grid.dp) == 0)

    def detail(job: TrainingJob, layout: Layout) -> str:
        batch, dp = job.training.global_batch, layout.data_parallel_size
        return f"{batch} % ({layout.micro_batch} * {dp}) != 0"

    return EngineRule("batch_identity", f"{label} requires {identity}", source, check, detail)


# --- evaluation -----------------------------------------------------------------------


def rule_masks(engine: Engine, job: TrainingJob, grid: LayoutGrid) -> dict[str, np.ndarray]:
    """Each rule's mask over the grid's rows (broadcast to the grid's length)."""
    shape = grid.tp.shape
    return {
        rule.name: np.broadcast_to(rule.check(job, grid), shape).astype(bool)
        for rule in engine.rules
    }


def valid_mask(engine: Engine, job: TrainingJob, grid: LayoutGrid) -> np.ndarray:
    """Rows of the grid the engine can run: every rule holds."""
    mask = np.ones(grid.tp.shape, dtype=bool)
    for rule_mask in rule_masks(engine, job, grid).values():
        mask &= rule_mask
    return mask


def violations(engine: Engine, job: TrainingJob, layout: Layout) -> list[str]:
    """Each rule the layout breaks, as a sentence with its numbers. The layout is resolved
    against the job first (the project's own rules raise InvalidSpec)."""
    return broken_rules(engine, job, resolve_layout(layout, job))


def ensure_runnable(engine: Engine, job: TrainingJob, layout: Layout) -> Layout:
    """The resolved layout, or InvalidSpec listing every rule of the engine it breaks."""
    resolved = resolve_layout(layout, job)
    broken = broken_rules(engine, job, resolved)
    if broken:
        raise InvalidSpec(refusal(engine, broken), "engine")
    return resolved


def refusal(engine: Engine, broken: Sequence[str]) -> str:
    """Why the engine cannot run a layout: every rule it breaks."""
    return f"{engine.label} cannot run this layout: {'; '.join(broken)}"


def broken_rules(engine: Engine, job: TrainingJob, resolved: Layout) -> list[str]:
    grid = LayoutGrid.from_layouts([resolved])
    return [
        f"{rule.description}: {rule.detail(job, resolved)}"
        for rule in engine.rules
        if not bool(np.broadcast_to(rule.check(job, grid), (1,))[0])
    ]
