"""Engine versions: what a request's `engine: "megatron@core_r0.14"` names, and each
version's defaults for the engine's settings, each read from that version's code or recipes.

A version's defaults are what the project launches under it: the engine's own default where
the export leaves a setting alone, the export's value where it writes one (e.g.
--overlap-grad-reduce), so that pricing an answer and running its artefact agree. A bare
engine name is its newest version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from models.errors import InvalidSpec

from .settings import SettingValue


@dataclass(frozen=True)
class EngineVersion:
    """One release of an engine, as a request names it after `@`."""

    name: str  # the release's tag or version: "core_r0.14", "25.09", "0.3"
    released: str  # year and month, "2025-09"
    source: str  # the tag, commit or package read
    defaults: Mapping[str, SettingValue]  # per setting: what runs unless a request says
    sources: Mapping[str, str]  # per default: where it was read


def split_spec(spec: str) -> tuple[str, str | None]:
    """`"megatron@core_r0.14"` -> ("megatron", "core_r0.14"); a bare name -> (name, None)."""
    name, at, version = spec.partition("@")
    return name, (version if at else None)


def version_named(
    versions: tuple[EngineVersion, ...], name: str | None, engine: str
) -> EngineVersion:
    """The version of that name, the newest for None; an unknown one is an error listing the
    known ones."""
    if name is None:
        return versions[-1]
    for version in versions:
        if version.name == name:
            return version
    known = ", ".join(v.name for v in versions)
    raise InvalidSpec(f"{engine} has no version {name!r}; known: {known}", "engine")
