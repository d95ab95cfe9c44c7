"""An engine's own named settings, as a user states them (`engine_settings`), and what each
one changes in the price.

A setting is the engine's flag or config field under its own name: the value a request
states, or else its engine version's default (optimizer.engines.versions). Each one either
rewrites how the engine runs (`runs`: its gradient sync), sets cost assumptions
(`prices`), or both, so that a request never carries a numeric assumption to say what
its engine was told. A request's own `assumptions` still win over both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from models.errors import InvalidSpec

from .base import EngineRuntime

SettingValue = bool | int | str | tuple[str, ...]

# Transformer Engine's userbuffers overlap (Megatron-Core --tp-comm-overlap) with the
# default configuration of NVIDIA's recipes: the four all-gathers run as ring exchanges and
# the two dgrad ones in bulk, all hidden, and the two forward reduce-scatters pipelined in 4
# splits, of which the last one of each stays exposed: 2 x 1/4 of a layer's 8 collectives
# exposed, 15/16 hidden (docs/cost-model.md, 'Tensor parallelism'; NVIDIA/NeMo@6f2c6fd
# nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py l.163-174).
TP_OVERLAP_HIDDEN = 15 / 16
# Megatron-Core's attention backends (megatron/core/transformer/enums.py, AttnBackend):
# `local` and `unfused` run the s x s scores through HBM; the others are fused kernels.
ATTENTION_BACKENDS = ("flash", "fused", "unfused", "local", "auto")
UNFUSED_BACKENDS = ("unfused", "local")
MOE_DISPATCHERS = ("allgather", "alltoall", "flex")
# bytes of a gradient value in the buffer and on the wire: fp32 or the parameters' bf16
FP32_BYTES, BF16_BYTES = 4, 2


@dataclass(frozen=True)
class EngineSetting:
    """One named setting: how the engine spells it, what values it takes, and what it
    changes in the price."""

    name: str  # the request's key: the engine's config field
    flag: str  # as the engine's own launch spells it
    kind: type  # bool, int, str or tuple (a list of names)
    source: str
    choices: tuple[str, ...] = ()  # for a str setting
    prices: Callable[[SettingValue], dict[str, object]] | None = None
    runs: Callable[[SettingValue, EngineRuntime], EngineRuntime] | None = None

    def checked(self, value: object) -> SettingValue:
        """`value` as the setting holds it, or InvalidSpec naming the setting."""
        where = f"engine_settings.{self.name}"
        if self.kind is tuple:
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise InvalidSpec(f"{self.name} takes a list of names", where)
            return tuple(value)
        # a JSON true is an int to Python, and 1 is no bool: each kind exactly
        if type(value) is not self.kind:
            raise InvalidSpec(f"{self.name} takes a {self.kind.__name__}", where)
        if self.choices and value not in self.choices:
            raise InvalidSpec(f"{self.name} takes one of {', '.join(self.choices)}", where)
        if self.kind is int and isinstance(value, int) and not 1 <= value <= 10**13:
            raise InvalidSpec(f"{self.name} takes a count from 1 to 1e13", where)
        assert isinstance(value, bool | int | str)
        return value


def reduced_in(value: SettingValue, runtime: EngineRuntime) -> EngineRuntime:
    """The engine's gradient sync with its buffers reduced in fp32 (True) or in the
    parameters' bf16 (False)."""
    wire = FP32_BYTES if value else BF16_BYTES
    syncs = tuple(replace(s, reduce_bytes_per_value=wire) for s in runtime.gradient_sync)
    return replace(runtime, gradient_sync=syncs)


def _gradient_buffer(value: SettingValue) -> dict[str, object]:
    return {"gradient_bytes_per_param": FP32_BYTES if value else BF16_BYTES}


def _tp_overlap(value: SettingValue) -> dict[str, object]:
    return {"tp_overlap_fraction": TP_OVERLAP_HIDDEN if value else 0.0}


def _dp_overlap(value: SettingValue) -> dict[str, object]:
    # off: the step's reduce and gather run after the last backward, nothing hides them
    return {} if value else {"dp_overlap_microbatches": 0.0, "dp_sync_per_chunk": False}


def _p2p_overlap(value: SettingValue) -> dict[str, object]:
    return {"pp_p2p_interleaved_overlap_fraction": 1.0 if value else 0.0}


def _bucket(value: SettingValue) -> dict[str, object]:
    # a stated size is kept whatever the data group (Megatron-Core grows only its default)
    assert isinstance(value, int)
    return {"dp_bucket_params": float(value), "dp_bucket_grows_with_dp": False}


def _modules(value: SettingValue) -> dict[str, object]:
    assert isinstance(value, tuple)
    return {"selective_recompute_modules": list(value)}


MLM = "NVIDIA/Megatron-LM@d98e8a6"
MCORE_SETTINGS = (
    EngineSetting(
        "tp_comm_overlap",
        "--tp-comm-overlap",
        bool,
        f"{MLM} megatron/core/model_parallel_config.py l.265 (tp_comm_overlap); TE userbuffers",
        prices=_tp_overlap,
    ),
    EngineSetting(
        "overlap_grad_reduce",
        "--overlap-grad-reduce",
        bool,
        f"{MLM} megatron/core/distributed/distributed_data_parallel_config.py (overlap_grad_reduce)",
        prices=_dp_overlap,
    ),
    EngineSetting(
        "grad_reduce_in_fp32",
        "--accumulate-allreduce-grads-in-fp32",
        bool,
        f"{MLM} megatron/core/distributed/param_and_grad_buffer.py l.924 (the buffer's dtype)",
        prices=_gradient_buffer,
        runs=reduced_in,
    ),
    EngineSetting(
        "fp8_param_gather",
        "--fp8-param-gather",
        bool,
        f"{MLM} megatron/core/transformer/transformer_config.py (fp8_param)",
        prices=lambda v: {"fp8_params": bool(v)},
    ),
    EngineSetting(
        "sequence_parallel",
        "--sequence-parallel",
        bool,
        f"{MLM} megatron/core/model_parallel_config.py l.94",
        prices=lambda v: {"sequence_parallel": bool(v)},
    ),
    EngineSetting(
        "attention_backend",
        "--attention-backend",
        str,
        f"{MLM} megatron/core/transformer/enums.py (AttnBackend)",
        choices=ATTENTION_BACKENDS,
        prices=lambda v: {"fused_attention": v not in UNFUSED_BACKENDS},
    ),
    EngineSetting(
        "overlap_p2p_comm",
        "--no-overlap-p2p-communication (off)",
        bool,
        f"{MLM} megatron/core/pipeline_parallel/schedules.py l.1697-1866",
        prices=_p2p_overlap,
    ),
    EngineSetting(
        "ddp_bucket_size",
        "--ddp-bucket-size",
        int,
        f"{MLM} megatron/core/distributed/distributed_data_parallel.py l.134",
        prices=_bucket,
    ),
    EngineSetting(
        "recompute_modules",
        "--recompute-modules",
        tuple,
        f"{MLM} megatron/core/transformer/transformer_config.py (recompute_modules)",
        prices=_modules,
    ),
    EngineSetting(
        "moe_token_dispatcher_type",
        "--moe-token-dispatcher-type",
        str,
        f"{MLM} megatron/core/transformer/moe/token_dispatcher.py; flex: DeepEP / HybridEP",
        choices=MOE_DISPATCHERS,
        prices=lambda v: {"moe_dispatch_dedup": v == "flex"},
    ),
)


def settings_named(
    known: tuple[EngineSetting, ...], stated: Mapping[str, object], engine: str
) -> dict[str, SettingValue]:
    """`stated` checked against the engine's settings: unknown names are an error listing
    the known ones."""
    by_name = {s.name: s for s in known}
    for name in stated:
        if name not in by_name:
            offered = ", ".join(by_name) or "none"
            raise InvalidSpec(
                f"{engine} has no setting {name!r}; known: {offered}", f"engine_settings.{name}"
            )
    return {name: by_name[name].checked(value) for name, value in stated.items()}


def settings_assumptions(
    known: tuple[EngineSetting, ...], in_force: Mapping[str, SettingValue]
) -> dict[str, object]:
    """The cost assumptions the settings in force set."""
    values: dict[str, object] = {}
    for setting in known:
        if setting.prices is not None and setting.name in in_force:
            values |= setting.prices(in_force[setting.name])
    return values


def settings_runtime(
    known: tuple[EngineSetting, ...], in_force: Mapping[str, SettingValue], runtime: EngineRuntime
) -> EngineRuntime:
    """The engine's runtime as the settings in force change it."""
    for setting in known:
        if setting.runs is not None and setting.name in in_force:
            runtime = setting.runs(in_force[setting.name], runtime)
    return runtime
