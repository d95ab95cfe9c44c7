"""How engines split `num_layers` transformer layers over pp * vpp pipeline chunks.

Chunks are numbered in model order, chunk c = v * pp + r (rank r's v-th virtual stage), as
Megatron-Core lists them (`pipeline_parallel_layer_layout.py:48-55` at d98e8a6) and
torchtitan assigns them to ranks in its looped style (`pipeline_parallel.py:541-572`,
0.3.0). Predicates are vectorised over numpy arrays (or plain ints); the split builders
that exporters call are scalar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

SplitMethod = Literal["even", "first_last", "account_for", "layout"]


def balanced_chunk_layers(num_layers: int, num_chunks: int) -> tuple[int, ...]:
    """Layers per chunk, differing by at most one. The extra layers go to the interior
    chunks first, in model order (so round-robin over ranks), and to the first and last
    chunks only when every interior chunk has one: those two also hold the embedding and
    the loss."""
    base, extra = divmod(num_layers, num_chunks)
    interior_first = list(range(1, num_chunks - 1)) + [0, num_chunks - 1][: min(num_chunks, 2)]
    heavier = set(interior_first[:extra])
    return tuple(base + (c in heavier) for c in range(num_chunks))


# --- Megatron-Core (Megatron-LM and Megatron-Bridge) ----------------------------------


def mcore_even(num_layers: Any, pp: Any, vpp: Any) -> Any:
    """Every chunk the same: layers % pp == 0 and layers per rank % vpp == 0
    (`transformer_block.py:154-178`, and `arguments.py:985-998` / `:953-977`)."""
    return num_layers % (pp * vpp) == 0


def mcore_first_last(num_layers: Any, pp: Any, vpp: Any) -> Any:
    """Some uneven first/last stage exists (`transformer_config.py:2293-2369`): first and
    last > 0 and divisible by vpp, the middle layers divisible by the pp - 2 middle stages
    and per middle rank by vpp, middle layers present iff middle stages are. With every
    count a multiple of vpp that is: vpp divides the layers and there are at least pp * vpp
    of them."""
    return (pp >= 2) & (num_layers % vpp == 0) & (num_layers >= pp * vpp)


def mcore_account_for(num_layers: Any, pp: Any, vpp: Any) -> Any:
    """Embedding and loss each counted as a layer (`--account-for-embedding-in-pipeline-
    split`, `--account-for-loss-in-pipeline-split`): (layers + 2) % pp == 0 and per rank % vpp
    == 0 (`transformer_config.py:2371-2414`)."""
    return (num_layers + 2) % (pp * vpp) == 0


@dataclass(frozen=True)
class McoreSplit:
    """The split an exporter writes, and the layers of each chunk it yields."""

    method: SplitMethod
    chunk_layers: tuple[int, ...]
    first_stage_layers: int | None = None  # first_last only (whole rank, all its chunks)
    last_stage_layers: int | None = None
    layout: str | None = None  # layout only: `--pipeline-model-parallel-layout`


def mcore_split(num_layers: int, pp: int, vpp: int) -> McoreSplit:
    """The simplest Megatron-Core split whose largest chunk is the balanced one: even, then
    uneven first/last stages, then embedding and loss counted as layers, then an explicit
    layout string (which takes any split, `pipeline_parallel_layer_layout.py:86-107`)."""
    chunks = pp * vpp
    balanced = balanced_chunk_layers(num_layers, chunks)
    if pp == 1 or mcore_even(num_layers, pp, vpp):
        return McoreSplit("even", balanced)
    first_last = _balanced_first_last(num_layers, pp, vpp)
    if first_last is not None:
        first, last, middle = first_last
        per_chunk = [middle // vpp] * chunks
        for v in range(vpp):
            per_chunk[v * pp], per_chunk[v * pp + pp - 1] = first // vpp, last // vpp
        return McoreSplit("first_last", tuple(per_chunk), first, last)
    if mcore_account_for(num_layers, pp, vpp):
        items = (num_layers + 2) // chunks
        per_chunk = [items] * chunks
        per_chunk[0] -= 1  # the embedding
        per_chunk[-1] -= 1  # the loss
        return McoreSplit("account_for", tuple(per_chunk))
    return McoreSplit("layout", balanced, layout=megatron_layout_string(balanced))


def _balanced_first_last(num_layers: int, pp: int, vpp: int) -> tuple[int, int, int] | None:
    """(first, last, middle per rank) with no rank above ceil(layers / pp) and no chunk above
    ceil(layers / (pp * vpp)): the same peak as the balanced split. None if there is none."""
    if not mcore_first_last(num_layers, pp, vpp):
        return None
    cap_rank = -(-num_layers // pp)
    cap_rank = min(cap_rank, vpp * -(-num_layers // (pp * vpp))) // vpp * vpp
    middle_stages = pp - 2
    for middle in range(cap_rank, 0, -vpp) if middle_stages else [0]:
        rest = num_layers - middle_stages * middle
        first = rest // 2 // vpp * vpp
        last = rest - first
        if vpp <= first <= cap_rank and vpp <= last <= cap_rank and last % vpp == 0:
            return first, last, middle
    return None


def megatron_layout_string(chunk_layers: tuple[int, ...]) -> str:
    """`--pipeline-model-parallel-layout`: chunks split by "|", E the embedding, L the loss,
    t a decoder layer, `t*7` seven of them (`pipeline_parallel_layer_layout.py:283-320`)."""
    stages = []
    for c, layers in enumerate(chunk_layers):
        body = "t" if layers == 1 else f"t*{layers}" if layers else ""
        first, last = "E" if c == 0 else "", "L" if c == len(chunk_layers) - 1 else ""
        stages.append(first + body + last)
    return "|".join(stages)


def layout_string_chunks(layout: str) -> tuple[int, ...]:
    """Decoder layers ("t") per chunk of a `--pipeline-model-parallel-layout`, unrolled as
    Megatron-Core parses it (`pipeline_parallel_layer_layout.py:283-320`): commas dropped,
    `(..)*n` then `x*n` repeated, chunks split on "|"; E, L and m (an MTP layer) hold none."""
    text = layout.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        text = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), text)
    unknown = set(text) - set("ELtm|")
    if unknown:
        raise ValueError(f"pipeline layout {layout!r}: unknown layer characters {sorted(unknown)}")
    return tuple(chunk.count("t") for chunk in text.split("|"))


def layout_string_ranks(layout: str, pp: int) -> tuple[int, ...]:
    """Decoder layers per pipeline rank of a layout string: chunk c is rank c % pp's."""
    chunks = layout_string_chunks(layout)
    if len(chunks) % pp:
        raise ValueError(f"pipeline layout {layout!r}: {len(chunks)} chunks over pp({pp}) ranks")
    return tuple(sum(chunks[r::pp]) for r in range(pp))


# --- torchtitan 0.3.0 -----------------------------------------------------------------

# `pipeline_parallel_first_stage_less_layers` / `_last_stage_less_layers` defaults (1, 1):
# the embedding and the output head each weigh one layer (configs.py:191, 197).
TITAN_END_WEIGHTS = 2


def titan_layers_per_stage(num_layers: Any, pp: Any, vpp: Any) -> Any:
    """The `pipeline_parallel_layers_per_stage` whose stage count ceil((layers + 2) / lps) is
    pp * vpp (`pipeline_parallel.py:219-242`): ceil((layers + 2) / (pp * vpp)), valid iff it
    does not already reach that count with one stage fewer."""
    effective, stages = num_layers + TITAN_END_WEIGHTS, pp * vpp
    return -(-effective // stages)


def titan_stages_ok(num_layers: Any, pp: Any, vpp: Any) -> Any:
    """torchtitan can build pp * vpp stages: 1 per rank (single-stage schedules) or 2 (the
    looped default) need nothing; more need a layers-per-stage giving exactly pp * vpp, and
    every stage at least one effective layer (`pipeline_parallel.py:258-264, 400-417`)."""
    effective, stages = num_layers + TITAN_END_WEIGHTS, pp * vpp
    lps = titan_layers_per_stage(num_layers, pp, vpp)
    exact = (stages - 1) * lps < effective
    return np.asarray(((vpp <= 2) | exact) & (stages <= effective))


def titan_stage_layers(num_layers: int, num_stages: int) -> tuple[int, ...]:
    """Transformer layers per stage as `_generate_llm_fqn_per_model_part` assigns them
    (`pipeline_parallel.py:366-477`): effective layers spread evenly, extras to the first
    stages, one effective layer of the first and last stages taken by embedding and head."""
    if num_stages == 1:
        return (num_layers,)
    effective = num_layers + TITAN_END_WEIGHTS
    base, extra = divmod(effective, num_stages)
    per_stage = [base + (s < extra) for s in range(num_stages)]
    per_stage[0] -= 1
    per_stage[-1] -= 1
    return tuple(per_stage)


def plan_chunk_layers(rank_layers: tuple[int, ...], vpp: int) -> tuple[int, ...]:
    """A stage plan's layers per chunk in model order (chunk v * pp + r is rank r's v-th):
    each rank's layers spread over its vpp chunks as evenly as they go."""
    per_rank = [balanced_chunk_layers(n, vpp) for n in rank_layers]
    return tuple(per_rank[r][v] for v in range(vpp) for r in range(len(rank_layers)))


def plan_layout_string(rank_layers: tuple[int, ...], vpp: int) -> str:
    """A stage plan (layers per pipeline rank) as `--pipeline-model-parallel-layout`."""
    return megatron_layout_string(plan_chunk_layers(rank_layers, vpp))


def plan_split(rank_layers: tuple[int, ...], vpp: int) -> McoreSplit:
    """A stage plan as the split an exporter writes: always an explicit layout."""
    chunks = plan_chunk_layers(rank_layers, vpp)
    return McoreSplit("layout", chunks, layout=megatron_layout_string(chunks))
