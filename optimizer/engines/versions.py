"""Engine versions: what a request's `engine: "megatron@core_r0.14"` names, and each
version's defaults for the engine's settings, each read from that version's code or recipes.

The newest version's defaults are what the project launches under it: the engine's own
default where the export leaves a setting alone, the export's value where it writes one (e.g.
--overlap-grad-reduce), so that pricing an answer and running its artefact agree; an older
one's are what its code ran unless told. A setting an older release's code does not have is
in its `lacks`: its default there is what that code always did, and a request may not state
it. What a version's code did that no setting names (a blocking ZeRO-3 fetch, a loss kept in
fp32) is in its `assumptions`, priced at the settings' level. A bare engine name is its newest
version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from models.artefact import Artefact
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
    # settings the release's code has no flag for: refused when stated
    lacks: frozenset[str] = frozenset()
    # what its code did that no setting names, as cost assumptions, each with its source
    assumptions: Mapping[str, object] = field(default_factory=dict)
    assumption_sources: Mapping[str, str] = field(default_factory=dict)
    # flags the project's export may write that the release's launcher does not parse
    absent_flags: frozenset[str] = frozenset()
    # why the release cannot launch the export at all (another launcher), if so
    launcher_differs: str | None = None

    def check_stated(self, stated: Mapping[str, object], engine: str) -> None:
        """InvalidSpec for a stated setting this release's code does not have."""
        for name in stated:
            if name in self.lacks:
                raise InvalidSpec(
                    f"{engine}@{self.name} has no setting {name!r}: its code predates or "
                    "dropped it",
                    f"engine_settings.{name}",
                )

    def check_artefact(self, artefact: Artefact, engine: str) -> None:
        """InvalidSpec where this release's launcher would not take the artefact: another
        launcher altogether, or flags its parser lacks (the exporter writes the newest
        code's, and an older parser stops at them)."""
        if self.launcher_differs is not None:
            raise InvalidSpec(f"{engine}@{self.name}: {self.launcher_differs}", "engine")
        if not self.absent_flags or artefact.format != "megatron-args":
            return
        lines = artefact.text.split("\n")
        written = {line.split()[0] for line in lines if line.startswith("--")}
        absent = sorted(written & self.absent_flags)
        if absent:
            raise InvalidSpec(
                f"{engine}@{self.name}'s launcher has no {', '.join(absent)}: the export is "
                f"written for the newest code's (engine {engine})",
                "engine",
            )


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
