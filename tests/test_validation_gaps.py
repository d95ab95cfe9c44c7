"""The gap of issue 15 (how far the published degrees, at their best knobs, fall short of the
optimum's MFU) and the report's table of the rows far behind: each layout it names is priced
again here, independently of the ranking that chose it."""

from __future__ import annotations

import pytest

from models.layout import Layout, Recompute
from optimizer.costmodel import evaluate
from optimizer.engines import engine_assumptions, get_engine
from optimizer.validation import validate, wide_gap_table
from optimizer.validation.report import WIDE_GAP
from optimizer.validation.tables import layout_changes


@pytest.fixture(scope="module")
def report():
    return validate()  # cached: the same report test_validation.py reads


def test_the_rows_far_behind_name_layouts_that_price_as_the_ranking_says(report) -> None:
    wide = report.wide_gaps
    assert wide, "measured: 9 rows more than 15% behind (docs/validation.md)"
    for row in wide:
        assert row.behind_best is not None and row.behind_best > WIDE_GAP
        ours, best = row.degrees_best_layout, row.optimum_layout
        assert ours is not None and best is not None
        assert (ours.tp, ours.pp, ours.cp, ours.dp) == row.run.degrees
        assumptions = engine_assumptions(
            get_engine(row.run.engine, row.run.engine_settings),
            row.run.assumptions,
            row.run.precision,
        )
        priced = {
            name: evaluate(row.run.job, layout, "standard", assumptions).mfu
            for name, layout in (("ours", ours), ("best", best))
        }
        assert priced["ours"] == pytest.approx(row.degrees_best_mfu, rel=1e-9)
        assert priced["best"] == pytest.approx(row.optimum_mfu, rel=1e-9)
        assert 1 - priced["ours"] / priced["best"] == pytest.approx(row.behind_best)
    # widest first, one table row each
    gaps = [row.behind_best for row in wide]
    assert gaps == sorted(gaps, reverse=True)
    assert [line[0] for line in wide_gap_table(report)] == [row.run.name for row in wide]


def test_layout_changes_name_each_choice_that_differs() -> None:
    before = Layout(tp=8, pp=1, dp=48, micro_batch=1, zero=1)
    after = Layout(tp=2, pp=2, dp=96, vpp=8, zero=1, recompute=Recompute.FULL)
    assert layout_changes(before, after) == (
        "tp 8 -> 2; pp 1 -> 2; dp 48 -> 96; vpp 1 -> 8; recompute none -> full"
    )
    moved = before.model_copy(update={"placement": ("tp", "dp", "cp", "pp")})
    assert layout_changes(before, moved).startswith("placement ")
