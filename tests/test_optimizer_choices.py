"""What each of the optimum's less common choices buys, checked against the enumerator."""

from __future__ import annotations

import pytest

from optimizer import Request
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.search import enumerator
from optimizer.search.problem import resolve_space
from optimizer.search.space import SearchSpace
from optimizer.searches import optimize
from tests.helpers import plate_job

# How each choice is taken away, as a request would say it.
WITHOUT = {
    "context_parallel": {"cp": 1},
    "schedule": {"schedules": ["1f1b"]},
    "interleaving": {"vpp": 1},
    "zero3": {"zero_stages": [0, 1, 2]},
    "recompute": {"recompute": ["none"]},
}


def enumerated_best_mfu(job, space: SearchSpace) -> float | None:
    layout = enumerator.best_layout(resolve_space(job, space, "standard"), CostAssumptions())
    return None if layout is None else evaluate(job, layout, "standard").mfu


def test_plate_at_four_chunks_prices_context_parallelism_and_dualpipe() -> None:
    # at four chunks cp and DualPipe win (docs/cost-model.md "Known limits"), each choice priced
    job, space = plate_job(), SearchSpace(max_vpp=4)
    result = optimize(Request(job, space=space, engine=None))
    assert result.best is not None and result.best.layout.cp > 1
    choices = {choice.name: choice for choice in result.choices}
    assert set(choices) == {"context_parallel", "schedule"}
    for name, choice in choices.items():
        expected = enumerated_best_mfu(job, space.model_copy(update=WITHOUT[name]))
        assert expected is not None and choice.without_mfu == pytest.approx(expected, rel=1e-9)
        assert choice.without is not None and choice.without.mfu < result.best.mfu
        points = f"{(result.best.mfu - expected) * 100:.2f} points"
        assert points in choice.description
    assert choices["context_parallel"].without.layout.cp == 1
    assert f"cp {result.best.layout.cp})" in choices["context_parallel"].description


def test_a_choice_nothing_fits_without_is_needed() -> None:
    # Llama 3 70B on 131,072-token sequences with ZeRO-1 and no recompute: without cp
    # no layout fits 80 GB (the enumerator agrees)
    job = plate_job(1024, "llama3-70b", seq_len=131072, global_batch=64)
    space = SearchSpace(recompute=["none"], zero_stages=[1])
    result = optimize(Request(job, space=space, engine=None))
    assert result.best is not None and result.best.layout.cp > 1
    assert enumerated_best_mfu(job, space.model_copy(update={"cp": 1})) is None
    (needed,) = [c for c in result.choices if c.name == "context_parallel"]
    assert needed.without_mfu is None and needed.without is None
    assert needed.description.endswith("is needed: nothing fits without it")


def test_choices_the_user_fixed_are_not_priced() -> None:
    result = optimize(
        Request(
            plate_job(), space=SearchSpace(max_vpp=4, cp=8, schedules=["dualpipe"]), engine=None
        )
    )
    assert result.best is not None and result.best.layout.cp == 8
    assert [choice.name for choice in result.choices] == []


def test_a_choice_without_a_plainer_allowed_value_is_not_priced() -> None:
    # only zero-bubble and DualPipe allowed: no 1F1B layout is in the request to compare with,
    # so the schedule is the user's choice, not the solver's
    space = SearchSpace(max_vpp=4, schedules=["zero-bubble", "dualpipe"])
    result = optimize(Request(plate_job(), space=space, engine=None))
    assert result.best is not None and result.best.layout.schedule.value != "1f1b"
    assert "schedule" not in [choice.name for choice in result.choices]
