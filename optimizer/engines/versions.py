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

A release the project read no profile for is priced by the one that stands for it
(`version_named`): the profile whose span of releases holds it (NeMo 26.04.01's covers the
Megatron-Bridge containers from 25.09), else the newest read before it, whose code the
release's grew from; a setting the next read release has may then be stated (it arrived at
some point between), its default the older code's. The answer says so in a warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

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
    # the first release this profile stands for, "YYYY-MM" (None: its own release only)
    covers_from: str | None = None
    # for a release priced by another's profile: which, and the warning that says so
    stands_for: str | None = None
    note: str | None = None

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


# A calendar release, "25.09" or "26.04.01" (NGC containers, Megatron-LM's YY.MM tags).
CALENDAR = re.compile(r"(\d{2})\.(\d{2})(?:\.\d+)?(?:-[A-Za-z0-9.]+)?", re.ASCII)
# A numbered release, "0.19", "v0.3.0", "core_r0.14", "core_v0.15.0rc3".
NUMBERED = re.compile(
    r"(?:core_[rv]|[rv])?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(?:rc|a|b|post|dev)\d*)?", re.ASCII
)
Key = tuple[int, ...]


def _date(text: str) -> Key:
    """(year, month[, day]) of "YYYY-MM[-DD]": a month orders before each of its days."""
    return tuple(int(part) for part in text.split("-"))


def stated_key(text: str, months: Mapping[Key, str] | None) -> Key | None:
    """Where a version string falls among an engine's releases: its (year, month[, day])
    where the engine orders its releases by date (`months`: when each numbered release came
    out), its (major, minor, patch) where the numbers order them; None where it reads as
    neither."""
    calendar = CALENDAR.fullmatch(text)
    if months is not None and calendar and int(calendar[1]) >= 20:
        return (2000 + int(calendar[1]), int(calendar[2]))
    numbered = NUMBERED.fullmatch(text)
    if numbered is None:
        return None
    numbers = (int(numbered[1]), int(numbered[2]), int(numbered[3] or 0))
    if months is None:
        return numbers
    if numbers[:2] in months:
        return _date(months[numbers[:2]])
    # past the newest release of its line dated: newer than every profile
    dated = [key for key in months if key[0] == numbers[0]]
    return (9999, 12) if dated and numbers[:2] > max(dated) else None


def _line(name: str) -> Key | None:
    """(major, minor) of a numbered release: its patches are one line of code."""
    numbered = NUMBERED.fullmatch(name)
    return None if numbered is None else (int(numbered[1]), int(numbered[2]))


def _span(version: EngineVersion, months: Mapping[Key, str] | None) -> tuple[Key, Key]:
    """The releases a profile stands for, first and last: by date, from `covers_from` (or
    its own) to its own (a calendar name's month, else its release's); by number, its own."""
    if months is None:
        own = stated_key(version.name, None)
        assert own is not None, version.name  # a numbered engine's names are numbers
        return own, own
    calendar, line = CALENDAR.fullmatch(version.name), _line(version.name)
    if line is not None and line in months:  # dated to the day
        last = _date(months[line])
    elif calendar:
        last = (2000 + int(calendar[1]), int(calendar[2]))
    else:
        last = _date(version.released)
    return (_date(version.covers_from) if version.covers_from else last), last


def version_named(
    versions: tuple[EngineVersion, ...],
    name: str | None,
    engine: str,
    months: Mapping[Key, str] | None = None,
) -> EngineVersion:
    """The version of that name, the newest for None; a release read no profile of its own,
    the profile that stands for it (module note: a patch of a profile's release line, or in
    its span, or else the newest before it, or, older than all, the oldest), named as
    stated, with a `note`; one that reads as no release is an error listing the known ones."""
    if name is None:
        return versions[-1]
    for version in versions:
        if version.name == name:
            return version
    known = ", ".join(v.name for v in versions)
    line = _line(name)
    same_line = [i for i, v in enumerate(versions) if line is not None and _line(v.name) == line]
    if same_line:
        return _standing_in(versions, same_line[-1], name, engine, covered=True)
    stated = stated_key(name, months)
    if stated is None:
        raise InvalidSpec(f"{engine} has no version {name!r}; known: {known}", "engine")
    spans = [_span(v, months) for v in versions]
    covering = [
        i
        for i, (first, last) in enumerate(spans)
        if versions[i].covers_from is not None and first <= stated <= last
    ]
    before = [i for i, (_, last) in enumerate(spans) if last < stated]
    if covering:
        return _standing_in(versions, covering[-1], name, engine, covered=True)
    if before:
        return _standing_in(versions, before[-1], name, engine, covered=False)
    return _standing_in(versions, 0, name, engine, covered=False, older=True)


def _standing_in(
    versions: tuple[EngineVersion, ...],
    index: int,
    name: str,
    engine: str,
    covered: bool,
    older: bool = False,
) -> EngineVersion:
    """versions[index] priced for release `name`: past the profile's span, a setting the
    next read release has may be stated, and its export flags are not refused; before the
    oldest profile, that profile as read."""
    base = versions[index]
    later = versions[index + 1] if index + 1 < len(versions) else None
    lacks, absent = base.lacks, base.absent_flags
    how = "whose span of releases holds it" if covered else "the newest read before it"
    if older:
        how = "the oldest read: it is older than every release read, whose code may differ"
    elif later is not None and not covered:
        lacks, absent = lacks & later.lacks, absent & later.absent_flags
        how += f"; settings {engine}@{later.name} has may be stated, their defaults its code's"
    note = (
        f"{engine}@{name} has no profile of its own: priced by {engine}@{base.name}'s "
        f"defaults (released {base.released}), {how}; state the settings the run used"
    )
    return replace(
        base, name=name, lacks=lacks, absent_flags=absent, stands_for=base.name, note=note
    )
