"""A release the project read no profile for (`engine: "nemo@25.09"`, the interface's own
examples): priced by the profile that stands for it, said so, never refused for being
unread; what cannot be placed is refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from models.errors import InvalidSpec
from optimizer.engines import get_engine
from optimizer.engines.versions import stated_key


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


BODY: dict[str, Any] = {
    "model": "llama3-8b",
    "cluster": {"gpus": 64, "gpu": "h100-sxm"},
    "training": {"global_batch": 128, "seq_len": 8192, "precision": "fp8"},
    "layout": {"tp": 2, "pp": 2, "micro_batch": 1, "zero": 1, "recompute": "selective"},
}


@pytest.mark.parametrize(
    ("stated", "profile"),
    [
        # interface.md's examples, each of which was a 422 before
        ("megatron@core_r0.14", "core_r0.8.0"),
        ("nemo@25.09", "26.04.01"),
        ("torchtitan@0.3", "0.3.0"),
        ("deepspeed@0.19", "0.19.8"),
        # the other spellings of a Megatron-Core release, dated by its tag
        ("megatron@core_v0.15.0", "core_r0.8.0"),
        ("megatron@0.19", "core_r0.8.0"),
        ("megatron@core_r0.20", "core_r0.20.0"),
        ("megatron@core_r0.23.0rc1", "core_r0.20.0"),  # newer than every profile: the newest
        ("megatron@23.06", "23.04"),
        ("nemo@26.04", "26.04.01"),  # inside 26.04.01's span (Megatron-Bridge from 25.09)
        ("nemo@25.02", "24.09"),  # NeMo 2 before Megatron-Bridge: the newest read before it
        ("nemo@26.12", "bridge_0.7"),
        ("deepspeed@0.14.4", "0.6.2"),
        ("torchtitan@0.2.1", "0.1.0"),
        # older than every profile: the oldest, the warning saying so
        ("nemo@23.11", "24.09"),
        ("deepspeed@0.2", "0.3.15"),
        ("megatron@core_r0.4", "23.04"),  # dated by its tag, between 23.04 and core_r0.8.0
        ("megatron@v2.6", "v2.5"),  # 17 days after it
        ("megatron@v2.0", "v2.5"),  # before it: the oldest
    ],
)
def test_a_release_with_no_profile_is_priced_by_the_one_standing_for_it(
    stated: str, profile: str
) -> None:
    engine = get_engine(stated)
    assert engine.release is not None and engine.release.stands_for == profile
    assert engine.spec == stated  # the answer names the release the user ran
    standing = get_engine(f"{engine.name}@{profile}")
    note = engine.release.note or ""
    assert f"{engine.name}@{profile}'s defaults" in note and stated in note
    assert engine.settings_in_force == standing.settings_in_force
    assert engine.runtime == standing.runtime
    if stated in ("nemo@23.11", "deepspeed@0.2", "megatron@v2.0"):
        assert "older than every release read" in note


def test_past_the_profile_a_setting_a_later_release_has_may_be_stated() -> None:
    # core_r0.8.0's code has no --fp8-param-gather; core_r0.14's has (it arrived between)
    with pytest.raises(InvalidSpec) as refused:
        get_engine("megatron@core_r0.8.0", {"fp8_param_gather": True})
    assert refused.value.field == "engine_settings.fp8_param_gather"
    engine = get_engine("megatron@core_r0.14", {"fp8_param_gather": True})
    assert engine.settings_in_force["fp8_param_gather"] is True
    # its default stays what the older code always did
    assert get_engine("megatron@core_r0.14").settings_in_force["fp8_param_gather"] is False
    # inside a profile's span nothing is widened: 25.09 is 26.04.01 as read
    assert get_engine("nemo@25.09").release.lacks == get_engine("nemo@26.04.01").release.lacks


def test_over_http_the_release_prices_as_its_profile_and_the_answer_says_so(
    client: TestClient,
) -> None:
    stated = client.post("/v1/evaluate", json=BODY | {"engine": "nemo@25.11"})
    read = client.post("/v1/evaluate", json=BODY | {"engine": "nemo@26.04.01"})
    assert stated.status_code == read.status_code == 200, stated.text
    assert stated.json()["step_time_s"] == read.json()["step_time_s"]
    assert stated.json()["memory_gb"] == read.json()["memory_gb"]
    assert any("nemo@25.11 has no profile of its own" in w for w in stated.json()["warnings"])
    assert not any("no profile of its own" in w for w in read.json()["warnings"])
    searched = client.post(
        "/v1/optimize",
        json={k: v for k, v in BODY.items() if k != "layout"} | {"engine": "megatron@core_r0.14"},
    )
    assert searched.status_code == 200, searched.text
    assert any("megatron@core_r0.14 has no profile" in w for w in searched.json()["warnings"])


@pytest.mark.parametrize(
    ("stated", "words"),
    [
        ("megatron@core_r0.2", "known: "),  # undated: nothing to place it by
        ("megatron@v3.0", "known: "),  # no tag of it in the repository read
        ("nemo@latest", "known: "),
        ("torchtitan@0.3.0; rm -rf /", "known: "),
        ("nemo@\uff12\uff15.09", "known: "),  # full-width digits: not a release's name
    ],
)
def test_what_cannot_be_placed_is_refused_naming_the_field(stated: str, words: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        get_engine(stated)
    assert refused.value.field == "engine" and words in refused.value.message


def test_a_version_string_is_read_by_the_engines_own_order() -> None:
    core = {(0, 14): "2025-10", (2, 5): "2021-08"}
    assert stated_key("core_r0.14", core) == (2025, 10)
    assert stated_key("core_v0.14.0rc7", core) == (2025, 10)
    assert stated_key("25.09", core) == (2025, 9)
    assert stated_key("0.15", core) == (9999, 12)  # past the newest of its line
    assert stated_key("0.13", core) is None  # not dated, and not past them
    assert stated_key("0.19", None) == (0, 19, 0)
    assert stated_key("v0.3.1", None) == (0, 3, 1)
    assert stated_key("25.09", {}) == (2025, 9)
    assert stated_key("nightly", {}) is None
