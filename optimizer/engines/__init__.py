"""Training engines as data: what each offers, the rules a layout must satisfy to run on
it, how it runs what it offers, and the artefact that runs a layout on it.

Depends only on `models` and `optimizer.costmodel` (its grid).

    engine = get_engine("megatron")
    mask = valid_mask(engine, job, grid)          # rows of a LayoutGrid it can run
    problems = violations(engine, job, layout)    # sentences with the numbers
    artefact = export(engine, job, layout)        # or InvalidSpec listing the problems
    priced = engine_assumptions(engine, assumptions)  # how it syncs gradients, as assumptions

`EngineName` is a request's `engine` field (an enum in the published schema), defaulting to
DEFAULT_ENGINE on every route.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout, resolve_layout
from optimizer.costmodel import Estimate

from .base import (
    Artefact,
    Engine,
    EngineRule,
    EngineRuntime,
    Feature,
    GradientSync,
    Offers,
    Overlap,
)
from .deepspeed import DEEPSPEED
from .generic import GENERIC
from .megatron import MEGATRON
from .nemo import NEMO
from .pricing import engine_assumptions
from .rules import broken_rules, ensure_runnable, refusal, rule_masks, valid_mask, violations
from .settings import settings_named, settings_runtime
from .stages import plan_layout_string
from .torchtitan import TORCHTITAN
from .versions import split_spec, version_named

ENGINES: dict[str, Engine] = {
    engine.name: engine for engine in (MEGATRON, TORCHTITAN, DEEPSPEED, NEMO, GENERIC)
}


def get_engine(spec: str, settings: Mapping[str, object] | None = None) -> Engine:
    """The engine a request names (`megatron`, `megatron@core_r0.14`) at that version, with
    the version's settings and the request's `settings` over them in force: asked once per
    request, where the request is parsed."""
    name, version_name = split_spec(known_engine(spec))
    engine = ENGINES[name]
    stated = settings_named(engine.settings, settings or {}, engine.name)
    if not engine.versions:
        return replace(engine, settings_in_force=stated)
    release = version_named(engine.versions, version_name, engine.name, engine.release_months)
    release.check_stated(stated, engine.name)
    in_force = {**release.defaults, **stated}
    runtime = settings_runtime(engine.settings, in_force, engine.runtime)
    return replace(engine, release=release, settings_in_force=in_force, runtime=runtime)


def known_engine(spec: str) -> str:
    """`spec` if it names an engine, and a version of it after `@` (a validator: the error
    lists the known ones)."""
    name, version = split_spec(spec)
    if name not in ENGINES:
        raise InvalidSpec(f"unknown engine {name!r}; known: {', '.join(ENGINES)}", "engine")
    if version is not None:
        engine = ENGINES[name]
        version_named(engine.versions, version, name, engine.release_months)
    return spec


def engine_specs() -> list[str]:
    """Every name a request's `engine` may take: each engine bare and at each version."""
    return [
        spec
        for engine in ENGINES.values()
        for spec in (engine.name, *(f"{engine.name}@{v.name}" for v in engine.versions))
    ]


# A request's engine: an engine's name, at a release after `@` or its newest. Published with
# the versions read as examples, not an enum: a release with no profile of its own is priced
# by the one standing for it (versions.version_named).
ENGINE_PATTERN = rf"^({'|'.join(ENGINES)})(@[A-Za-z0-9._-]{{1,40}})?$"
EngineName = Annotated[
    str,
    AfterValidator(known_engine),
    Field(
        max_length=60,
        json_schema_extra={"pattern": ENGINE_PATTERN, "examples": engine_specs()},
        description="megatron, torchtitan, deepspeed, nemo or generic, optionally at a release "
        "after @ (megatron@core_r0.14, nemo@25.09): a release with no profile of its own is "
        "priced by the nearest read before it, or the one whose span holds it, and said so "
        "in a warning (docs/engines.md, 'Versions and settings')",
    ),
]
# A request's `engine_settings`: the engine's own named flags, checked against the engine
# (and its version) where the request is resolved, by get_engine.
SettingIn = Annotated[str, Field(max_length=100)]
EngineSettingsIn = Annotated[
    dict[
        Annotated[str, Field(max_length=100)],
        bool
        | int
        | Annotated[str, Field(max_length=100)]
        | Annotated[list[SettingIn], Field(max_length=64)],
    ],
    Field(
        max_length=64,
        description="The engine's own named settings as its launch would state them "
        "(e.g. tp_comm_overlap, overlap_grad_reduce, grad_reduce_in_fp32), each over its "
        "version's default; unknown names are an error listing the known ones "
        "(docs/engines.md, 'Versions and settings').",
    ),
]
# One default on every route, so that re-pricing an answer's layout is an identity: a layout
# that some engine runs, Megatron-LM's (its Megatron-Core rules are NeMo's). The plate's
# engine-agnostic model is asked for by name (`generic`).
DEFAULT_ENGINE = "megatron"


def engine_placed(layout: Layout, engine: Engine) -> Layout:
    """`layout` laid in the engine's default rank order when the request named no placement
    (a Layout's own default is the plate's tp<cp<pp<dp, which Megatron-LM does not lay)."""
    if "placement" in layout.model_fields_set or not engine.rank_orders:
        return layout
    return layout.model_copy(update={"placement": engine.rank_orders[0]})


def export(
    engine: Engine,
    job: TrainingJob,
    layout: Layout,
    recompute_modules: Sequence[str] | None = None,
) -> Artefact:
    """The engine's artefact for the layout, or InvalidSpec listing every rule it breaks;
    `recompute_modules`, the request's selective module list, where the engine writes one."""
    runnable = ensure_runnable(engine, job, layout)
    return _artefact(engine, job, runnable, **_module_list(engine, recompute_modules))


def judged(
    engine: Engine,
    job: TrainingJob,
    estimate: Estimate,
    recompute_modules: Sequence[str] | None = None,
) -> Estimate:
    """`estimate` with the engine's verdict on its layout: each rule it breaks among the
    warnings (the figures stay the cost model's), and its artefact or the refusal. Every
    route's estimates carry it, so a study row, a plan job and an HTTP answer say the same."""
    resolved = resolve_layout(estimate.layout, job)
    broken = broken_rules(engine, job, resolved)  # asked once: the refusal lists them too
    warnings = estimate.warnings + tuple(w for w in broken if w not in estimate.warnings)
    if broken:
        return replace(estimate, warnings=warnings, export_error=refusal(engine, broken))
    try:
        artefact = _artefact(engine, job, resolved, **_module_list(engine, recompute_modules))
    except InvalidSpec as refused:
        return replace(estimate, warnings=warnings, export_error=refused.message)
    return replace(estimate, warnings=warnings, export=artefact)


# Engines whose exporter writes a stage plan (an explicit pipeline layout), and a selective
# recompute module list (Megatron-Core's recompute_modules).
PLAN_EXPORTERS = ("megatron", "nemo")


def export_plan(
    engine: Engine,
    job: TrainingJob,
    layout: Layout,
    rank_layers: tuple[int, ...],
    recompute_modules: Sequence[str] | None = None,
) -> Artefact:
    """The engine's artefact for the layout with a stage plan's layers per rank."""
    if engine.name not in PLAN_EXPORTERS:
        raise InvalidSpec(
            f"engine {engine.name} writes no per-rank layer split; stage plans export for "
            f"{', '.join(PLAN_EXPORTERS)}",
            "engine",
        )
    runnable = ensure_runnable(engine, job, layout)
    modules = _module_list(engine, recompute_modules)
    return _artefact(engine, job, runnable, rank_layers=rank_layers, **modules)


def _artefact(engine: Engine, job: TrainingJob, layout: Layout, **keywords: Any) -> Artefact:
    """The exporter's artefact, or InvalidSpec naming its flags the release the request
    named would not parse (EngineVersion.check_artefact)."""
    artefact = engine.exporter(job, layout, **keywords)
    if engine.release is not None:
        engine.release.check_artefact(artefact, engine.name)
    return artefact


def _module_list(engine: Engine, modules: Sequence[str] | None) -> dict[str, object]:
    """The Megatron-Core exporters' keywords: a module list, the request's or else the
    engine's (the others price none: torchtitan refuses it, DeepSpeed offers no selective
    mode), and the settings in force."""
    if engine.name not in PLAN_EXPORTERS:
        return {}
    if modules is None:
        modules = engine.runtime.selective_recompute_modules
    named: dict[str, object] = {"settings": engine.settings_in_force}
    return named if modules is None else named | {"recompute_modules": tuple(modules)}


__all__ = [
    "PLAN_EXPORTERS",
    "export_plan",
    "plan_layout_string",
    "DEFAULT_ENGINE",
    "judged",
    "engine_placed",
    "ENGINES",
    "Artefact",
    "Engine",
    "EngineRule",
    "EngineName",
    "EngineSettingsIn",
    "engine_specs",
    "EngineRuntime",
    "Feature",
    "GradientSync",
    "Offers",
    "Overlap",
    "engine_assumptions",
    "ensure_runnable",
    "export",
    "get_engine",
    "known_engine",
    "rule_masks",
    "valid_mask",
    "violations",
]
