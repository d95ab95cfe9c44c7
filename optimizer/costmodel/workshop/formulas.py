"""Profile `workshop`: the teaching plate's cost model, formula for formula (docs/cost-model.md).

Every function is pure and works on Python numbers and on numpy arrays alike, so that the
exhaustive enumerator prices a whole search space with the very same formulas. Units:
bytes, seconds, FLOP/s. Frozen: this profile is the fixed reference; refinements go in
other profiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from models.job import TrainingJob

BF16_BYTES = 2
# Adam in mixed precision: fp32 master weights plus two fp32 moments.
OPTIMIZER_BYTES_PER_PARAM = 12
# Activation bytes per token per hidden unit per layer with FlashAttention and sequence
# parallelism (Korthikanti et al. 2022, eq. 2 without the 5as/h attention-score term).
ACTIVATION_BYTES_NO_RECOMPUTE = 34
# With full recompute only the layer input is kept: bf16, 2 bytes per element.
ACTIVATION_BYTES_FULL_RECOMPUTE = 2
# Full recompute replays the forward pass: 8 matmul passes where 6 are model FLOPs.
FULL_RECOMPUTE_FACTOR = 6 / 8
# Two all-reduces of activations forward and two backward per layer (Megatron-LM TP).
TP_ALLREDUCES_PER_LAYER = 4

Number = Any  # float | int | np.ndarray: the formulas broadcast


# --- memory per device --------------------------------------------------------------


def params_per_device(total_params: Number, tp: Number, pp: Number) -> Number:
    """Parameters held per device, embeddings spread evenly over tp * pp (rough)."""
    return total_params / (tp * pp)


def zero_divisor(zero: Number, dp: Number, from_stage: int) -> Number:
    """dp when ZeRO at `from_stage` or above shards this state over data parallelism, else 1."""
    return np.where(zero >= from_stage, dp, 1)


def weights_bytes(params: Number, zero: Number, dp: Number) -> Number:
    return BF16_BYTES * params / zero_divisor(zero, dp, 3)


def gradients_bytes(params: Number, zero: Number, dp: Number) -> Number:
    return BF16_BYTES * params / zero_divisor(zero, dp, 2)


def optimizer_bytes(params: Number, zero: Number, dp: Number) -> Number:
    return OPTIMIZER_BYTES_PER_PARAM * params / zero_divisor(zero, dp, 1)


def activation_bytes_per_layer(
    seq_len: Number,
    micro_batch: Number,
    hidden: Number,
    tp: Number,
    cp: Number,
    full_recompute: Number,
) -> Number:
    """One layer's stored activations for one micro-batch, sharded by tp (SP) and cp."""
    per_element = np.where(
        full_recompute, ACTIVATION_BYTES_FULL_RECOMPUTE, ACTIVATION_BYTES_NO_RECOMPUTE
    )
    return per_element * seq_len * micro_batch * hidden / (tp * cp)


def in_flight_micro_batches(micro_batches: Number, pp: Number) -> Number:
    """1F1B keeps up to pp micro-batches in flight on the first stage."""
    return np.minimum(micro_batches, pp)


def activations_bytes(
    per_layer_bytes: Number, num_layers: Number, pp: Number, in_flight: Number
) -> Number:
    """Layers per device may be fractional (126 / 16 = 7.875): the plate's averaging."""
    return per_layer_bytes * (num_layers / pp) * in_flight


# --- pipeline --------------------------------------------------------------------------


def bubble_fraction(pp: Number, vpp: Number, micro_batches: Number) -> Number:
    """Idle fraction of a 1F1B step with vpp interleaved chunks: ((p-1)/v) / (m + (p-1)/v)."""
    warmup = (pp - 1) / vpp
    return warmup / (micro_batches + warmup)


# --- communication ---------------------------------------------------------------------


def layer_compute_s(
    params_per_layer: Number,
    tokens: Number,
    tp: Number,
    peak_flop_s: Number,
    kernel_efficiency: Number,
) -> Number:
    """Forward plus backward matmuls of one layer on one micro-batch's tokens (6 FLOPs/param/token)."""
    return 6 * params_per_layer * tokens / (tp * peak_flop_s * kernel_efficiency)


def ring_allreduce_bytes(group: Number, payload_bytes: Number) -> Number:
    """Bytes each rank sends in a ring all-reduce: 2 (g-1)/g of the payload."""
    return 2 * (group - 1) / group * payload_bytes


def tp_allreduce_s(tp: Number, tokens: Number, hidden: Number, bandwidth_bytes_s: Number) -> Number:
    """Four bf16 activation all-reduces per layer per micro-batch, not overlapped."""
    payload = tokens * hidden * BF16_BYTES
    return TP_ALLREDUCES_PER_LAYER * ring_allreduce_bytes(tp, payload) / bandwidth_bytes_s


def tp_factor(layer_compute: Number, tp_comm: Number) -> Number:
    return layer_compute / (layer_compute + tp_comm)


def dp_allreduce_s(dp: Number, params: Number, bandwidth_bytes_s: Number) -> Number:
    """One all-reduce of the bf16 gradients per step over the network."""
    return ring_allreduce_bytes(dp, BF16_BYTES * params) / bandwidth_bytes_s


def step_compute_s(
    micro_batches: Number,
    num_layers: Number,
    pp: Number,
    layer_compute: Number,
    tp_comm: Number,
    bubble: Number,
) -> Number:
    return micro_batches * (num_layers / pp) * (layer_compute + tp_comm) / (1 - bubble)


def dp_factor(step_compute: Number, dp_comm: Number) -> Number:
    """1 whenever the gradient all-reduce hides under the step."""
    return step_compute / np.maximum(step_compute, dp_comm)


def recompute_factor(full_recompute: Number) -> Number:
    return np.where(full_recompute, FULL_RECOMPUTE_FACTOR, 1.0)


# --- the whole breakdown -------------------------------------------------------------


@dataclass(frozen=True)
class Breakdown:
    """Every priced quantity of one layout (or, with array inputs, of many at once)."""

    micro_batches: Number
    weights_bytes: Number
    gradients_bytes: Number
    optimizer_bytes: Number
    activations_bytes: Number
    bubble: Number
    layer_compute_s: Number
    tp_comm_s: Number
    dp_comm_s: Number
    step_compute_s: Number
    kernel_efficiency: float
    tp_factor: Number
    dp_factor: Number
    recompute_factor: Number

    @property
    def memory_bytes(self) -> Number:
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
        )

    @property
    def mfu(self) -> Number:
        return (
            self.kernel_efficiency
            * (1 - self.bubble)
            * self.tp_factor
            * self.dp_factor
            * self.recompute_factor
        )

    @property
    def step_time_s(self) -> Number:
        """Wall time of a step: the slower of compute and the gradient all-reduce, plus recompute."""
        return np.maximum(self.step_compute_s, self.dp_comm_s) / self.recompute_factor


def breakdown(
    job: TrainingJob,
    kernel_efficiency: float,
    *,
    tp: Number,
    pp: Number,
    cp: Number,
    dp: Number,
    vpp: Number,
    micro_batch: Number,
    zero: Number,
    full_recompute: Number,
    tp_in_node: Number,
) -> Breakdown:
    """Price layouts given as numbers or as equally shaped arrays (the enumerator's case)."""
    model, gpu, training = job.model, job.cluster.gpu, job.training
    micro_batches = training.global_batch // (dp * micro_batch)
    params = params_per_device(model.total_params, tp, pp)
    per_layer = activation_bytes_per_layer(
        training.seq_len, micro_batch, model.hidden_size, tp, cp, full_recompute
    )
    in_flight = in_flight_micro_batches(micro_batches, pp)
    bubble = bubble_fraction(pp, vpp, micro_batches)
    tokens = training.seq_len * micro_batch / cp
    tp_bandwidth = np.where(tp_in_node, gpu.intra_node_bytes_s, gpu.inter_node_bytes_s)
    layer_compute = layer_compute_s(
        model.params_per_layer, tokens, tp, gpu.peak_flop_s, kernel_efficiency
    )
    tp_comm = tp_allreduce_s(tp, tokens, model.hidden_size, tp_bandwidth)
    dp_comm = dp_allreduce_s(dp, params, gpu.inter_node_bytes_s)
    step = step_compute_s(micro_batches, model.num_layers, pp, layer_compute, tp_comm, bubble)
    return Breakdown(
        micro_batches=micro_batches,
        weights_bytes=weights_bytes(params, zero, dp),
        gradients_bytes=gradients_bytes(params, zero, dp),
        optimizer_bytes=optimizer_bytes(params, zero, dp),
        activations_bytes=activations_bytes(per_layer, model.num_layers, pp, in_flight),
        bubble=bubble,
        layer_compute_s=layer_compute,
        tp_comm_s=tp_comm,
        dp_comm_s=dp_comm,
        step_compute_s=step,
        kernel_efficiency=kernel_efficiency,
        tp_factor=tp_factor(layer_compute, tp_comm),
        dp_factor=dp_factor(step, dp_comm),
        recompute_factor=recompute_factor(full_recompute),
    )
