"""Validation: the cost model and the search against published training runs: the rows as
data (published.py), their comparison and summary figures (report.py), the report as text (tables.py), and the cost model
calibrated on a few rows of each engine and checked on the rest (calibrated.py).

Other rooms import from this module only.
"""

from optimizer.validation.calibrated import (
    CALIBRATION_HEADER,
    EngineCalibration,
    calibrate_engines,
    calibration_table,
    held_out_summary,
)
from optimizer.validation.published import (
    METRICS,
    PRECISIONS,
    PRICED_PRECISIONS,
    PublishedRun,
    gpu_sources,
    hf_config_sources,
    published_runs,
)
from optimizer.validation.report import (
    MAX_ABS_ERROR_TARGET,
    MEAN_ABS_ERROR_TARGET,
    TOP_RANKS,
    VALIDATION_PROFILE,
    Comparison,
    Figures,
    ValidationReport,
    compare,
    ranked_degrees,
    validate,
)
from optimizer.validation.tables import (
    BREAKDOWN_HEADER,
    BREAKDOWNS,
    GAP_HEADER,
    TABLE_HEADER,
    breakdown_table,
    excluded_rows,
    gap_line,
    group_line,
    precision_line,
    report_table,
    summary_line,
    wide_gap_table,
)

__all__ = [
    "CALIBRATION_HEADER",
    "EngineCalibration",
    "calibrate_engines",
    "calibration_table",
    "held_out_summary",
    "BREAKDOWNS",
    "BREAKDOWN_HEADER",
    "GAP_HEADER",
    "MAX_ABS_ERROR_TARGET",
    "MEAN_ABS_ERROR_TARGET",
    "METRICS",
    "PRECISIONS",
    "PRICED_PRECISIONS",
    "TABLE_HEADER",
    "TOP_RANKS",
    "VALIDATION_PROFILE",
    "Comparison",
    "Figures",
    "PublishedRun",
    "ValidationReport",
    "breakdown_table",
    "compare",
    "excluded_rows",
    "gap_line",
    "group_line",
    "precision_line",
    "gpu_sources",
    "hf_config_sources",
    "published_runs",
    "ranked_degrees",
    "report_table",
    "summary_line",
    "validate",
    "wide_gap_table",
]
