"""How sure an estimate is: the regime a job falls in (regimes.py) and the interval the
published runs' residuals of that regime give it (intervals.py). The residuals themselves are
measured by optimizer.validation (residuals.py) and shipped as data.

Depends only on `models` and `optimizer.costmodel`, so every front door may use it.
"""

from optimizer.uncertainty.intervals import (
    COVERAGE,
    RESIDUALS_PROFILE,
    Residual,
    conformal_bounds,
    interval_of,
    memory_basis,
    memory_upper_ratio,
    parse_residuals,
    published_residuals,
    residuals_json,
    with_interval,
)
from optimizer.uncertainty.regimes import Regime, regime_of

__all__ = [
    "COVERAGE",
    "RESIDUALS_PROFILE",
    "Regime",
    "Residual",
    "conformal_bounds",
    "interval_of",
    "memory_basis",
    "memory_upper_ratio",
    "parse_residuals",
    "published_residuals",
    "regime_of",
    "residuals_json",
    "with_interval",
]
