"""Profile `standard`: the time recomputation adds to a layer on one micro-batch, full or
selective (Megatron-LM's stated share or its module list, or torchtitan's op-level policy),
and the share of the forward matmuls it runs again (docs/cost-model.md, "Activations"
and "Engines")."""

from __future__ import annotations

from typing import Any

import numpy as np

from models.job import TrainingJob
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.compute import elementwise_s, every_second_matmul_share
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.costmodel.standard.recompute_modules import module_drop

Number = Any


def forward_s(a: CostAssumptions, matmul: Number, attention: Number) -> Number:
    """A layer's forward: a third of its matmuls and one of attention's passes, of which fused
    kernels run 3.5 (times.FUSED_ATTENTION_KERNEL_FLOPS_RATIO: FlashAttention's backward
    recomputes the scores) and unfused ones 3."""
    passes = 3 * tim.FUSED_ATTENTION_KERNEL_FLOPS_RATIO if a.fused_attention else 3.0
    return matmul / 3 + attention / passes


def recompute_s(
    job: TrainingJob,
    a: CostAssumptions,
    k: Degrees,
    tokens: Number,
    gemm: Number,
    matmul: Number,
    attention: Number,
) -> Number:
    """Seconds a layer's recomputation adds on one micro-batch. Full: its forward again
    (forward_s). Selective, as Megatron-LM runs it (Korthikanti et al. 2022): a stated
    share of the layer. Selective at op level (torchtitan): every op whose output the policy
    does not save runs its forward again. The saved ones are aten.mm (all but every second
    of a layer's), SDPA, reduce-scatter, abs and max (pytorch/torchtitan@9dec370
    torchtitan/parallelisms/parallelize_llama.py l.214-258), so the replay is every second
    matmul's forward plus the whole forward of the elementwise kernels (norms, rotary, the
    MLP activation, residual adds), and no attention."""
    compute, forward = matmul + attention, forward_s(a, matmul, attention)
    # the replayed matmuls' forward: a module list's beside the overhead, or op level's
    replayed = replayed_matmul_share(job, a, k.recompute) * gemm / 3
    if a.selective_recompute_matmuls == "none":
        overhead = a.selective_recompute_time_overhead
        return tim.recompute_s(compute, k.recompute, overhead, forward) + replayed
    op_level = replayed + elementwise_s(job, a, k, tokens, forward_only=True)
    full = tim.recompute_s(compute, k.recompute, 0.0, forward)
    return np.where(k.recompute == mem.RECOMPUTE_SELECTIVE, op_level, full)


def replayed_matmul_share(job: TrainingJob, a: CostAssumptions, recompute: Number) -> Number:
    """Share of the layers' forward matmuls selective recompute replays: every second one
    under op-level checkpointing, those of the checkpointed modules under Megatron-Core's
    list, else none."""
    if a.selective_recompute_matmuls != "none":
        share = every_second_matmul_share(job.model)
    elif a.selective_recompute_modules is not None:
        share = module_drop(job.model, a.selective_recompute_modules).replayed_matmul_share
    else:
        return 0.0
    return np.where(recompute == mem.RECOMPUTE_SELECTIVE, share, 0.0)
