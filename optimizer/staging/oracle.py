"""Every stage plan of a layout, priced by the cost model: the exact oracle the CP-SAT stage
model is checked against on small models, never the production path (a 126-layer model on
16 ranks has C(125, 15) ~ 10^18 splits)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product

from models.job import TrainingJob
from models.layout import Layout
from models.stage_plan import StagePlan
from models.transformer import TransformerSpec
from optimizer.costmodel import RECOMPUTE_CODES, CostAssumptions
from optimizer.costmodel import stage_plans as sp
from optimizer.staging.search import PlanFound

# Llama 3 8B's widths on 8 layers: small enough that every split and mode can be priced
# (8 layers on 4 ranks: 35 splits), the model the oracle's checks and benchmark use.
ORACLE_MODEL = TransformerSpec(
    num_layers=8,
    hidden_size=4096,
    ffn_hidden_size=14336,
    num_attention_heads=32,
    num_kv_heads=8,
    vocab_size=128256,
)


def compositions(total: int, parts: int, least: int) -> Iterator[tuple[int, ...]]:
    """Every way to write `total` as `parts` ordered counts of at least `least` each."""
    if parts == 1:
        if total >= least:
            yield (total,)
        return
    for first in range(least, total - least * (parts - 1) + 1):
        for rest in compositions(total - first, parts - 1, least):
            yield (first, *rest)


def best_plan_exhaustive(
    job: TrainingJob,
    a: CostAssumptions,
    layout: Layout,
    modes: tuple[int, ...],
    uniform: bool,
    memory_limit_bytes: float,
) -> PlanFound | None:
    """The plan of least step time that fits, by pricing every one."""
    terms = sp.plan_terms(job, a, layout)
    pp, best = layout.pp, None
    mode_choices = [(m,) * pp for m in modes] if uniform else list(product(modes, repeat=pp))
    for layers in compositions(job.model.num_layers, pp, layout.vpp):
        for choice in mode_choices:
            plan = StagePlan(layers=layers, recompute=tuple(RECOMPUTE_CODES[m] for m in choice))
            price = sp.price_plan_terms(job, a, terms, plan)
            if price.memory_bytes > memory_limit_bytes:
                continue
            if best is None or price.step_time_s < best.price.step_time_s:
                best = PlanFound(layout, plan, price)
    return best
