"""Validation: the cost model and the search against published training runs (published.py).

Other rooms import from this module only.
"""

from optimizer.validation.published import (
    MEAN_ABS_ERROR_TARGET,
    TABLE_HEADER,
    TOP_RANKS,
    VALIDATION_PROFILE,
    Comparison,
    PublishedRun,
    ValidationReport,
    published_runs,
    ranked_degrees,
    report_table,
    summary_line,
    validate,
)

__all__ = [
    "MEAN_ABS_ERROR_TARGET",
    "TABLE_HEADER",
    "TOP_RANKS",
    "VALIDATION_PROFILE",
    "Comparison",
    "PublishedRun",
    "ValidationReport",
    "published_runs",
    "ranked_degrees",
    "report_table",
    "summary_line",
    "validate",
]
