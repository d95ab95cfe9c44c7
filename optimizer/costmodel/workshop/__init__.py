"""Profile `workshop`: the teaching plate's formulas (formulas.py), byte for byte, and the
profile that prices with them (profile.py)."""

from optimizer.costmodel.workshop.profile import MFU_STEP_NAMES, price_workshop, price_workshop_grid

__all__ = ["MFU_STEP_NAMES", "price_workshop", "price_workshop_grid"]
