"""docs/usage.md's plan example is what `layoutopt plan` prints for PLAN_EXAMPLE today (the
solver's timing line apart): a change to the planner or the cost model that moves a figure
fails here until the page is written again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.schemas.plan_requests import PLAN_EXAMPLE
from tests.helpers import run_cli

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
