"""The workshop page at `/`: static files, no CDN."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
