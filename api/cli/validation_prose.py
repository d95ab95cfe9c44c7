"""The prose of docs/validation.md that `layoutopt validate --markdown` writes around its
tables: what the columns mean, the known misses with their causes, and how the calibration
views are made. It is Markdown and it dates as the data does, so it lives beside the docs as
templates (docs/templates/validation-*.md), not in code; this reads them. In the misses a
row's figure is a field, `{error[...]}`, `{memory[...]}` or `{rank[...]}` around a part of
its name that names one row, filled in from the report (validate.known_misses); the
calibration preamble takes `{n}` and `{target}`."""

from __future__ import annotations

from functools import cache
from pathlib import Path

# The checkout's docs: `validate --markdown` regenerates a file of the checkout.
TEMPLATES = Path(__file__).resolve().parents[2] / "docs" / "templates"


class TemplateMissing(Exception):
    """The docs' templates are not where the checkout keeps them (an installed package)."""


@cache
def template(name: str) -> str:
    path = TEMPLATES / f"validation-{name}.md"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise TemplateMissing(
            f"{path} is missing: `layoutopt validate --markdown` runs in a checkout of the "
            "project, whose docs/templates it fills in"
        ) from None


def markdown_preamble() -> str:
    return template("preamble")


def markdown_misses() -> str:
    return template("misses")


def calibration_preamble() -> str:
    return template("calibration")


def held_out_preamble() -> str:
    return template("held-out")


def intervals_preamble() -> str:
    return template("intervals")
