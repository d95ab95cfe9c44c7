"""The assumptions calibration may fit: a small set of efficiencies and overlaps, in the order
they are freed, each with the bounds the fit keeps it in and what a set of runs must vary to
tell it apart.

The order is that of how much of a step each one prices, in general: the matmul kernels first
(every run depends on them), then attention, the network, and the overlaps of each kind of
traffic. With n runs at most n - 1 of them are fitted (the rest keep their defaults), and
one run fits the kernel efficiency alone (`most_freed`). Each has a prior centred on its
default (`prior_weight`): the fit is a maximum a posteriori estimate, which keeps a fit of
several at once well posed; the value kept is then shrunk towards the default, the more the
fewer the runs (`shrink_weight`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from optimizer.calibration.runs import MeasuredRun
from optimizer.costmodel import attention_efficiency, kernel_efficiency


@dataclass(frozen=True)
class Parameter:
    name: str  # a CostAssumptions field
    lower: float
    upper: float
    what: str  # in words, for the report
    # the runs must differ in this (label, value per run) for the parameter to be told apart
    # from the others: e.g. a dp overlap cannot be fitted from runs at one dp
    varies: tuple[str, Callable[[MeasuredRun], object]] | None = None
    # why a run may not depend on it at all, for the report
    absent: str = ""
    # what its mechanism varies with beyond the runs' regime, so that a fitted value holds
    # only within the range the runs spanned (reach.RANGES): "seq_len", "hidden_size"
    reach: tuple[str, ...] = ()


# Assumptions whose default is the GPU's own figure, a share of its peak (the plate's kernel
# efficiency carried by the GPU's matmul ceiling; the preset's attention efficiency carried to
# the kernel the engine runs): the file holds a fitted value as its ratio to the runs' default
# (`<name>_scale`, CostAssumptions), which multiplies whatever default a request prices.
GPU_RELATIVE = ("kernel_efficiency", "attention_kernel_efficiency")
SCALE_SUFFIX = "_scale"


def _micro_batch_tokens(run: MeasuredRun) -> int:
    return run.layout.micro_batch * run.job.training.seq_len // run.layout.cp


PARAMETERS: tuple[Parameter, ...] = (
    Parameter(
        "kernel_efficiency",
        0.2,
        0.95,
        "share of peak the matmul kernels reach",
        absent="no run's step time depends on the matmul kernels",
        # its rate by GEMM shape is borrowed (gemm_throughput.json): the runs fix its level
        # only at the shapes they ran
        reach=("hidden_size",),
    ),
    # At long sequences (the reference of attention_table.py), no fused kernel's published
    # figure is below FlashAttention-1's 25% of A100's peak (Dao, FlashAttention-2, arXiv
    # 2307.08691, abstract: "only 25-40%"), none above FlashAttention-3's 75% of H100's (Shah
    # et al., arXiv 2407.08608, abstract: 740 TFLOP/s): a fit beyond 0.2-0.9 asks the kernel to
    # carry a miss that lies elsewhere, and is pinned at its default (fit.fit_inside_bounds).
    Parameter(
        "attention_kernel_efficiency",
        0.2,
        0.9,
        "share of peak fused attention reaches on long sequences",
        absent="no run uses fused attention",
        # its rate by sequence length is borrowed (attention_table.py): the runs fix its
        # level only at the lengths they attended
        reach=("seq_len",),
    ),
    Parameter(
        "inter_node_bandwidth_efficiency",
        0.2,
        1.0,
        "share of the NIC line rate collectives reach across nodes",
        absent="no run's collectives leave an NVLink domain",
    ),
    Parameter(
        "tp_overlap_fraction",
        0.0,
        0.95,
        "share of tensor-parallel collectives hidden under matmuls",
        varies=("tp", lambda run: run.layout.tp),
        absent="no run has tp > 1",
    ),
    Parameter(
        "dp_overlap_microbatches",
        0.0,
        8.0,
        "micro-batch steps the gradient reduce and parameter gather hide under",
        varies=("dp", lambda run: run.job.cluster.gpus // run.layout.model_parallel_size),
        absent="no run's data-parallel traffic is exposed",
    ),
    Parameter(
        "zero3_overlap_fraction",
        0.0,
        1.0,
        "share of a micro-batch's compute ZeRO-3's gathers hide under",
        absent="no run uses ZeRO-3",
    ),
    Parameter(
        "cp_overlap_fraction",
        0.0,
        1.0,
        "share of attention the context-parallel K/V exchange hides under",
        varies=("cp", lambda run: run.layout.cp),
        absent="no run has cp > 1",
    ),
    Parameter(
        "moe_all_to_all_overlap_fraction",
        0.0,
        1.0,
        "share of the expert all-to-all hidden under compute (1F1B schedules)",
        varies=("ep", lambda run: run.layout.ep),
        absent="no run has ep > 1",
    ),
    Parameter(
        "moe_host_ms_per_layer",
        0.0,
        20.0,
        "milliseconds an eager MoE layer waits on the host a micro-batch",
        # a host time a micro-batch is told from slower kernels only by runs whose
        # micro-batches hold different numbers of tokens
        varies=("tokens a micro-batch", _micro_batch_tokens),
        absent="no run has MoE layers",
    ),
)


# The fit is a maximum a posteriori estimate. What a fit to one cluster's runs cannot remove is
# each run's own miss: the spread of the defaults' log errors about their mean within one source
# and GPU type, RUN_LOG_ERROR, over docs/validation.md's priced rows (across all of them it is
# larger; tests/test_calibration.py checks it against the rows). Each assumption's
# prior is centred on its default with its bounded range four standard deviations wide (the
# bounds a 95% interval: PRIOR_SD_OF_RANGE). Mean squared log error plus prior_weight(n) times
# each parameter's squared move (in units of its range) is then the posterior's negative log
# over n runs: one run moves an assumption less than many.
RUN_LOG_ERROR = 0.08
PRIOR_SD_OF_RANGE = 0.25


def prior_weight(runs: int) -> float:
    """The pull towards the defaults for a fit to `runs` runs: sigma^2 / (n tau^2)."""
    return RUN_LOG_ERROR**2 / (runs * PRIOR_SD_OF_RANGE**2)


# A fitted value is then shrunk towards its default by n / (n + SHRINK_RUNS), n the distinct
# configurations among the runs (repeats of one layout measure its noise, not how the model
# misses another layout): the weight a random-effects model gives a group's mean over its
# default, where a group's own miss (what calibration may correct: one software stack on one
# cluster) has the spread GROUP_LOG_ERROR about the defaults and each run the spread
# RUN_LOG_ERROR about its group's. GROUP_LOG_ERROR is that spread over docs/validation.md's
# priced rows grouped by engine, source and GPU type, the groups' mean log errors' mean
# square less what their runs' own spread puts in it (RUN_LOG_ERROR^2 / n of each);
# tests/test_calibration.py computes it from the rows, as RUN_LOG_ERROR is. Neither is tuned
# to what calibration does to held-out rows. k = (0.08 / 0.07)^2 = 1.3: one run moves a value
# 43% of the way the fit asks, three 70%, eight 86%.
GROUP_LOG_ERROR = 0.07
SHRINK_RUNS = (RUN_LOG_ERROR / GROUP_LOG_ERROR) ** 2


def shrink_weight(configurations: int) -> float:
    """The share of its move from the default a fitted value keeps: n / (n + SHRINK_RUNS)."""
    return configurations / (configurations + SHRINK_RUNS)


def most_freed(runs: int) -> int:
    """Assumptions n runs may fit: one fewer than the runs, so that the fit is not exact and
    what it misses shows (n unknowns pass through n runs whatever else the model misses, and
    carry that to every other layout); one run fits one."""
    return max(1, runs - 1)


def default_value(parameter: Parameter, runs: list[MeasuredRun]) -> float | None:
    """The value the parameter has in the runs when not fitted; None when the runs disagree
    (an attention efficiency taken from GPU presets that differ)."""
    values = {default_for_run(parameter, run) for run in runs}
    return values.pop() if len(values) == 1 else None


def default_for_run(parameter: Parameter, run: MeasuredRun) -> float:
    value = getattr(run.priced, parameter.name)  # its own, else its engine's, else ours
    if value is None and parameter.name == "attention_kernel_efficiency":
        return attention_efficiency(run.job, run.priced)  # the GPU preset's, else FA-2's
    if value is None and parameter.name == "kernel_efficiency":
        return kernel_efficiency(run.job, run.priced)  # the plate's, by the GPU's ceiling
    return float(value)
