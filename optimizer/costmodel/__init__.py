"""The cost model: memory by part, bubble, communication and the MFU waterfall of a layout,
under a named profile (`workshop`: the teaching plate's formulas, frozen as a reference;
`standard`: every knob the search turns, priced). The single source of truth: every figure
the search, the explanations, the API and the page report is computed here.

Other rooms import from this module only.
"""

from optimizer.costmodel.assumptions import MIN_EFFICIENCY, CostAssumptions
from optimizer.costmodel.estimate import Estimate, Interval, MemoryBytes, MfuStep
from optimizer.costmodel.grid import (
    BOX_KNOBS,
    DEGREE_COLUMNS,
    PLACEMENTS,
    RECOMPUTE_CODES,
    SCHEDULE_CODES,
    GridPrices,
    LayoutBox,
    LayoutGrid,
    placement_code,
    recompute_code,
    schedule_code,
)
from optimizer.costmodel.profiles import (
    DEFAULT_EVALUATE_PROFILE,
    PROFILES,
    Profile,
    ProfileName,
    device_capacity_bytes,
    evaluate,
    known_profile,
    profile_named,
    require_finite,
)
from optimizer.costmodel.standard import stage_plans
from optimizer.costmodel.standard.attention import attention_efficiency
from optimizer.costmodel.standard.collectives import domains_spanned
from optimizer.costmodel.standard.compute import kernel_efficiency
from optimizer.costmodel.standard.profile import expert_span, layout_degrees
from optimizer.costmodel.standard.ranks import paired_overlap_on
from optimizer.costmodel.standard.times import contended_overlap

__all__ = [
    "BOX_KNOBS",
    "DEGREE_COLUMNS",
    "DEFAULT_EVALUATE_PROFILE",
    "MIN_EFFICIENCY",
    "PLACEMENTS",
    "PROFILES",
    "RECOMPUTE_CODES",
    "SCHEDULE_CODES",
    "CostAssumptions",
    "Estimate",
    "Interval",
    "domains_spanned",
    "expert_span",
    "attention_efficiency",
    "kernel_efficiency",
    "layout_degrees",
    "paired_overlap_on",
    "GridPrices",
    "LayoutBox",
    "LayoutGrid",
    "MemoryBytes",
    "MfuStep",
    "Profile",
    "ProfileName",
    "evaluate",
    "known_profile",
    "placement_code",
    "profile_named",
    "device_capacity_bytes",
    "contended_overlap",
    "recompute_code",
    "require_finite",
    "schedule_code",
    "stage_plans",
]
