"""The layouts tied with the optimum that `optimize` lists: the same as an exhaustive
enumeration of the whole space finds within the optimum's interval width (the oracle), each
with the mechanism their difference rests on; none under workshop (no interval), and a search
that stops short says so."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from api.schemas import SearchRequest
from optimizer import ties
from optimizer.explain import priced
from optimizer.searches import optimize, prepare_search
from optimizer.ties import MAX_TIED, deciding_mechanism, tied_width, unplaced
from optimizer.trials import ranked_candidates
from tests.helpers import run_cli

BODY: dict[str, Any] = {
    "model": "llama3-8b",
    "cluster": {"gpus": 64, "gpu": "h100-sxm"},
    "training": {"global_batch": 128, "seq_len": 8192},
}


def test_the_tied_layouts_are_the_best_of_the_whole_space_within_the_interval_width() -> None:
    request = SearchRequest.model_validate(BODY).to_request()
    result = optimize(request)
    best = result.best
    assert best is not None and best.interval is not None
    width = tied_width(best)
    # the oracle: every layout of the space priced (one per layout up to its placement),
    # best first, the optimum left out, those within the width
    everything = [
        (layout, mfu)
        for layout, mfu in ranked_candidates(request)
        if unplaced(layout) != unplaced(best.layout) and best.mfu - mfu <= width
    ]
    expected = everything[:MAX_TIED]
    assert len(expected) == MAX_TIED  # the case has more tied layouts than are listed
    got = [(unplaced(t.estimate.layout), t.estimate.mfu) for t in result.tied]
    assert [layout for layout, _ in got] == [unplaced(layout) for layout, _ in expected]
    assert [mfu for _, mfu in got] == pytest.approx([mfu for _, mfu in expected], abs=1e-8)
    problem, costs = prepare_search(request)
    for tie in result.tied:
        assert tie.estimate.interval is not None  # each with its own interval
        other = priced(problem, tie.estimate.layout, costs)
        assert tie.mechanism == deciding_mechanism(best, other)[0]
        assert tie.mechanism in tie.why
    assert result.tied_note is not None and result.tied_note.startswith("the 5 best layouts")


def test_no_ties_without_an_interval_or_explanations(monkeypatch: pytest.MonkeyPatch) -> None:
    workshop = SearchRequest.model_validate(BODY | {"profile": "workshop", "engine": "generic"})
    result = optimize(workshop.to_request())
    assert result.tied == () and "profile workshop gives no interval" in str(result.tied_note)
    request = SearchRequest.model_validate(BODY).to_request()
    quiet = optimize(replace(request, explain=False))
    assert quiet.tied == () and quiet.tied_note is None
    # a search that may price only a few layouts stops and says why
    monkeypatch.setattr(ties, "MAX_TIED_ROWS", 1_000)
    short = optimize(request)
    assert short.tied == ()
    assert re.search(r"spans [\d,]+ layouts, over the 1,000 priced", str(short.tied_note))


def test_optimize_prints_and_answers_its_tied_layouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "request.json"
    spec.write_text(json.dumps(BODY))
    code, out, _ = run_cli(["optimize", "--spec", str(spec)], capsys)
    assert code == 0
    block = out[out.index("tied with the optimum: ") :].split("\n\n")[0].splitlines()
    assert len(block) == 1 + MAX_TIED and "differs most in" in block[1]
    code, out, _ = run_cli(["optimize", "--spec", str(spec), "--json"], capsys)
    tied = json.loads(out)["tied"]
    assert len(tied) == MAX_TIED
    assert set(tied[0]) >= {"layout", "mfu", "step_time_s", "interval", "mechanism", "why"}
