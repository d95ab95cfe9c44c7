"""Scaling curves kept on disk, so that a restarted service (or another process of it) does not
price again what it priced before: a scheduler replans the same cluster every few minutes,
and a cold curve of a 16,384-GPU cluster costs seconds a job.

The store is diskcache's (SQLite underneath: safe across the processes of one host, bounded
in bytes, least recently stored evicted first). Every key carries the fingerprint of the code
and data that price a curve (`optimizer/`, `models/`), so a new cost model never reads a
curve its predecessor priced. Replicas on several hosts share nothing through it: SQLite over
a network file system is not safe (docs/deploy.md).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from functools import cache
from pathlib import Path
from typing import Any

import diskcache

from models.errors import InvalidSpec
from optimizer.planning.curves import CURVE_CACHE, CurveCache, CurveValue

STORE_BYTES = 256 * 2**20  # a priced point is a few KB: tens of thousands of curves
_ROOT = Path(__file__).resolve().parents[2]


@cache
def code_fingerprint() -> str:
    """A hash of every source and data file that prices a curve: a store keeps what this
    exact code priced, nothing older."""
    digest = hashlib.sha256()
    for folder in ("optimizer", "models"):
        for path in sorted((_ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".json", ".yaml", ".csv") and path.is_file():
                digest.update(path.relative_to(_ROOT).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class StoredCurveCache(CurveCache):
    """The in-memory LRU in front of a store on disk: a miss in memory is looked up there,
    and what is priced goes to both."""

    def __init__(self, path: Path, size_bytes: int = STORE_BYTES) -> None:
        super().__init__()
        self.path = path
        self._disk = diskcache.Cache(
            str(path), size_limit=size_bytes, eviction_policy="least-recently-stored"
        )
        self._prefix = f"{code_fingerprint()}|"

    def get(self, key: str) -> CurveValue | None:
        found = super().get(key)
        if found is None:
            stored: Any = self._disk.get(self._prefix + key)
            if stored is not None:
                super().put(key, stored)
                found = stored
        return found

    def put(self, key: str, value: CurveValue) -> None:
        super().put(key, value)
        self._disk.set(self._prefix + key, value)

    def clear(self) -> None:
        super().clear()
        self._disk.clear()


_OPENED: dict[Path, StoredCurveCache] = {}
_LOCK = threading.Lock()


def curve_cache(path: str | Path | None) -> CurveCache:
    """The process's curve cache: in memory alone without a path, else the store at `path`
    behind it (opened once per process and path)."""
    if not path:
        return CURVE_CACHE
    where = Path(path).expanduser().resolve()
    with _LOCK:
        if where not in _OPENED:
            try:
                where.mkdir(parents=True, exist_ok=True)
                _OPENED[where] = StoredCurveCache(where)
            except (OSError, sqlite3.Error) as error:
                raise InvalidSpec(
                    f"the curve store {str(path)[:200]!r} cannot be a folder of curves here: "
                    f"{error.strerror if isinstance(error, OSError) else error}",
                    "curve_store",
                ) from None
        return _OPENED[where]
