"""docs/usage.md's examples are what the commands print today, timings apart: the plan
example is what `layoutopt plan` prints for PLAN_EXAMPLE, and every `layoutopt` command the
page shows runs and prints the output shown under it. A change to the planner or the cost
model that moves a figure fails here until the page is written again."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from api.schemas.plan_requests import PLAN_EXAMPLE
from tests.helpers import run_cli
from tests.markdown_examples import Block, assert_shows, blocks

USAGE = Path(__file__).resolve().parents[1] / "docs" / "usage.md"


def _shown_plan_output() -> list[str]:
    """The fenced block of usage.md that starts with the plan's status line."""
    text = USAGE.read_text()
    start = text.index("```\nstatus   optimal   objective ") + len("```\n")
    return text[start : text.index("```", start)].rstrip("\n").splitlines()


def _without_timings(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("solver   ")]


def test_the_plan_example_prints_what_usage_md_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "plan.json"
    spec.write_text(json.dumps(PLAN_EXAMPLE))
    status, out, err = run_cli(["plan", str(spec)], capsys)
    assert status == 0, err
    shown = _without_timings(_shown_plan_output())
    printed = _without_timings(out.rstrip("\n").splitlines())
    assert printed == shown, (
        "docs/usage.md's plan example is stale: rerun `layoutopt plan` on PLAN_EXAMPLE"
    )


# Every `layoutopt` command usage.md shows, run from a folder holding the project's examples,
# and the output shown right after it (an unlabelled block), timings apart.
LAYOUTOPT = Path(sys.executable).with_name("layoutopt")
USAGE_BLOCKS = blocks(USAGE.read_text())
TIMING = re.compile(r"\d+(\.\d+)? s\b")


def _commands(page: list[Block]) -> list[tuple[str, str | None]]:
    shown = []
    for i, block in enumerate(page):
        if block.language != "sh":
            continue
        for line in block.text.replace("\\\n", " ").splitlines():
            if line.startswith(".venv/bin/layoutopt "):
                after = page[i + 1] if i + 1 < len(page) else None
                output = after.text if after and after.language == "" else None
                shown.append((" ".join(line.split()[1:]), output))
    return shown


USAGE_COMMANDS = _commands(USAGE_BLOCKS)


def test_usage_md_shows_the_commands_a_reference_should() -> None:
    assert {c.split()[0] for c, _ in USAGE_COMMANDS} >= {"evaluate", "optimize", "stages", "study"}


@pytest.mark.parametrize(("command", "shown"), USAGE_COMMANDS, ids=[c for c, _ in USAGE_COMMANDS])
def test_each_usage_md_command_runs_and_prints_what_it_shows(
    tmp_path: Path, command: str, shown: str | None
) -> None:
    (tmp_path / "examples").symlink_to(USAGE.parents[1] / "examples")
    done = subprocess.run(
        [str(LAYOUTOPT), *command.split()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    if shown is not None:
        assert_shows(TIMING.sub("_ s", done.stdout), TIMING.sub("_ s", shown))
