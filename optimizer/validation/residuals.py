"""The published rows' misses, as the intervals of optimizer.uncertainty read them: each priced
row's utilisation priced as in the leave-one-source-out report (its source's defaults chosen
without it) and its peak memory, against what the row reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optimizer.uncertainty import Residual, regime_of
from optimizer.uncertainty.intervals import bounds_of, nearest
from optimizer.validation.held_out import leave_one_source_out
from optimizer.validation.report import VALIDATION_PROFILE, Comparison, validate


def residual_of(utilisation: Comparison | None, memory: Comparison | None) -> Residual:
    """One row's residual from its held-out utilisation and its memory comparison (either
    may be missing, not both)."""
    row = utilisation or memory
    assert row is not None
    run = row.run
    return Residual(
        regime=regime_of(run.job, run.engine, run.precision),
        source=run.source_label,
        mfu_points=None if utilisation is None else -utilisation.error,
        step_ratio=None if utilisation is None else utilisation.predicted / utilisation.reported,
        memory_ratio=None if memory is None else 1 / (1 + memory.memory_error),
    )


def validation_residuals(profile: str = VALIDATION_PROFILE) -> tuple[Residual, ...]:
    """Every priced row's residual, in the data file's order."""
    held_out = {row.run.name: row for row in leave_one_source_out(profile).held_out.rows}
    memory = {row.run.name: row for row in validate(profile, with_ranks=False).headline.memory}
    names = [row.run.name for row in validate(profile, with_ranks=False).headline.rows]
    return tuple(
        residual_of(held_out.get(name), memory.get(name))
        for name in names
        if name in held_out or name in memory
    )


@dataclass(frozen=True)
class Coverage:
    """How often a row's measured figure falls in the interval built without its source."""

    utilisation_rows: int
    utilisation_covered: int
    memory_rows: int
    memory_covered: int

    @property
    def utilisation_share(self) -> float:
        return self.utilisation_covered / self.utilisation_rows if self.utilisation_rows else 0.0

    @property
    def memory_share(self) -> float | None:
        return self.memory_covered / self.memory_rows if self.memory_rows else None


def held_out_coverage(residuals: Sequence[Residual]) -> Coverage:
    """Each row's miss against the bounds of the other sources' residuals in its regime
    (widened as a request's would be): the share of rows inside them. A row is inside when
    its measured figure lies in its interval, i.e. its own residual lies in the bounds."""
    utilisation = [r for r in residuals if r.mfu_points is not None]
    memory = [r for r in residuals if r.memory_ratio is not None]
    return Coverage(
        len(utilisation),
        sum(_inside(r, utilisation, "mfu_points") for r in utilisation),
        len(memory),
        sum(_inside(r, memory, "memory_ratio") for r in memory),
    )


def _inside(row: Residual, pool: Sequence[Residual], field: str) -> bool:
    others = [r for r in pool if r.source != row.source]
    if not others:
        return False
    lo, hi = bounds_of(nearest(others, row.regime)[1], field)
    return bool(lo <= getattr(row, field) <= hi)
