"""Profile `standard`: the time recomputation adds to a layer on one micro-batch, full or
selective (Megatron-LM's stated share or its module list, or torchtitan's op-level policy),
and the share of the forward matmuls it runs again (docs/cost-model.md, "Activations"
and "Engines")."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from models.job import TrainingJob
from models.transformer import TransformerSpec
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.compute import (
    elementwise_kernels,
    elementwise_s,
    every_second_matmul_share,
)
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.costmodel.standard.recompute_modules import module_drop

Number = Any


def forward_s(matmul: Number, attention: Number, fused_attention: bool) -> Number:
    """A layer's forward: a third of its matmuls and one of attention's passes, of which fused
    kernels run 3.5 (times.FUSED_ATTENTION_KERNEL_FLOPS_RATIO: FlashAttention's backward
    recomputes the scores) and unfused ones 3."""
    passes = 3 * tim.FUSED_ATTENTION_KERNEL_FLOPS_RATIO if fused_attention else 3.0
    return matmul / 3 + attention / passes


def stated_share_recompute_s(
    recompute: Number,
    matmul: Number,
    attention: Number,
    fused_attention: bool,
    selective_overhead: float,
    replayed_s: Number,
) -> Number:
    """Seconds a layer's recomputation adds on one micro-batch, as Megatron-LM runs it. Full:
    its forward again (forward_s). Selective (Korthikanti et al. 2022): `selective_overhead`,
    a stated share of the layer, plus `replayed_s`, the forward of the matmuls a module list
    checkpoints (replayed_matmul_share)."""
    forward = forward_s(matmul, attention, fused_attention)
    return tim.recompute_s(matmul + attention, recompute, selective_overhead, forward) + replayed_s


def op_level_recompute_s(
    recompute: Number,
    matmul: Number,
    attention: Number,
    fused_attention: bool,
    replayed_s: Number,
    elementwise_forward_s: Number,
) -> Number:
    """The same seconds under selective recompute at op level (torchtitan): every op whose
    output the policy does not save runs its forward again. The saved ones are aten.mm (all
    but every second of a layer's), SDPA, reduce-scatter, abs and max (pytorch/torchtitan@9dec370
    torchtitan/parallelisms/parallelize_llama.py l.214-258), so the replay is every second
    matmul's forward (`replayed_s`) plus the whole forward of the elementwise kernels (norms,
    rotary, the MLP activation, residual adds: `elementwise_forward_s`), and no attention.
    Full: its forward again."""
    forward = forward_s(matmul, attention, fused_attention)
    full = tim.recompute_s(matmul + attention, recompute, 0.0, forward)
    op_level = replayed_s + elementwise_forward_s
    return np.where(recompute == mem.RECOMPUTE_SELECTIVE, op_level, full)


def replayed_matmul_share(
    model: TransformerSpec,
    recompute: Number,
    op_level: bool,
    modules: Collection[str] | None,
) -> Number:
    """Share of the layers' forward matmuls selective recompute replays: every second one
    under op-level checkpointing, those of the checkpointed `modules` under Megatron-Core's
    list, else none."""
    if op_level:
        share = every_second_matmul_share(model)
    elif modules is not None:
        share = module_drop(model, modules).replayed_matmul_share
    else:
        return 0.0
    return np.where(recompute == mem.RECOMPUTE_SELECTIVE, share, 0.0)


def layer_recompute_s(
    job: TrainingJob,
    a: CostAssumptions,
    k: Degrees,
    tokens: Number,
    gemm: Number,
    matmul: Number,
    attention: Number,
) -> Number:
    """Seconds a layer's recomputation adds on one micro-batch, as the engine recomputes: a
    stated share or a module list, or op-level checkpointing. Where the request's recompute
    policy is read; the formulas above take its numbers."""
    replayed = engine_replayed_share(job, a, k.recompute) * gemm / 3  # their forward
    if a.selective_recompute_matmuls == "none":
        overhead = a.selective_recompute_time_overhead
        return stated_share_recompute_s(
            k.recompute, matmul, attention, a.fused_attention, overhead, replayed
        )
    kernels = elementwise_kernels(job, a)
    elementwise = elementwise_s(job.model, kernels, k, tokens, forward_only=True)
    return op_level_recompute_s(
        k.recompute, matmul, attention, a.fused_attention, replayed, elementwise
    )


def engine_replayed_share(job: TrainingJob, a: CostAssumptions, recompute: Number) -> Number:
    """replayed_matmul_share under the engine's recompute policy, as the request states it."""
    op_level = a.selective_recompute_matmuls != "none"
    return replayed_matmul_share(job.model, recompute, op_level, a.selective_recompute_modules)
