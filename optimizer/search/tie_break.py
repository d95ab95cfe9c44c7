"""The tie-break of the layout model: keys (memory, then a fixed order of the choices)
folded into as few mixed-radix integers as int64 allows, each minimised in turn with the
ones before it held."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class TieKey:
    """One key of the tie-break: sum(weights * literals), a value in 0..size-1."""

    literals: Sequence[cp_model.IntVar]
    weights: Sequence[int]
    size: int


@dataclass(frozen=True)
class TieStage:
    """Keys folded into one mixed-radix integer that stays inside int64."""

    var: cp_model.IntVar
    size: int


def tie_break_stages(keys: Sequence[TieKey], model: cp_model.CpModel) -> list[TieStage]:
    """Fold consecutive keys into as few mixed-radix stages as int64 allows; each stage is
    minimised in turn, the ones before it held. One stage, one solve, in every ordinary
    search; a model with 83,160 experts (and memory in hundreds of TB) needs two."""
    groups: list[list[TieKey]] = [[]]
    radix = 1
    for key in keys:
        if groups[-1] and radix * key.size >= INT64_MAX // 4:
            groups.append([])
            radix = 1
        groups[-1].append(key)
        radix *= key.size
    stages = []
    for number, group in enumerate(groups):
        literals: list[cp_model.IntVar] = []
        weights: list[int] = []
        size = 1
        for key in reversed(group):  # least significant first
            literals += key.literals
            weights += [size * w for w in key.weights]
            size *= key.size
        var = model.new_int_var(0, size - 1, f"tie_break_{number}")
        model.add(var == cp_model.LinearExpr.weighted_sum(literals, weights))
        stages.append(TieStage(var, size))
    return stages
