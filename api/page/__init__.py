"""The workshop page: static files (static/, served by name: assets.py) and what its controls
may take (choices.py). The HTTP room serves both (api/http/page.py)."""

from api.page.assets import STATIC_DIR, asset_response
from api.page.choices import Choice, Choices, all_choices, candidate_values

__all__ = ["STATIC_DIR", "Choice", "Choices", "all_choices", "asset_response", "candidate_values"]
