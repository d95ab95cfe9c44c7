"""Estimates' intervals: split-conformal bounds counted by sources (by hand), the regime widened
until enough rows bear on it, the interval on every answer under profile standard, its
coverage out of sample, and the shipped residuals current."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from models.layout import Layout
from optimizer.costmodel import evaluate
from optimizer.uncertainty import (
    Regime,
    Residual,
    conformal_bounds,
    interval_of,
    published_residuals,
    residuals_json,
)
from optimizer.uncertainty.intervals import nearest
from optimizer.validation.residuals import held_out_coverage, validation_residuals
from tests.helpers import plate_job

REPO = Path(__file__).resolve().parents[1]
HOPPER = Regime("megatron", "Hopper", "bf16/fp16", "dense", "65-512")


def residual(source: str, mfu: float, step: float = 1.0, regime: Regime = HOPPER) -> Residual:
    return Residual(regime, source, mfu, step, None)


def test_conformal_bounds_by_hand() -> None:
    # n = 10 draws at 80%: k = ceil(11 x 0.9) = 10, the extremes
    assert conformal_bounds(list(range(1, 11))) == (1, 10)
    # n = 20: k = ceil(21 x 0.9) = 19, the second smallest and second largest
    assert conformal_bounds(list(range(1, 21))) == (2, 19)
    # 20 rows from 4 sources count as 4 draws: level min(1, ceil(5 x 0.9) / 4) = 1, extremes
    assert conformal_bounds(list(range(1, 21)), sources=4) == (1, 20)
    # from 19 sources: level ceil(20 x 0.9) / 19 = 18/19; k = ceil(18/19 x 20) = 19
    assert conformal_bounds(list(range(1, 21)), sources=19) == (2, 19)


def test_a_regime_with_too_few_rows_or_sources_is_widened() -> None:
    other_scale = replace(HOPPER, scale="over 4,096")
    rows = [residual("a", 0.0)] * 4 + [residual(s, 0.0, regime=other_scale) for s in "bcdefg"]
    regime, matched = nearest(rows, HOPPER)
    # 4 rows of one source in the exact regime: widened to any scale, all 10 rows
    assert regime.scale is None and regime.engine == "megatron" and len(matched) == 10
    many = [residual(s, 0.0) for s in "abcdefghij"]
    assert nearest(many, HOPPER)[0] == HOPPER


def test_the_interval_moves_the_estimate_by_the_rows_misses() -> None:
    estimate = evaluate(plate_job(), Layout(tp=8, pp=16, vpp=4, micro_batch=1, zero=1), "standard")
    # ten sources, misses -2..+7 points, measured steps 0.9..1.35 of the predicted
    rows = [residual(f"s{i}", (i - 2) / 100, 0.9 + i * 0.05) for i in range(10)]
    interval = interval_of(estimate, HOPPER, rows)
    assert interval is not None
    # 10 draws: the extremes
    assert interval.mfu == pytest.approx((estimate.mfu - 0.02, estimate.mfu + 0.07))
    assert interval.step_time_s == pytest.approx(
        (estimate.step_time_s * 0.9, estimate.step_time_s * 1.35)
    )
    assert interval.memory_gb is None and "10 published runs" in interval.basis


def test_every_answer_under_standard_carries_its_interval() -> None:
    client = TestClient(create_app())
    body: dict[str, Any] = {
        "model": "llama3-70b",
        "cluster": {"gpus": 64, "gpu": "h100-sxm"},
        "training": {"global_batch": 64, "seq_len": 8192},
        "layout": {"tp": 8, "pp": 4, "micro_batch": 1, "zero": 1, "recompute": "full"},
    }
    answer = client.post("/v1/evaluate", json=body).json()
    interval = answer["interval"]
    assert interval["coverage"] == 0.8 and "published runs" in interval["basis"]
    low, high = interval["step_time_s"]
    assert low < high and interval["mfu"][0] < interval["mfu"][1]
    search = {k: v for k, v in body.items() if k != "layout"} | {"explain": False}
    best = client.post("/v1/optimize", json=search).json()["best"]
    assert best["interval"] is not None
    workshop = body | {"profile": "workshop", "engine": "generic"}
    assert client.post("/v1/evaluate", json=workshop).json()["interval"] is None


def test_intervals_hold_for_four_in_five_rows_of_a_source_they_did_not_see() -> None:
    coverage = held_out_coverage(published_residuals())
    assert coverage.utilisation_rows >= 90
    assert coverage.utilisation_share >= 0.8


def test_the_shipped_residuals_are_current() -> None:
    shipped = (REPO / "models" / "presets" / "residuals.json").read_text()
    assert shipped == residuals_json(validation_residuals()), (
        "models/presets/residuals.json is stale: run `make validate`"
    )
