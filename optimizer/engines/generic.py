"""The engine-agnostic model: every knob the project prices, no engine's rules, run the way
the cost model assumes (docs/cost-model.md), exported as the layout itself."""

from __future__ import annotations

import json

from models.job import TrainingJob
from models.layout import Layout, Recompute, Schedule

from .base import (
    ZERO_STAGES,
    Artefact,
    Engine,
    EngineRuntime,
    Offers,
    Overlap,
    offered,
    sync,
)

LABEL = "generic"
COST_MODEL = "layoutopt docs/cost-model.md"
EVERYTHING = f"{COST_MODEL} (the profiles price every value)"

OFFERS = Offers(
    schedules={s: offered(s.value, EVERYTHING) for s in Schedule},
    interleaving=offered("vpp", EVERYTHING),
    zero={z: offered(f"zero {z}", EVERYTHING) for z in ZERO_STAGES},
    recompute={r: offered(r.value, EVERYTHING) for r in Recompute},
    tensor_parallel=offered("tp", EVERYTHING),
    context_parallel=offered("cp", EVERYTHING),
    expert_parallel=offered("ep", EVERYTHING),
    sequence_parallel=offered(
        "assumption sequence_parallel", "layoutopt optimizer/costmodel/assumptions/"
    ),
    uneven_stages=offered("any split", EVERYTHING),
)

_ONCE = f"{COST_MODEL}, 'ZeRO-3 / FSDP': without ZeRO-3 gradients reduce once a step, 2 n bytes"

RUNTIME = EngineRuntime(
    gradient_sync=(
        sync(0, "per_step", "all-reduce", 2, "none", _ONCE),
        sync(
            1,
            "per_step",
            "reduce-scatter",
            2,
            "per_step",
            f"{_ONCE} (reduce-scatter plus all-gather)",
        ),
        sync(
            2,
            "per_step",
            "reduce-scatter",
            2,
            "per_step",
            f"{_ONCE} (reduce-scatter plus all-gather)",
        ),
        sync(
            3,
            "per_micro_batch",
            "reduce-scatter",
            2,
            "per_micro_batch",
            f"{COST_MODEL}, 'ZeRO-3 / FSDP': gathers before forward and backward, reduce-scatter, "
            "every micro-batch",
        ),
    ),
    overlaps=(
        Overlap(
            "grad_reduce",
            True,
            True,
            "one micro-batch of the busiest stage",
            f"{COST_MODEL} (dp_overlap_microbatches)",
        ),
        Overlap(
            "param_gather",
            True,
            True,
            "with the first forward",
            f"{COST_MODEL} (dp_overlap_microbatches)",
        ),
        Overlap("tp_comm", False, False, "not priced as hidden", COST_MODEL),
        Overlap(
            "p2p",
            False,
            False,
            "pp_p2p_overlap_fraction = 0",
            f"{COST_MODEL} (pp_p2p_overlap_fraction)",
        ),
    ),
)


def export(job: TrainingJob, layout: Layout) -> Artefact:
    """The resolved layout as the request's `layout` object, with its micro-batch count."""
    body = {
        "layout": layout.model_dump(mode="json"),
        "micro_batches": layout.micro_batches(job.training.global_batch),
    }
    return Artefact("generic", "layout-json", "layout.json", json.dumps(body, indent=2) + "\n")


GENERIC = Engine(
    name="generic",
    label=LABEL,
    version="layoutopt's own cost model",
    offers=OFFERS,
    rules=(),
    runtime=RUNTIME,
    exporter=export,
)
