"""The page's static files, served by name only (no CDN: the page works offline)."""

from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException
from fastapi.responses import FileResponse

STATIC_DIR = Path(__file__).parent / "static"
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# Served by name only: nothing outside api/static can be reached through the path.
_ASSETS = {
    path.name: path
    for path in (STATIC_DIR.iterdir() if STATIC_DIR.is_dir() else ())
    if path.suffix in _MEDIA_TYPES
}


def asset_response(name: str) -> FileResponse:
    path = _ASSETS.get(name)
    if path is None:
        raise HTTPException(status_code=404, detail=f"no static asset named {name!r}")
    return FileResponse(
        path, media_type=_MEDIA_TYPES[path.suffix], headers={"Cache-Control": "no-cache"}
    )
