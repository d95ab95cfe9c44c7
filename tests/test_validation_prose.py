"""The known misses of docs/validation.md quote rows' figures as fields filled in from the
report, so the prose cannot go stale: each field names one row, its figure is the table's,
and the list of rows beyond the target is exactly the rows beyond it."""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest

from api.cli import validation_prose as prose
from api.cli.validate import RowFigures, beyond_target_line, known_misses, ordinal, reflow
from api.cli.validation_prose import markdown_misses
from optimizer.validation import MAX_ABS_ERROR_TARGET, validate


@pytest.fixture(scope="module")
def report():
    return validate()  # cached: the same report test_validation.py reads


def quoted_fields() -> list[tuple[str, str]]:
    """(kind, part of a row's name) of every row figure the prose quotes."""
    fields = [name for _, name, _, _ in string.Formatter().parse(markdown_misses()) if name]
    return [re.fullmatch(r"(\w+)\[(.+)\]", f).groups() for f in fields if "[" in f]  # type: ignore[union-attr]


def test_every_quoted_figure_names_one_row_and_is_that_rows_figure(report) -> None:
    fields = quoted_fields()
    assert len(fields) > 40, "measured: the prose quotes some 60 figures"
    text = known_misses(report)
    for kind, part in fields:
        rows = [row for row in report.rows if part == row.run.name] or [
            row for row in report.rows if part in row.run.name
        ]
        assert len(rows) == 1, part
        (row,) = rows
        if kind == "error":
            assert f"{100 * row.error:+.1f}" in text
        elif kind == "memory":
            assert row.compares_memory and f"{100 * row.memory_error:+.0f}%" in text


def test_a_part_naming_several_rows_or_none_is_refused(report) -> None:
    errors = RowFigures(report, lambda row: row.run.name)
    with pytest.raises(ValueError, match=r"names ([2-9]|\d\d+) rows"):
        errors["torchtitan Llama 3.1 8B on 8 H100, FSDP"]  # a part of several names
    with pytest.raises(ValueError, match="names 0 rows"):
        errors["GPT 33B"]
    # a whole name wins over the longer names it is part of
    exact = "torchtitan Llama 3.1 8B on 8 H100, FSDP 8"
    assert errors[exact] == exact


@pytest.mark.parametrize("target", [MAX_ABS_ERROR_TARGET, 0.05])
def test_the_rows_beyond_the_target_are_exactly_those(report, monkeypatch, target) -> None:
    # at the 8 points no priced row is beyond today (docs/validation.md); at 5 some
    # are, which exercises the listing and its order
    monkeypatch.setattr("api.cli.validate.MAX_ABS_ERROR_TARGET", target)
    line = beyond_target_line(report)
    priced = [r for r in report.rows if r.run.group == "priced" and r.compares_utilisation]
    beyond = [r for r in priced if abs(r.error) > target]
    if not beyond:
        assert line == f"No priced row is beyond the {100 * target:.0f}-point target."
        return
    assert f"{100 * target:.0f}-point target" in line
    for row in priced:
        assert (f"{row.run.name} ({100 * row.error:+.1f})" in line) == (row in beyond)
    worst = max(beyond, key=lambda r: abs(r.error))
    assert line.index(worst.run.name) < min(
        line.index(r.run.name) for r in beyond if r is not worst
    )


def test_reflow_keeps_code_spans_and_paths_whole_and_indents_items() -> None:
    text = "- **A.** " + "word " * 30 + "`--micro-batch-size 1` docs/cost-model.md end\n\n## Head\n"
    lines = reflow(text, width=40).splitlines()
    assert all(len(line) <= 40 or " " not in line.strip() for line in lines)
    assert any("`--micro-batch-size 1`" in line for line in lines)
    assert any("docs/cost-model.md" in line for line in lines)
    assert all(line.startswith("  ") for line in lines[1 : lines.index("")])
    assert lines[-1] == "## Head"


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th",
    ]  # fmt: skip
    assert ordinal(None) == "unranked"


def test_the_prose_lives_in_the_docs_templates_and_says_when_they_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the prose is Markdown under docs/templates, not strings in code
    assert (prose.TEMPLATES / "validation-misses.md").read_text() == markdown_misses()
    monkeypatch.setattr(prose, "TEMPLATES", tmp_path)
    prose.template.cache_clear()
    try:
        with pytest.raises(prose.TemplateMissing, match="validation-preamble.md is missing"):
            prose.markdown_preamble()
    finally:
        prose.template.cache_clear()
