"""torchtitan 0.3.0's runtime as the cost model prices it: how FSDP2 syncs each ZeRO stage,
what its loss holds and moves, how its optimiser steps, what overlaps (optimizer.engines.
pricing reads it). Split from torchtitan.py, which holds the engine's offers, rules and
export; the sources are the same PyPI wheel and torch release."""

from __future__ import annotations

from .base import EngineRuntime, Overlap, sync

TT = "torchtitan 0.3.0 (PyPI wheel) torchtitan"
CONFIGS = f"{TT}/config/configs.py"
FSDP = f"{TT}/distributed/fsdp.py:54-79"


# The llama3 configs compute the loss in 8 chunks of the sequence (ChunkedLossWrapper,
# num_chunks 8 (loss.py:610): models/llama3/config_registry.py:187, 260, 312, 0.3.0): one chunk's
# logits at a time, each chunk's backward run before the next. A chunk holds its bf16 logits
# (2 B, alive through its backward, loss.py:748-762) and, in the backward of
# cross_entropy(logits.float()) (loss.py:60-65), the saved fp32 log-softmax, the nll
# gradient and the log-softmax's input gradient (12 B): 14 B per value of one chunk.
TITAN_LOSS_CHUNKS = 8
TITAN_LOGITS_BYTES_PER_VALUE = (2 + 12) / TITAN_LOSS_CHUNKS
# The same cross_entropy(logits.float()), its HBM traffic per logit, one read of each operand
# a kernel: forward the fp32 cast (read 2, write 4) and log_softmax (4 + 4); backward the
# nll gradient written dense (4), log_softmax's backward (reads the gradient and its output,
# writes one: 12) and the cast back (4 + 2). Chunking changes when, not how much.
TITAN_LOSS_BYTES_PER_LOGIT = 6 + 8 + 4 + 12 + 6
# The step: fused AdamW (optimizer.implementation "fused" by default, {TT}/components/
# optimizer/optimizer.py:109-111) reads gradient, fp32 shard and moments and writes shard and
# moments (28); the clip reads each gradient for the norm (4) and always rescales it (8:
# torch.nn.utils.clip_grads_with_norm_, {TT}/distributed/utils.py:675). No master copy: the
# shard is the master (zero3_fp32_shards). The shard's gradients are zeroed, not freed
# (zero_grad(set_to_none=training.disable_cuda_graphs), False by default: {TT}/trainer.py:874).
TITAN_OPTIMIZER_STEP_BYTES_PER_PARAM = 28 + 4 + 8

RUNTIME = EngineRuntime(
    gradient_sync=(
        sync(
            0,
            "per_micro_batch",
            "all-reduce",
            4,
            "none",
            f"every accumulation step runs backward with gradient sync on ({TT}/trainer.py:885-929, "
            "no set_requires_gradient_sync); with pp torch's stage defers it to once a schedule "
            "step (torch/distributed/pipelining/stage.py:843-848, 1164-1191), one a step here; "
            f"reduce dtype fp32 only ({CONFIGS}:93)",
            timing_with_pp="per_step",
        ),
        sync(
            2,
            "per_micro_batch",
            "reduce-scatter",
            4,
            "per_micro_batch",
            "FSDP2 reduce-scatters every micro-batch (pytorch/pytorch #126166); with pp once a "
            "step (stage.py:843-848, 1164-1191); parameters gathered each forward and kept to "
            f"backward ({FSDP}), with pp kept for the whole step (stage.py:843-848); fp32 reduce "
            f"({CONFIGS}:93)",
            timing_with_pp="per_step",
            param_gather_with_pp="per_step",
        ),
        sync(
            3,
            "per_micro_batch",
            "reduce-scatter",
            4,
            "per_micro_batch",
            f"as ZeRO-2 but resharded after forward, so gathered for forward and backward ({FSDP})",
            timing_with_pp="per_step",
        ),
    ),
    overlaps=(
        Overlap(
            "grad_reduce",
            True,
            True,
            "FSDP2 groups per transformer block",
            "torch 2.13.0 torch/distributed/fsdp/_fully_shard/_fully_shard.py:138-143",
        ),
        Overlap(
            "param_gather",
            True,
            True,
            "FSDP2's implicit prefetch",
            "torch 2.13.0 torch/distributed/fsdp/_fully_shard/_fully_shard.py:513-540",
        ),
        Overlap(
            "tp_comm",
            False,
            False,
            "--compile.enable_async_tensor_parallel with compile on (the llama3_405b config sets "
            "it, config_registry.py:296-299)",
            f"{CONFIGS}:295-305",
        ),
        Overlap(
            "p2p",
            False,
            False,
            "UNVERIFIED",
            "UNVERIFIED: torch pipelining's send/recv overlap not read",
        ),
    ),
    # activation_checkpoint:selective is op-level: every op's output saved but every second
    # mm of a layer's forward ({TT}/distributed/activation_checkpoint.py:185-287)
    selective_recompute_matmuls="every_second",
    logits_bytes_per_value=TITAN_LOGITS_BYTES_PER_VALUE,
    loss_bytes_per_logit=TITAN_LOSS_BYTES_PER_LOGIT,
    optimizer_step_bytes_per_param=TITAN_OPTIMIZER_STEP_BYTES_PER_PARAM,
    # compile is off unless a config turns it on (CompileConfig.enable False, 0.3.0 wheel
    # config/configs.py:291-293; the llama3 registry configs leave it): rotary runs through
    # fp32 complex numbers (models/common/rope.py:255-262) and SwiGLU as
    # F.silu(w1(x)) * w3(x) (models/common/feed_forward.py:53-54). The norms are torch's
    # nn.RMSNorm (models/common/nn_modules.py:134-148), a fused aten op in current torch
    # (UNVERIFIED from which release), and SDPA reads the shared KV heads itself
    # (enable_gqa, models/common/attention.py:340-373): neither is charged as eager.
    eager_pointwise=True,
    # Float8 training converts linears to torchao's Float8Linear, whose autograd function
    # keeps the bf16 input and weight for backward (torchao/float8/float8_linear.py,
    # matmul_with_hp_or_float8_args.forward: ctx.save_for_backward(input_hp, weight_hp_t))
    fp8_saved_inputs=False,
    # FSDP2's default overlap issues the next block's all-gather while this one computes (in
    # forward, and in backward by reverse post-forward order) and reduce-scatters on its own
    # stream under the next backward (torch 2.13.0 torch/distributed/fsdp/_fully_shard/
    # _fully_shard.py:513-531): each layer's traffic hides under a layer's compute, the
    # whole micro-batch's under all of it
    zero3_overlap_fraction=1.0,
    # fully_shard keeps each rank's shard in the parameters' own dtype, fp32, and the
    # optimiser steps it in place; MixedPrecisionPolicy(param_dtype=bf16) casts only what it
    # gathers (torch/distributed/fsdp/_fully_shard/_fsdp_api.py, MixedPrecisionPolicy's
    # docstring; torchtitan builds its policy from mixed_precision_param bf16, config/configs.py:93)
    zero3_fp32_shards=True,
)
