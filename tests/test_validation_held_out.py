"""Leave-one-source-out validation: each default chosen by looking at rows is chosen again
without one source, that source priced with the choice; a candidate never replaces what a row
or its engine sets, and the report carries the figure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from api.cli.validate import markdown, text_report
from models.presets import gpu_presets
from optimizer.costmodel import CostAssumptions
from optimizer.uncertainty.regimes import GPU_GENERATIONS
from optimizer.validation import (
    CHOSEN_DEFAULTS,
    published_runs,
    validate,
)
from optimizer.validation.held_out import (
    ChosenDefault,
    choose_without,
    held_out_headline,
    held_out_sources,
    leave_one_source_out,
    reaches,
    repriced,
)
from optimizer.validation.report import priced_assumptions
from optimizer.validation.tables import gpu_generation

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rows():
    return validate(with_ranks=False).headline.utilisation


@pytest.fixture(scope="module")
def result():
    return leave_one_source_out()


def test_the_choice_without_a_source_is_the_least_mean_error_of_the_others() -> None:
    # four rows of three sources; errors are signed utilisations, compared as absolute
    sources = ["A", "A", "B", "C"]
    errors = {
        "x": {0: [0.01, -0.01, 0.05, 0.03], 1: [0.00, 0.00, 0.06, -0.04]},
        # a candidate equal to today's on the rows kept is a tie, which today's wins
        "y": {"today": [0.02, 0.02, 0.02, 0.02], "other": [0.02, 0.02, 0.09, 0.02]},
    }
    # without A (rows B, C): x=0 (0.05 + 0.03) / 2 = 0.040, x=1 (0.06 + 0.04) / 2 = 0.050
    assert choose_without(errors, sources, "A") == {"x": 0, "y": "today"}
    # without B (A, A, C): x=0 0.05 / 3 = 0.0167, x=1 0.04 / 3 = 0.0133; y ties
    assert choose_without(errors, sources, "B") == {"x": 1, "y": "today"}
    # without C (A, A, B): x=0 0.07 / 3, x=1 0.06 / 3; y's other is worse by B's 0.09
    assert choose_without(errors, sources, "C") == {"x": 1, "y": "today"}


def test_the_registry_names_todays_defaults_and_the_sources_that_chose_them() -> None:
    labels = {run.source_label for run in published_runs()}
    for chosen in CHOSEN_DEFAULTS:
        field = CostAssumptions.model_fields[chosen.assumption]
        assert chosen.default == field.default, chosen.assumption
        assert len(set(chosen.candidates)) == len(chosen.candidates) >= 2
        for value in chosen.candidates:  # each a value the field takes
            CostAssumptions.model_validate({chosen.assumption: value})
        assert chosen.sources and set(chosen.sources) <= labels, chosen.assumption
        assert all(name in CostAssumptions.model_fields for name in chosen.also_unset)


def test_a_default_a_row_or_its_engine_sets_is_not_overridden(rows) -> None:
    (zero3,) = [c for c in CHOSEN_DEFAULTS if c.assumption == "zero3_overlap_fraction"]
    (attention,) = [c for c in CHOSEN_DEFAULTS if c.assumption.startswith("attention")]
    # rows priced at another overlap than today's: their engine states its own (torchtitan's
    # FSDP, 2021 DeepSpeed's blocking fetch)
    engine_set = [
        row for row in rows
        if priced_assumptions(row.run).zero3_overlap_fraction != zero3.default
    ]  # fmt: skip
    assert {row.run.engine.split("@")[0] for row in engine_set} == {"torchtitan", "deepspeed"}
    for row in engine_set:
        assert not reaches(row.run, zero3)
        assert repriced(row, {"zero3_overlap_fraction": 0.25}, CHOSEN_DEFAULTS) is row
    # a row that states the assumption itself, even at today's value, keeps it
    a100 = next(row.run for row in rows if gpu_generation(row.run) == "Ampere")
    assert reaches(a100, attention)
    for stated in (
        {"attention_kernel_efficiency_scale": 1.0},
        {"attention_kernel_efficiency": 0.6},
    ):
        own = replace(a100, assumptions=a100.assumptions.model_copy(update=stated))
        assert not reaches(own, attention)
    # and a default for A100 rows never reaches another GPU's
    other = next(row.run for row in rows if gpu_generation(row.run) == "Hopper")
    assert not reaches(other, attention)


def test_a_candidate_reaching_a_row_prices_it_otherwise(rows) -> None:
    (wave,) = [c for c in CHOSEN_DEFAULTS if c.assumption == "gemm_wave_quantization"]
    row = next(row for row in rows if "SC21 GPT 7.5B" in row.run.name)
    assert reaches(row.run, wave)
    moved = repriced(row, {"gemm_wave_quantization": True}, CHOSEN_DEFAULTS)
    assert moved.estimate.layout == row.estimate.layout
    assert moved.predicted < row.predicted  # a part-full wave costs a full one


def test_held_out_equals_in_sample_when_no_choice_changes(rows) -> None:
    # only today's value to choose from: every source is priced as in-sample
    today_only = tuple(
        ChosenDefault(c.assumption, c.candidates[:1], c.sources, "", "", c.applies)
        for c in CHOSEN_DEFAULTS
    )
    result = held_out_sources(rows, today_only)
    assert all(not s.choices for s in result.sources)
    assert result.held_out.mean_abs_error == result.in_sample.mean_abs_error
    assert result.held_out.step_time_mean_abs_error == result.in_sample.step_time_mean_abs_error


def test_each_source_held_out(result, rows) -> None:
    assert {s.source for s in result.sources} == {row.run.source_label for row in rows}
    assert len(result.held_out.rows) == len(result.in_sample.rows) == len(rows)
    assert result.in_sample.mean_abs_error == pytest.approx(
        validate(with_ranks=False).mean_abs_error
    )
    for s in result.sources:
        assert all(row.run.source_label == s.source for row in s.held_out.rows)
        assert [r.run for r in s.held_out.rows] == [r.run for r in s.in_sample.rows]
        if not s.choices:  # nothing chosen otherwise: the very rows, the same figures
            assert s.held_out.rows == s.in_sample.rows
        for name, value in s.choices.items():
            (chosen,) = [c for c in CHOSEN_DEFAULTS if c.assumption == name]
            assert value in chosen.candidates[1:]


def test_step_time_error_is_the_predicted_step_over_the_reported(rows) -> None:
    timed = [r for r in rows if r.run.metric == "step_time_s" and r.plan is None]
    assert timed
    for row in timed:
        assert row.step_time_error == pytest.approx(row.estimate.step_time_s / row.run.reported - 1)


def test_every_preset_gpu_has_a_generation() -> None:
    assert {GPU_GENERATIONS[name.split("-")[0]] for name in gpu_presets()} == {
        "Ampere", "Hopper", "Blackwell", "AMD CDNA",
    }  # fmt: skip


def test_the_report_carries_the_held_out_figures(result) -> None:
    headline = held_out_headline(result)
    assert headline.startswith("mean ") and "; leave-one-source-out " in headline
    assert "points (step time: " in headline
    text = markdown(validate(with_ranks=False))
    assert text.index(headline) < text.index("## Runs")  # near the top
    section = text[text.index("## Leave one source out") :]
    for s in result.sources:
        assert f"| {s.source} | {len(s.in_sample.rows)} |" in section
    for title in ("GPU generation", "precision", "scale (GPU count)", "dense or MoE"):
        assert f"### Held out, by {title}" in section
    assert headline in text_report(validate(with_ranks=False))
    # both figures in the written document, as `make validate` leaves it
    assert f"**{headline}.**" in (REPO / "docs" / "validation.md").read_text()
