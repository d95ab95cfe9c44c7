"""A plan handed to the schedulers people run: Ray placement groups (ray_placement.py)."""
