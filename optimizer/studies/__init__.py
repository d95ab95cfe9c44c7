"""Batch what-if studies: a base request over a grid or list of overrides, every scenario
solved into one flat row, on a local process pool or a Dask cluster, written as each
finishes, resumable, plotted; and the scaling curve schedulers consume.

- `spec.py`: the study spec, its expansion into scenarios with stable keys, its checks;
- `rows.py`: one scenario run into one row (its failure is a row too);
- `execute.py`: the rows of many scenarios on any `concurrent.futures.Executor`;
- `writers.py`: CSV, JSONL and Parquet (through an appended sidecar), and resuming;
- `plots.py`: the standard pictures (matplotlib);
- `scaling.py`: the best layout at each of several GPU counts.

The request's schema is the API's: callers pass `parse` (a module-level function from the
request JSON to the request object), so the room depends on nothing above it. The
optional packages (pyarrow, matplotlib, distributed) are imported only where used.
Other rooms import from this module only.
"""

from optimizer.studies.execute import (
    ExecutorError,
    dask_executor,
    in_flight_for,
    local_executor,
    run_study,
    scheduler_address,
    usable_cores,
)
from optimizer.studies.plots import plot_study, status_counts
from optimizer.studies.rows import (
    FAILED,
    RESULT_COLUMNS,
    TIMING_COLUMNS,
    Row,
    RowStatus,
    RunSettings,
    columns,
    error_row,
    run_scenario,
    run_settings,
)
from optimizer.studies.scaling import (
    MAX_SCALING_POINTS,
    ScalingPoint,
    check_counts,
    not_reached_warnings,
    proved,
    scaling_curve,
    whole_node_counts,
)
from optimizer.studies.spec import (
    MAX_SCENARIOS,
    Compute,
    Parse,
    Scenario,
    ScenarioError,
    StudyError,
    StudySpec,
    check_count,
    check_values,
    expand,
    scenario_key,
    with_overrides,
)
from optimizer.studies.writers import (
    FORMATS,
    Mode,
    RowWriter,
    existing_rows,
    keys_of,
    output_format,
    sidecar_of,
)

__all__ = [
    "FAILED",
    "FORMATS",
    "MAX_SCALING_POINTS",
    "MAX_SCENARIOS",
    "Mode",
    "RESULT_COLUMNS",
    "TIMING_COLUMNS",
    "Compute",
    "ExecutorError",
    "Parse",
    "Row",
    "RowStatus",
    "RowWriter",
    "RunSettings",
    "ScalingPoint",
    "Scenario",
    "ScenarioError",
    "StudyError",
    "StudySpec",
    "check_count",
    "check_counts",
    "check_values",
    "columns",
    "dask_executor",
    "error_row",
    "existing_rows",
    "expand",
    "in_flight_for",
    "keys_of",
    "local_executor",
    "output_format",
    "plot_study",
    "proved",
    "run_scenario",
    "run_settings",
    "run_study",
    "not_reached_warnings",
    "scaling_curve",
    "scenario_key",
    "scheduler_address",
    "sidecar_of",
    "status_counts",
    "usable_cores",
    "whole_node_counts",
    "with_overrides",
]
