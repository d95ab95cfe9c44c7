"""Markdown pages as examples: their fenced blocks, each with the prose line before it, and a
check that a shown output is what a command printed (`...` stands for lines left out). The
README's and docs/usage.md's tests read their pages through it, so no example goes stale."""

from __future__ import annotations

import re
from dataclasses import dataclass

FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
GAP = "..."


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    caption: str  # the last line of prose before it


def blocks(markdown: str) -> list[Block]:
    found, end = [], 0
    for match in FENCE.finditer(markdown):
        prose = [line for line in markdown[end : match.start()].splitlines() if line.strip()]
        found.append(Block(match.group(1), match.group(2), prose[-1] if prose else ""))
        end = match.end()
    return found


def assert_shows(output: str, shown: str) -> None:
    """Each run of shown lines between `...` appears in the output, in order."""
    lines = [line.rstrip() for line in output.splitlines()]
    at = 0
    for run in _runs(shown):
        starts = [i for i in range(at, len(lines)) if lines[i : i + len(run)] == run]
        assert starts, f"not in the output (from line {at}):\n" + "\n".join(run)
        at = starts[0] + len(run)


def _runs(shown: str) -> list[list[str]]:
    runs: list[list[str]] = [[]]
    for line in shown.splitlines():
        if line.strip() == GAP:
            runs.append([])
        else:
            runs[-1].append(line.rstrip())
    return [run for run in runs if run]
