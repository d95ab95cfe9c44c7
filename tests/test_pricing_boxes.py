"""Box pricing (optimizer/search/boxes.py) against the row pricing it replaces in the tables:
the same figures, bit for bit, on every valid layout of dense, interleaved, context-parallel
and mixture-of-experts searches, in one box or split over many."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer import Request
from optimizer.costmodel import LayoutBox, profile_named
from optimizer.engines import ENGINES, get_engine
from optimizer.search import SearchSpace, boxes
from optimizer.search.placements import placement_classes
from optimizer.search.problem import KNOBS
from optimizer.search.tables import valid_rows
from optimizer.search.terms import PLACEMENT
from optimizer.searches import prepare_search
from tests.helpers import engine_or_none, plate_job

CASES = {
    "405b on 2,048, every schedule": (
        plate_job(2048),
        SearchSpace(max_vpp=4, schedules=["1f1b", "zero-bubble", "dualpipe"]),
    ),
    "70b at 32k on 256, context parallel": (
        plate_job(256, "llama3-70b", seq_len=32768),
        SearchSpace(micro_batches=[1, 2]),
    ),
    "mixtral on 64, expert parallel": (plate_job(64, "mixtral-8x7b"), SearchSpace(max_vpp=2)),
}


def rows_of(name: str):
    job, space = CASES[name]
    problem, costs = prepare_search(Request(job, space=space, engine=get_engine("megatron")))
    classes = placement_classes(problem)
    grid, k, index = valid_rows(problem, classes, (*KNOBS, PLACEMENT))
    return problem, classes, grid, k, index, costs


@pytest.mark.parametrize("cells", [boxes.BOX_CELLS, 997])
@pytest.mark.parametrize("name", sorted(CASES))
def test_boxes_price_every_row_as_the_grid_does(
    name: str, cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(boxes, "BOX_CELLS", cells)  # 997: a few tuples a box, many boxes
    monkeypatch.setattr(boxes, "MAX_CELLS_PER_ROW", 10**9)  # boxes however sparse
    problem, classes, grid, k, index, costs = rows_of(name)
    assert len(k) > 1000
    # shuffled, so that a block's rows are not contiguous
    order = np.random.default_rng(0).permutation(len(k))
    k, index = k[order], {axis: column[order] for axis, column in index.items()}
    grid = grid.take(order)
    profile = profile_named("standard")
    expected = profile.price_grid(problem.job, grid, costs)
    got = boxes.boxed_prices(profile, problem, classes, k, index, costs, grid)
    for field in boxes.PRICE_FIELDS:
        assert np.array_equal(getattr(got, field), getattr(expected, field)), field


def test_a_box_lays_each_choice_on_its_own_axis() -> None:
    degrees = np.asarray([[8, 16, 1, 128], [4, 8, 2, 256]])
    knobs = {"vpp": (1, 2, 4), "micro_batch": (1,), "zero": (0, 1), "recompute": (0,)}
    knobs |= {"schedule": (0,), "ep": (1,)}
    # placement 0 is tp, cp, pp, dp innermost first; 23 is dp, pp, cp, tp
    box = LayoutBox(degrees, knobs, placements=np.asarray([[0, 23], [0, 23]]))
    assert box.shape == (2, 3, 1, 2, 1, 1, 1, 2)
    assert box.degree("tp").shape == (2, 1, 1, 1, 1, 1, 1, 1)
    assert box.knob("zero").ravel().tolist() == [0, 1]
    assert box.knob("zero").shape == (1, 1, 1, 2, 1, 1, 1, 1)
    # spans by hand: tp first spans tp; pp under (tp, cp, pp, dp) spans tp*cp*pp
    assert box.span("tp")[:, 0, 0, 0, 0, 0, 0, 0].tolist() == [8, 4]
    assert box.span("pp")[:, 0, 0, 0, 0, 0, 0, 0].tolist() == [8 * 16, 4 * 2 * 8]
    assert box.span("tp").shape == (2, 1, 1, 1, 1, 1, 1, 2)
    assert box.span("tp")[:, 0, 0, 0, 0, 0, 0, 1].tolist() == [16384, 16384]  # tp outermost
    assert box.span("dp")[:, 0, 0, 0, 0, 0, 0, 1].tolist() == [128, 256]


def test_rows_too_sparse_for_a_box_are_priced_row_by_row_in_their_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem, classes, grid, k, index, costs = rows_of("70b at 32k on 256, context parallel")
    profile = profile_named("standard")
    dense = boxes.Rows(problem, classes, k, index).cells / len(k)
    assert dense > 1  # a box holds cells no layout takes
    expected = profile.price_grid(problem.job, grid, costs)
    monkeypatch.setattr(boxes, "MAX_CELLS_PER_ROW", 0)  # every schedule's rows priced as rows
    got = boxes.boxed_prices(profile, problem, classes, k, index, costs, grid)
    for field in boxes.PRICE_FIELDS:
        assert np.array_equal(getattr(got, field), getattr(expected, field)), field


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize(
    ("model", "gpus"), [("llama3-405b", 16384), ("mixtral-8x7b", 256), ("llama3-70b", 768)]
)
def test_engine_rules_tested_on_boxes_are_those_some_row_breaks(
    model: str, gpus: int, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem, _ = prepare_search(
        Request(plate_job(gpus, model), space=SearchSpace(max_vpp=4), engine=engine_or_none(engine))
    )
    classes = placement_classes(problem)
    grid, _, _ = valid_rows(problem, classes, (*KNOBS, PLACEMENT))
    broken = {name for name, rows in problem.engine_breaks(grid).items() if rows.any()}
    assert boxes.engine_rules_broken(problem, classes) == broken
    # in blocks of a few tuples (the boxes' cap), the same rules
    monkeypatch.setattr(boxes, "BOX_CELLS", 997)
    assert boxes.engine_rules_broken(problem, classes) == broken
    if engine == "megatron":  # not vacuous: some rules broken, others by no layout
        assert broken and len(broken) < len(problem.engine_rules)
