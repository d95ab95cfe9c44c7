"""Training engines as data: what each offers, the rules a layout must satisfy to run on
it, how it runs what it offers, and the artefact that runs a layout on it.

Depends only on `models` and `optimizer.costmodel` (its grid).

    engine = get_engine("megatron")
    mask = valid_mask(engine, job, grid)          # rows of a LayoutGrid it can run
    problems = violations(engine, job, layout)    # sentences with the numbers
    artefact = export(engine, job, layout)        # or InvalidSpec listing the problems
"""

from __future__ import annotations

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout

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
from .rules import ensure_runnable, rule_masks, valid_mask, violations
from .torchtitan import TORCHTITAN

ENGINES: dict[str, Engine] = {
    engine.name: engine for engine in (MEGATRON, TORCHTITAN, DEEPSPEED, NEMO, GENERIC)
}


def get_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise InvalidSpec(f"unknown engine {name!r}; known: {', '.join(ENGINES)}", "engine")
    return ENGINES[name]


def export(engine: Engine, job: TrainingJob, layout: Layout) -> Artefact:
    """The engine's artefact for the layout, or InvalidSpec listing every rule it breaks."""
    return engine.exporter(job, ensure_runnable(engine, job, layout))


__all__ = [
    "ENGINES",
    "Artefact",
    "Engine",
    "EngineRule",
    "EngineRuntime",
    "Feature",
    "GradientSync",
    "Offers",
    "Overlap",
    "ensure_runnable",
    "export",
    "get_engine",
    "rule_masks",
    "valid_mask",
    "violations",
]
