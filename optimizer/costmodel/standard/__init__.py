"""Profile `standard`: memory per device (memory.py), step time (times.py), the breakdown
that composes them for one layout or a grid (breakdown.py), and the profile (profile.py)."""

from optimizer.costmodel.standard.breakdown import MFU_STEP_NAMES
from optimizer.costmodel.standard.profile import price_standard, price_standard_grid

__all__ = ["MFU_STEP_NAMES", "price_standard", "price_standard_grid"]
