"""Shared fixtures. Each owner adds theirs; none removes another's."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.http.settings import Settings
from api.schemas import PLATE_EXAMPLE


@pytest.fixture
def plate_body() -> dict[str, Any]:
    """The plate's evaluate request (Llama 3 405B, 16,384 H100s), free to mutate."""
    return copy.deepcopy(PLATE_EXAMPLE)


@pytest.fixture
def make_api() -> Iterator[Callable[..., TestClient]]:
    """`make_api(workers=1, ...)`: a TestClient on a fresh app (own pool, cache, metrics)."""
    clients: list[TestClient] = []

    def make(**settings: Any) -> TestClient:
        client = TestClient(create_app(Settings(**settings)), raise_server_exceptions=False)
        clients.append(client.__enter__())
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def api(make_api: Callable[..., TestClient]) -> TestClient:
    return make_api()
