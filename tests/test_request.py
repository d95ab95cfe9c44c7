"""The one request: parsed once at the edge, its engine resolved there and nowhere after,
and moved to another cluster as a new request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import optimizer.engines as engines
from api.http import routes
from api.scenarios import scenario_request
from api.schemas import EvaluateRequest, SearchRequest, StagesRequest
from models.hardware import ClusterSpec
from models.presets import gpu_preset
from optimizer import Request, SearchSpace, StopSignal
from optimizer.engines import get_engine
from optimizer.studies import StudySpec, expand, run_scenario, run_settings
from tests.helpers import plate_job

SMALL = {
    "model": "llama3-8b",
    "cluster": {"gpus": 64},
    "training": {"global_batch": 256, "seq_len": 4096},
    "engine": "torchtitan",
}
LAYOUT = {"tp": 2, "pp": 2}


class CountingEngines(dict[str, Any]):
    """ENGINES, counting each engine looked up by name."""

    looked_up = 0

    def __getitem__(self, name: str) -> Any:
        self.looked_up += 1
        return super().__getitem__(name)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> CountingEngines:
    counting = CountingEngines(engines.ENGINES)
    monkeypatch.setattr(engines, "ENGINES", counting)
    return counting


def _study_row(compute: str, request: dict[str, Any]) -> dict[str, Any]:
    spec = StudySpec.model_validate({"compute": compute, "base": request})
    scenario = next(iter(expand(spec)))
    return run_scenario(scenario, run_settings(spec, scenario_request))


ROUTES: dict[str, Callable[[], Any]] = {
    "evaluate": lambda: routes.price(EvaluateRequest.model_validate(SMALL | {"layout": LAYOUT})),
    "optimize": lambda: routes.best_layout(SearchRequest.model_validate(SMALL), 20.0, StopSignal()),
    "pareto": lambda: routes.frontier(SearchRequest.model_validate(SMALL), 20.0, StopSignal()),
    "stages": lambda: routes.planned(
        StagesRequest.model_validate(SMALL | {"engine": "megatron"}), 20.0, StopSignal()
    ),
    "study evaluate": lambda: _study_row("evaluate", SMALL | {"layout": LAYOUT}),
    "study optimize": lambda: _study_row("optimize", SMALL),
}


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_resolves_the_engine_once(route: str, lookups: CountingEngines) -> None:
    answer = ROUTES[route]()
    assert answer is not None
    if isinstance(answer, dict):  # a study row: its failures are rows, not exceptions
        assert answer["error"] is None and answer["engine"] in ("torchtitan", "megatron")
    assert lookups.looked_up == 1


def test_a_request_moved_to_another_cluster_is_a_new_request_of_the_same_job() -> None:
    request = Request(plate_job(64, "llama3-8b"), space=SearchSpace(tp=2), engine=None)
    b200 = ClusterSpec(gpus=128, gpu=gpu_preset("b200"), gpus_per_node=8)
    moved = request.on(b200)
    assert moved.job.cluster == b200 and request.job.cluster.gpus == 64
    assert (moved.job.model, moved.job.training) == (request.job.model, request.job.training)
    assert (moved.space, moved.profile, moved.engine) == (request.space, "standard", None)


def test_the_defaults_are_every_routes_and_the_engine_prices_the_request() -> None:
    request = Request(plate_job(64, "llama3-8b"))
    assert (request.profile, request.engine_name) == ("standard", "megatron")
    # its assumptions as Megatron-LM runs them, and the engine-agnostic ones without an engine
    assert request.priced == engines.engine_assumptions(get_engine("megatron"), request.assumptions)
    assert Request(plate_job(64, "llama3-8b"), engine=None).priced == request.assumptions
