"""Answers: estimates, optimizations and frontiers turned into the rounded JSON of the
interface contract (../shared/spec/interface.md), and the error shape."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from models.artefact import Artefact
from models.layout import Dimension, Layout
from optimizer import (
    MEMORY_FIT,
    Choice,
    Conflict,
    Estimate,
    Interval,
    MemoryFit,
    OptimizeResult,
    ParetoResult,
    Relaxation,
    Slack,
    Status,
    TiedLayout,
    memory_fit_words,
)

MEMORY_DECIMALS = 2  # GB, as the plate prints


FRACTION_DECIMALS = 4


class LayoutOut(BaseModel):
    tp: int
    pp: int
    cp: int
    dp: int
    vpp: int
    micro_batch: int
    micro_batches: int
    zero: int
    recompute: str
    placement: list[Dimension]
    schedule: str = "1f1b"
    ep: int = 1


class MemoryOut(BaseModel):
    weights: float
    gradients: float
    optimizer: float
    activations: float
    fragmentation: float = Field(
        0.0, description="What PyTorch's allocator reserves beyond the tensors (profile standard)."
    )
    runtime: float = Field(
        0.0,
        description="Memory outside PyTorch's allocator: the CUDA context and NCCL's buffers "
        "(profile standard).",
    )
    total: float
    capacity: float


class MfuStepOut(BaseModel):
    name: str
    mfu: float


class ExportOut(BaseModel):
    """What the engine reads to run the layout, written in its own input: Megatron-LM's
    `pretrain_gpt.py` flags, torchtitan's command-line overrides, a DeepSpeed JSON config,
    Megatron-Bridge (NeMo) overrides, or the resolved layout as JSON (generic)."""

    engine: str = Field(description="The request's engine.")
    format: str = Field(
        description="megatron-args, torchtitan-cli, torchtitan-config-module, deepspeed-json, "
        "hydra-overrides or layout-json."
    )
    filename: str = Field(description="A name to save `text` under.")
    text: str = Field(description="The artefact itself, as the engine reads it.")


EXPORT_DESCRIPTION = (
    "The layout in the request's engine's own input: in evaluate answers, optimize's `best` "
    "and every pareto point. Null with `export_error` when the engine cannot run the layout; "
    "null without it where no export is made: the alternatives inside an optimize answer "
    "(ask evaluate or /v1/export for those), to keep answers small."
)


class IntervalOut(BaseModel):
    """Where the measured figures are expected, at `coverage`."""

    step_time_s: tuple[float, float]
    mfu: tuple[float, float]
    memory_gb: tuple[float, float] | None = Field(
        None, description="Device memory; null where no run of a like regime reports a peak."
    )
    coverage: float = Field(description="The share of like runs the range is built to hold.")
    basis: str = Field(description="The published runs the range rests on, and their regime.")


def interval_out(interval: Interval) -> IntervalOut:
    memory = interval.memory_gb
    return IntervalOut(
        step_time_s=(round(interval.step_time_s[0], 4), round(interval.step_time_s[1], 4)),
        mfu=(_fraction(interval.mfu[0]), _fraction(interval.mfu[1])),
        memory_gb=None if memory is None else (round(memory[0], 2), round(memory[1], 2)),
        coverage=interval.coverage,
        basis=interval.basis,
    )


class EstimateOut(BaseModel):
    """One priced layout, rounded as the plate prints: GB to 2 decimals, fractions to 4."""

    profile: str
    layout: LayoutOut
    memory_gb: MemoryOut
    fits: bool = Field(description="The memory estimate is within the device's capacity.")
    fits_interval: bool | None = Field(
        None,
        description="The upper end of the memory interval is within the capacity too: the "
        "searches' default rule (search.memory_fit interval) would choose the layout. Null "
        "without a memory interval (profile workshop).",
    )
    bubble: float
    mfu: float
    mfu_steps: list[MfuStepOut]
    step_time_s: float
    tokens_per_s_per_gpu: float
    times_s: dict[str, float]
    warnings: list[str]
    hfu: float | None = None  # hardware FLOPs utilisation, where the profile reports it
    mfu_fp8_peak: float | None = Field(
        None,
        description="Under training.precision fp8, mxfp8 or nvfp4: the model FLOPs over that "
        "format's dense peak; `mfu` stays over the bf16 dense peak, as Megatron-LM and "
        "torchtitan report it. Null in bf16.",
    )
    mfu_fp8_peak_format: str | None = Field(
        None, description="The format whose dense peak `mfu_fp8_peak` is over. Null in bf16."
    )
    export: ExportOut | None = Field(None, description=EXPORT_DESCRIPTION)
    export_error: str | None = Field(
        None,
        description="Why the request's engine cannot run the layout (every rule it breaks); "
        "null when `export` is given or none was asked for.",
    )
    interval: IntervalOut | None = Field(
        None,
        description="The range the published runs' misses of the same regime give the "
        "measured figures (docs/validation.md, 'Intervals'); under profile standard only.",
    )


def _gb(value_bytes: float) -> float:
    return round(value_bytes / 1e9, MEMORY_DECIMALS)


def _fraction(value: float) -> float:
    return round(value, FRACTION_DECIMALS)


def layout_out(layout: Layout, micro_batches: int) -> LayoutOut:
    return LayoutOut(
        tp=layout.tp,
        pp=layout.pp,
        cp=layout.cp,
        dp=layout.data_parallel_size,
        vpp=layout.vpp,
        micro_batch=layout.micro_batch,
        micro_batches=micro_batches,
        zero=layout.zero,
        recompute=layout.recompute.value,
        placement=list(layout.placement),
        schedule=layout.schedule.value,
        ep=layout.ep,
    )


def export_out(artefact: Artefact) -> ExportOut:
    return ExportOut(
        engine=artefact.engine,
        format=artefact.format,
        filename=artefact.filename,
        text=artefact.text,
    )


def estimate_out(estimate: Estimate) -> EstimateOut:
    layout, memory = estimate.layout, estimate.memory
    return EstimateOut(
        profile=estimate.profile,
        layout=layout_out(layout, estimate.micro_batches),
        memory_gb=MemoryOut(
            weights=_gb(memory.weights),
            gradients=_gb(memory.gradients),
            optimizer=_gb(memory.optimizer),
            activations=_gb(memory.activations),
            fragmentation=_gb(memory.fragmentation),
            runtime=_gb(memory.runtime),
            total=_gb(memory.total),
            capacity=_gb(memory.capacity),
        ),
        fits=estimate.fits,
        fits_interval=estimate.fits_interval,
        bubble=_fraction(estimate.bubble),
        mfu=_fraction(estimate.mfu),
        mfu_steps=[MfuStepOut(name=s.name, mfu=_fraction(s.mfu)) for s in estimate.mfu_steps],
        step_time_s=round(estimate.step_time_s, 4),
        tokens_per_s_per_gpu=round(estimate.tokens_per_s_per_gpu, 2),
        times_s={name: float(f"{value:.6g}") for name, value in estimate.times_s.items()},
        warnings=list(estimate.warnings),
        hfu=None
        if estimate.hardware_flops_utilization is None
        else _fraction(estimate.hardware_flops_utilization),
        mfu_fp8_peak=None if estimate.mfu_fp8_peak is None else _fraction(estimate.mfu_fp8_peak),
        mfu_fp8_peak_format=estimate.mfu_fp8_peak_format,
        export=None if estimate.export is None else export_out(estimate.export),
        export_error=estimate.export_error,
        interval=None if estimate.interval is None else interval_out(estimate.interval),
    )


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail


class PresetsOut(BaseModel):
    """The catalogue: each preset's spec and the source of its figures."""

    models: dict[str, dict[str, Any]]
    gpus: dict[str, dict[str, Any]]


class ReadyOut(BaseModel):
    status: str
    solver_admitted: int = Field(description="Solves running or queued now.")
    solver_running: int = Field(description="Of those, the solves a worker has started.")
    solver_capacity: int = Field(description="Workers plus queue depth: more gets 503.")
    solver_processes_alive: int | None = Field(
        None, description="With SOLVE_IN=processes, the solver processes alive (else null)."
    )


class BindingOut(BaseModel):
    """A rule that holds the optimum back, and the best layout without it."""

    name: str
    description: str
    relaxed_mfu: float | None
    relaxed: EstimateOut | None
    step_up: EstimateOut | None = Field(
        None,
        description="Memory limit only: the least-memory layout that beats the optimum, i.e. "
        "the smallest raise of the limit that buys anything.",
    )


class RelaxationOut(BindingOut):
    """One relaxable rule of the request: whether relaxing it raises the best MFU; the relaxed
    MFU and layout only when it does."""

    binds: bool


class ChoiceOut(BaseModel):
    """One of the optimum's less common choices (context parallelism, a zero-bubble or
    DualPipe schedule, interleaving, ZeRO-3, recomputation, expert parallelism) and the best
    layout of the same request without it; `without_mfu` null means nothing fits without it."""

    name: str
    description: str
    without_mfu: float | None
    without: EstimateOut | None


def choice_out(choice: Choice) -> ChoiceOut:
    return ChoiceOut(
        name=choice.name,
        description=choice.description,
        without_mfu=None if choice.without_mfu is None else _fraction(choice.without_mfu),
        without=None if choice.without is None else estimate_out(choice.without),
    )


class SolverOut(BaseModel):
    wall_s: float
    proved_optimal: bool
    solves: int = 0
    workers: int = 1
    explain_wall_s: float = 0.0
    bound: float | None = Field(
        None,
        description="The most MFU any layout of the search could reach, as far as the solver "
        "proved: the optimum's MFU when optimal; null when nothing was proved.",
    )
    gap: float | None = Field(
        None, description="(bound - mfu) / bound of the answer: 0 when optimal."
    )


STATUS_DESCRIPTION = (
    "What was proved: optimal (the best, proved), feasible (a layout, not proved best: see "
    "solver.bound and solver.gap), infeasible (proved: see conflict), unknown (the time ran out "
    "before either; never read it as infeasible)."
)


class TiedOut(BaseModel):
    """A layout tied with the optimum: its MFU within the width of the optimum's interval."""

    layout: LayoutOut
    mfu: float
    step_time_s: float
    memory_gb: float = Field(description="Its total memory per device, GB.")
    interval: IntervalOut | None
    mechanism: str = Field(
        description="The effect of the MFU waterfall whose charge differs most from the "
        "optimum's: what their difference rests on, and what a measured run would settle."
    )
    why: str


def tied_out(tie: TiedLayout) -> TiedOut:
    estimate = tie.estimate
    return TiedOut(
        layout=layout_out(estimate.layout, estimate.micro_batches),
        mfu=_fraction(estimate.mfu),
        step_time_s=round(estimate.step_time_s, 4),
        memory_gb=_gb(estimate.memory.total),
        interval=None if estimate.interval is None else interval_out(estimate.interval),
        mechanism=tie.mechanism,
        why=tie.why,
    )


class MemoryFitOut(BaseModel):
    """The rule the search held each layout's memory to (search.memory_fit) and, for an
    optimum under the interval's margin, what the margin costs."""

    rule: Literal["interval", "point"] = Field(
        description="interval: the memory interval's upper end within the limit; point: the "
        "estimate alone (asked for, or the profile gives no interval: see `description`)."
    )
    limit_gb: float = Field(
        description="The limit as stated: search.memory_limit_gb, or the device's capacity."
    )
    upper_ratio: float = Field(
        description="The memory interval's upper end over the estimate for jobs of this "
        "regime (at least 1); 1 under the point rule."
    )
    point_limit_gb: float = Field(
        description="What the estimate itself was held under: limit_gb / upper_ratio."
    )
    basis: str | None = Field(None, description="The published runs upper_ratio rests on.")
    description: str = Field(description="The rule in words, with its numbers.")
    binds: bool | None = Field(
        None,
        description="Whether the margin holds the optimum back (the best layout at the "
        "estimate alone has a higher MFU, or only it finds a layout); null where there is no "
        "margin or it was not worked out (explain false, or the time limit).",
    )
    point_best: EstimateOut | None = Field(
        None,
        description="When the margin binds: the best layout with the estimate alone held to "
        "the limit (search.memory_fit point), i.e. what the margin costs.",
    )
    point_mfu_gain: float | None = Field(
        None,
        description="point_best's MFU minus the optimum's, where both exist: the margin's "
        "cost in MFU (fraction).",
    )


def memory_fit_out(
    fit: MemoryFit, best: Estimate | None = None, relaxations: tuple[Relaxation, ...] = ()
) -> MemoryFitOut:
    """`fit` with what relaxing it buys, where a relaxation named memory_fit says so."""
    relaxed = next((r for r in relaxations if r.name == MEMORY_FIT), None)
    point = None if relaxed is None else relaxed.relaxed
    gain = None if point is None or best is None else _fraction(point.mfu - best.mfu)
    return MemoryFitOut(
        rule="interval" if fit.rule == "interval" else "point",
        limit_gb=_gb(fit.limit_bytes),
        upper_ratio=round(fit.upper_ratio, FRACTION_DECIMALS),
        point_limit_gb=_gb(fit.point_limit_bytes),
        basis=fit.basis,
        description=memory_fit_words(fit),
        binds=None if relaxed is None else relaxed.binds,
        point_best=None if point is None else estimate_out(point),
        point_mfu_gain=gain,
    )


class OptimizeOut(BaseModel):
    status: Status = Field(description=STATUS_DESCRIPTION)
    best: EstimateOut | None
    binding: list[BindingOut]
    slack: list[Slack]  # the optimiser's own value objects, as they are
    conflict: list[Conflict]
    warnings: list[str]
    solver: SolverOut
    relaxations: list[RelaxationOut] = Field(default_factory=list)
    choices: list[ChoiceOut] = Field(
        default_factory=list,
        description="What each of the optimum's less common choices buys: the best without it.",
    )
    explanations_complete: bool = Field(
        False,
        description="Every relaxation, choice or conflict was worked out, within the time limit "
        "and the tables' size guard (`warnings` says which stopped them); only then does an "
        "empty `binding` mean that nothing holds the optimum back.",
    )
    explanations_skipped: list[str] = Field(
        default_factory=list,
        description="What was not worked out because the space it would search is over the "
        "tables' size guard, each with why (e.g. 'node_size not relaxed: search space too "
        "large: ...', or 'every explanation: ...'); each also has a warning. Empty with "
        "`explanations_complete` false: the time limit stopped them.",
    )
    explained: bool = Field(
        True,
        description="Whether explanations were worked out: false when the request said "
        "explain: false (or no layout came back to explain), so `binding`, `relaxations`, "
        "`choices` and `conflict` are empty because they were not asked for, not because "
        "nothing binds.",
    )
    tied: list[TiedOut] = Field(
        default_factory=list,
        description="Under profile standard, with explanations: the best layouts (up to 5, one "
        "per layout up to its placement) tied with the optimum, their MFU within the width of "
        "its interval (the intervals overlap), best first, each with the mechanism their "
        "difference rests on. Empty under workshop, which gives no interval (`tied_note`).",
    )
    tied_note: str | None = Field(
        None,
        description="How far the search for tied layouts went (only the degree tuples whose "
        "MFU ceiling reaches a floor under the optimum are priced), or why it was not made.",
    )
    memory_fit: MemoryFitOut | None = Field(
        None,
        description="The rule each layout's memory was held to (search.memory_fit) and, with "
        "explanations, what the interval's margin costs (also the relaxation named "
        "memory_fit).",
    )


class ParetoOut(BaseModel):
    """Non-dominated layouts, memory ascending and MFU ascending."""

    frontier: list[EstimateOut] = Field(
        description="Each point warned of the request's engine's rules it breaks, with its "
        "export or the engine's refusal."
    )
    warnings: list[str]
    solver: SolverOut
    status: Status = Field(
        "optimal",
        description="optimal: the whole frontier, proved; feasible: a partial frontier (the "
        "high-memory end; the time ran out); infeasible: proved empty; unknown: empty, nothing "
        "proved.",
    )
    complete: bool = Field(True, description="Every point of the frontier was found and proved.")
    memory_fit: MemoryFitOut | None = Field(
        None,
        description="The rule each point's memory was held to (search.memory_fit): under "
        "interval, layouts whose memory interval's upper end is over the limit are not points.",
    )


def _binding_fields(relaxation: Relaxation) -> dict[str, Any]:
    return {
        "name": relaxation.name,
        "description": relaxation.description,
        "relaxed_mfu": None
        if relaxation.relaxed_mfu is None
        else _fraction(relaxation.relaxed_mfu),
        "relaxed": None if relaxation.relaxed is None else estimate_out(relaxation.relaxed),
        "step_up": None if relaxation.step_up is None else estimate_out(relaxation.step_up),
    }


def optimize_out(result: OptimizeResult) -> OptimizeOut:
    return OptimizeOut(
        status=result.status,
        best=None if result.best is None else estimate_out(result.best),
        binding=[BindingOut(**_binding_fields(b)) for b in result.binding],
        slack=list(result.slack),
        conflict=list(result.conflict),
        warnings=list(result.warnings),
        solver=SolverOut(**vars(result.solver)),
        relaxations=[
            RelaxationOut(**_binding_fields(r), binds=r.binds) for r in result.relaxations
        ],
        choices=[choice_out(choice) for choice in result.choices],
        explanations_complete=result.explanations_complete,
        explanations_skipped=list(result.explanations_skipped),
        explained=result.explained,
        tied=[tied_out(tie) for tie in result.tied],
        tied_note=result.tied_note,
        memory_fit=None
        if result.memory_fit is None
        else memory_fit_out(result.memory_fit, result.best, result.relaxations),
    )


def pareto_out(result: ParetoResult) -> ParetoOut:
    return ParetoOut(
        frontier=[estimate_out(estimate) for estimate in result.frontier],
        warnings=list(result.warnings),
        solver=SolverOut(wall_s=result.wall_s, proved_optimal=result.proved),
        status=result.status,
        complete=result.proved,
        memory_fit=None if result.memory_fit is None else memory_fit_out(result.memory_fit),
    )
