"""A stage plan: how many layers each pipeline rank holds and how it recomputes them, the
first rank (with the embedding) to the last (with the output head). An even split with one
recompute mode is the plan every `Layout` implies; a search may choose any other."""

from __future__ import annotations

from pydantic import BaseModel, Field

from models.errors import InvalidSpec
from models.layout import Layout, RecomputeMode
from models.strict import SPEC_CONFIG, JsonInt


class StagePlan(BaseModel):
    """Layers and recompute mode of each pipeline rank, first to last."""

    model_config = SPEC_CONFIG

    layers: tuple[JsonInt, ...] = Field(
        strict=False, min_length=1, max_length=4096, description="Layers on each rank."
    )
    recompute: tuple[RecomputeMode, ...] = Field(
        strict=False, min_length=1, max_length=4096, description="Recompute mode of each rank."
    )

    def check(self, layout: Layout, num_layers: int) -> None:
        """One entry per rank, every layer placed once, a layer at least in every chunk."""
        if len(self.layers) != layout.pp or len(self.recompute) != layout.pp:
            raise InvalidSpec(
                f"a stage plan names pp({layout.pp}) ranks: got {len(self.layers)} layer counts "
                f"and {len(self.recompute)} recompute modes",
                "stage_plan",
            )
        if sum(self.layers) != num_layers:
            raise InvalidSpec(
                f"the stage plan places {sum(self.layers)} layers, the model has {num_layers}",
                "stage_plan.layers",
            )
        if min(self.layers) < layout.vpp:
            raise InvalidSpec(
                f"every rank needs a layer in each of its vpp({layout.vpp}) chunks: "
                f"got {min(self.layers)}",
                "stage_plan.layers",
            )

    @property
    def uniform_recompute(self) -> bool:
        return len(set(self.recompute)) == 1
