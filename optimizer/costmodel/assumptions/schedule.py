"""Assumptions about recomputation and pipeline schedules."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from models.strict import SPEC_CONFIG

from .fields import fraction_field

RecomputeModule = Literal[
    "core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "moe", "shared_experts"
]


class ScheduleAssumptions(BaseModel):
    """Recomputation and pipeline schedules: their time beyond the plain step."""

    model_config = SPEC_CONFIG

    selective_recompute_time_overhead: float = Field(
        0.02,
        ge=0,
        le=1,
        description=(
            "Extra layer time of selective recompute (Korthikanti et al. 2022, Fig. 8: 2% for "
            "the 530B and 1T models, 4% for 22B). Under selective_recompute_matmuls "
            "'every_second' (op-level checkpointing) the replay is priced op by op instead: "
            "those matmuls' forward and every elementwise kernel's."
        ),
    )
    selective_recompute_matmuls: Literal["none", "every_second"] = Field(
        "none",
        description=(
            "Which matmuls selective recompute replays. 'none': Korthikanti et al. 2022's "
            "selective recompute (Megatron-LM, NeMo, DeepSpeed) replays the attention core "
            "and elementwise work only. 'every_second': op-level selective checkpointing "
            "(torchtitan's activation_checkpoint:selective) saves every op's output but every "
            "second matmul of a layer's forward, so that matmul's forward runs again in the "
            "backward, with the forward of every elementwise kernel, which it does not save "
            "(docs/cost-model.md, 'Engines'); set by the torchtitan engine."
        ),
    )
    selective_recompute_modules: list[RecomputeModule] | None = Field(
        None,
        max_length=7,
        description=(
            "The submodules selective recompute checkpoints, as Megatron-Core's "
            "recompute_modules names them (NVIDIA/Megatron-LM@d98e8a6 megatron/core/"
            "transformer/transformer_config.py l.560-583; default ['core_attn'], l.1940-1941), "
            "priced as its Transformer Engine layer spec runs them (docs/cost-model.md, "
            "'Selective recompute by module'): what each frees, and the forward of the matmuls "
            "mla_up_proj, mlp, moe and shared_experts run again. None: the profile's own "
            "selective mode, which frees both norms' and every MLP activation's outputs. The "
            "megatron and nemo engines set ['core_attn', 'layernorm', 'moe_act'] and export "
            "those the model has."
        ),
    )
    zero_bubble_weight_grad_fraction: float = fraction_field(
        1 / 3,
        "The weight-gradient pass W as a share of a micro-batch's F+B+W time (Qi et al. 2024 "
        "take T_F = T_B = T_W).",
    )

    @model_validator(mode="after")
    def _one_selective_mode(self) -> ScheduleAssumptions:
        """Op-level checkpointing (torchtitan) and Megatron-Core's module list are two
        different selective modes; a request names one."""
        if self.selective_recompute_matmuls != "none" and self.selective_recompute_modules:
            raise ValueError(
                "selective_recompute_modules (Megatron-Core's module list) does not apply "
                "under selective_recompute_matmuls 'every_second' (op-level checkpointing): "
                "give one of the two"
            )
        return self
