"""Calibration: the cost model's named efficiencies and overlaps fitted to a user's measured
runs (one to a few dozen), with what the runs cannot identify pinned and said, the fit's
residuals, and each run predicted by the fit of the others (leave-one-out).

    request = Request(job, layout=layout, engine=get_engine("megatron"))
    runs = [measured_run("a", request, "step_time_s", 12.9)]
    result = calibrate(runs)
    result.assumptions()      # an `assumptions` object any request takes as it stands
    run_from_log("b", request, log_text)  # a run measured by its training log (logs.py)
    within_reach(assumptions, job, engine)  # a fitted value only where it applies (reach.py)

Needs scipy (the `calibration` extra), imported when a fit runs. Other rooms import from this
module only.
"""

from optimizer.calibration.fit import (
    MAX_RUNS,
    CalibrationStopped,
    CalibrationUnavailable,
    FitOutOfTime,
    choose,
)
from optimizer.calibration.logs import (
    FORMATS,
    MAX_LOG_BYTES,
    LogReading,
    known_format,
    read_log,
)
from optimizer.calibration.parameters import PARAMETERS, SHRINK_RUNS, Parameter
from optimizer.calibration.procedure import calibrate, select
from optimizer.calibration.reach import Reach, applies_to, within_reach
from optimizer.calibration.results import Calibration, LeftOut, ParameterFit, RunFit
from optimizer.calibration.runs import (
    MEASURES,
    MeasuredRun,
    check_repeats,
    measured_run,
    ran_on,
    run_from_log,
)

__all__ = [
    "FORMATS",
    "MAX_LOG_BYTES",
    "MAX_RUNS",
    "MEASURES",
    "PARAMETERS",
    "Reach",
    "SHRINK_RUNS",
    "Calibration",
    "CalibrationStopped",
    "CalibrationUnavailable",
    "FitOutOfTime",
    "LeftOut",
    "LogReading",
    "MeasuredRun",
    "Parameter",
    "ParameterFit",
    "RunFit",
    "applies_to",
    "calibrate",
    "check_repeats",
    "choose",
    "known_format",
    "select",
    "measured_run",
    "ran_on",
    "read_log",
    "run_from_log",
    "within_reach",
]
