"""torchtitan's versions a request may name, oldest first, and its named settings: whether it
compiles the model, which norm kernels the code before 0.1.0 ran, and how its AdamW steps.

0.3.0 is the release the engine was read at (torchtitan.py, torchtitan_runtime.py); 0.1.0 is
the first tagged release, to which the untagged 2024 code of the published rows maps (their
differences stated as settings: the norm kernels, the optimiser's implementation).
"""

from __future__ import annotations

from .settings import EngineSetting, InForce, SettingValue
from .torchtitan_runtime import CONFIGS, TITAN_OPTIMIZER_STEP_BYTES_PER_PARAM
from .versions import EngineVersion

TT_010 = "pytorch/torchtitan@v0.1.0 (f7084fc78)"
CONFIG_010 = f"{TT_010} torchtitan/config_manager.py"
NORMS = ("rmsnorm", "fused_rmsnorm")
# AdamW as torch.optim runs it unfused (foreach, or a loop over the same ops), eight passes
# over the fp32 shard: the weight decay's multiply (8 bytes a parameter), the first moment's
# lerp with the gradient (12), the second's multiply and addcmul (8 + 12), the denominator's
# sqrt, divide and add (8 each) and the addcdiv into the parameter (16); then
# clip_grad_norm_(foreach=True)'s norm (4) and rescale (8) (torch/optim/adamw.py,
# _multi_tensor_adamw; pytorch/torchtitan@9dec370 train.py l.311-314).
UNFUSED_ADAMW_STEP_BYTES_PER_PARAM = 8 + 12 + 8 + 12 + 3 * 8 + 16 + 4 + 8
OPTIMIZER_STEP_BYTES = {
    "fused": TITAN_OPTIMIZER_STEP_BYTES_PER_PARAM,
    "foreach": UNFUSED_ADAMW_STEP_BYTES_PER_PARAM,
    "for-loop": UNFUSED_ADAMW_STEP_BYTES_PER_PARAM,
}


def _compiled(value: SettingValue, in_force: InForce) -> dict[str, object]:
    """Without torch.compile the pointwise ops (rotary, SwiGLU, the attention output's copy)
    run eager, and so do the norms where they are torch's composite RMSNorm (norm_type
    rmsnorm); compiled, inductor fuses them into the block's kernels."""
    eager = not value
    return {
        "eager_pointwise": eager,
        "eager_norms": eager and in_force.get("norm_type") == "rmsnorm",
    }


TORCHTITAN_SETTINGS = (
    EngineSetting(
        "compile",
        "--training.compile (0.1.0); --compile.enable (0.3.0)",
        bool,
        f"{CONFIG_010} l.235; {CONFIGS}:291-293",
        prices=_compiled,
    ),
    EngineSetting(
        "norm_type",
        "--model.norm_type (the code before 0.1.0: rmsnorm, fused_rmsnorm; 0.1.0 builds "
        "nn.RMSNorm only)",
        str,
        "pytorch/torchtitan@9dec370 and @0413364 train_configs/llama3_8b.toml l.21; "
        f"{TT_010} torchtitan/models/llama3/model/model.py l.276-277",
        choices=NORMS,
        read_by="compile",
    ),
    EngineSetting(
        "optimizer_implementation",
        "--optimizer.implementation",
        str,
        f"{CONFIG_010} l.139; pytorch/torchtitan@0413364 train.py l.90-97 (foreach)",
        choices=tuple(OPTIMIZER_STEP_BYTES),
        prices=lambda v, _: {"optimizer_step_bytes_per_param": OPTIMIZER_STEP_BYTES[str(v)]},
    ),
)

TORCHTITAN_VERSIONS = (
    EngineVersion(
        "0.1.0",
        "2025-06",
        TT_010,
        {"compile": False, "norm_type": "rmsnorm", "optimizer_implementation": "fused"},
        {
            "compile": f"{CONFIG_010} l.235 (compile False)",
            "norm_type": f"{TT_010} torchtitan/models/llama3/model/model.py l.276-277 "
            "(nn.RMSNorm, a composite of eager ops in the torch of its time: UNVERIFIED)",
            "optimizer_implementation": f"{CONFIG_010} l.139 (fused)",
        },
        assumptions={
            "gqa_kv_copies": True,
            "gradient_buffer_zeroed": False,
            "logits_bytes_per_value": 12.0,
        },
        assumption_sources={
            "gqa_kv_copies": f"{TT_010} torchtitan/models/llama3/model/model.py l.98, 185-186 "
            "(repeat_kv materialises K and V for SDPA)",
            "gradient_buffer_zeroed": f"{TT_010} torchtitan/train.py l.420 (optimizers.zero_grad(): "
            "set_to_none, torch's default since 2.0, frees the gradients)",
            "logits_bytes_per_value": f"{TT_010} torchtitan/components/loss.py l.18-22 "
            "(cross_entropy(pred.flatten(0, 1).float()), unchunked, with pp too: the fp32 "
            "log-softmax, its gradient and the input gradient, 12 bytes a logit)",
        },
    ),
    EngineVersion(
        "0.3.0",
        "2026-09",
        "torchtitan 0.3.0 (PyPI wheel; = release/0.3 @ 4f9e9a47)",
        {"compile": False, "optimizer_implementation": "fused"},
        {
            "compile": f"{CONFIGS}:291-293 (CompileConfig.enable False)",
            "optimizer_implementation": "torchtitan 0.3.0 torchtitan/components/optimizer/"
            "optimizer.py:109-111 (fused)",
        },
        lacks=frozenset({"norm_type"}),
    ),
)
