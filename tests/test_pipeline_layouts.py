"""Megatron's pipeline layout strings read back as layers per rank, and validation rows that
name their recipe's layout priced as that stage plan."""

from __future__ import annotations

import json

import pytest

from models.errors import InvalidSpec
from models.presets import published_data
from optimizer.costmodel import evaluate
from optimizer.costmodel.standard.stage_plans import price_plan
from optimizer.engines.stages import layout_string_chunks, layout_string_ranks, plan_layout_string
from optimizer.validation import compare
from optimizer.validation.published import _run, published_runs
from optimizer.validation.report import priced_assumptions


def test_layout_strings_unroll_as_megatron_reads_them() -> None:
    # Megatron-Bridge's Llama 3 70B FP8 recipe: E and two layers, 34 chunks of two, one of
    # three, three of two, one layer with the loss: 40 chunks, 80 layers
    bridge = "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"
    chunks = layout_string_chunks(bridge)
    assert (len(chunks), sum(chunks), chunks[35], chunks[-1]) == (40, 80, 3, 1)
    # chunk c is rank c % 8's: rank 3 holds the chunk of three, rank 7 the last one
    assert layout_string_ranks(bridge, 8) == (10, 10, 10, 11, 10, 10, 10, 9)
    # DeepSeek-V3's: an MTP layer ("m") and the loss hold no decoder layer
    assert layout_string_ranks("Et|(tt|)*30mL", 8) == (7, 8, 8, 8, 8, 8, 8, 6)
    # what the exporters write for a plan reads back as that plan
    assert layout_string_ranks(plan_layout_string((7, 9, 9, 7), 2), 4) == (7, 9, 9, 7)


@pytest.mark.parametrize(
    ("layout", "message"),
    [("Et*2|tx|tL", "unknown layer characters"), ("Et|t|tL", "3 chunks over pp")],
)
def test_layout_strings_the_parser_refuses(layout: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        layout_string_ranks(layout, 2)


def test_a_row_with_its_recipes_layout_is_priced_as_that_plan() -> None:
    run = next(
        r for r in published_runs() if r.name.startswith("Megatron-Bridge Llama 3 70B on 64")
    )
    assert run.stage_plan is not None and run.stage_plan.layers == (10, 10, 10, 11, 10, 10, 10, 9)
    row = compare(run)
    a = priced_assumptions(run)  # its engine's release and settings over the defaults
    plan = price_plan(run.job, a, row.estimate.layout, run.stage_plan)
    even = evaluate(run.job, run.layout, "standard", a)
    assert row.predicted == plan.mfu != even.mfu
    # the head moves off a full last rank: the plan is faster than the even split
    assert plan.mfu > even.mfu
    assert row.predicted_memory_gb == pytest.approx(plan.allocator_bytes / 1e9)
    assert row.predicted_device_gb == pytest.approx(plan.memory_bytes / 1e9)


def test_a_layout_that_misplaces_the_models_layers_is_refused() -> None:
    entry = next(
        e
        for e in published_data()["runs"]
        if e["name"].startswith("Megatron-Bridge Llama 3 70B on 64")
    )
    wrong = json.loads(json.dumps(entry)) | {"pipeline_layout": "Et*2|(t*2|)*38,tL"}
    # 2 + 38 x 2 + 1 = 79 of the model's 80
    with pytest.raises(InvalidSpec, match="pipeline_layout: the stage plan places 79 layers"):
        _run(wrong, {})
    with pytest.raises(InvalidSpec, match="3 chunks over pp") as refused:
        _run(entry | {"pipeline_layout": "Et|t|tL"}, {})
    assert refused.value.field == "pipeline_layout"
