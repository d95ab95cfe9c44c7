"""The versions of the two Megatron-Core engines a request may name, and each one's defaults
for the settings both share (optimizer.engines.settings.MCORE_SETTINGS).

The newest version of each is the code the engine was read at (megatron.py, nemo.py): its
defaults are what that engine's export launches, so a bare name prices as the artefact runs.
"""

from __future__ import annotations

from .mcore import MLM
from .settings import SettingValue
from .versions import EngineVersion

BRIDGE = "NVIDIA-NeMo/Megatron-Bridge@067f987"
ARGS = f"{MLM} megatron/training/arguments.py"

# What both exports write, or leave at Megatron-Core's default, at the code read.
LAUNCHED_DEFAULTS: dict[str, SettingValue] = {
    "tp_comm_overlap": False,
    "overlap_grad_reduce": True,
    "fp8_param_gather": True,
    "sequence_parallel": True,
    "overlap_p2p_comm": True,
    "moe_token_dispatcher_type": "alltoall",
}
LAUNCHED_SOURCES = {
    "tp_comm_overlap": f"{ARGS}:1441-1442 (off unless asked); the exports leave it off",
    "overlap_grad_reduce": "written by both exports (megatron.py, nemo.py)",
    "fp8_param_gather": "written by both exports under fp8/mxfp8 with the distributed optimizer",
    "sequence_parallel": "written by both exports at tp > 1",
    "overlap_p2p_comm": f"{ARGS}:3118-3120 (on with interleaving unless turned off)",
    "moe_token_dispatcher_type": "written by both exports with ep > 1",
}

MEGATRON_VERSIONS = (
    EngineVersion(
        "core_r0.20",
        "2026-08",
        f"{MLM} (d98e8a6, Megatron-Core 0.20.0)",
        LAUNCHED_DEFAULTS,
        LAUNCHED_SOURCES,
    ),
)

NEMO_VERSIONS = (
    EngineVersion(
        "bridge_0.7",
        "2026-08",
        f"{BRIDGE} (Megatron-Bridge 0.7.0) on {MLM}",
        LAUNCHED_DEFAULTS | {"grad_reduce_in_fp32": True},
        LAUNCHED_SOURCES
        | {"grad_reduce_in_fp32": "written by the export (ddp.grad_reduce_in_fp32=true)"},
    ),
)
