"""The service's plumbing on its own: settings from the environment, the Prometheus text
format, JSON log lines, and the answer cache's eviction order."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from api.http.logs import JsonFormatter, new_request_id, request_id
from api.http.metrics import Metrics
from api.http.settings import Settings
from api.http.workers import AnswerCache


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "WORKERS": "3",
        "QUEUE_DEPTH": "0",
        "SOLVER_TIME_LIMIT_S": "2.5",
        "CACHE_SIZE": "7",
        "MAX_BODY_BYTES": "4096",
        "LOG_LEVEL": "DEBUG",
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert (settings.workers, settings.queue_depth, settings.cache_size) == (3, 0, 7)
    assert (settings.solver_time_limit_s, settings.max_body_bytes) == (2.5, 4096)
    assert settings.log_level == "debug"


def test_bad_setting_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKERS", "0")
    with pytest.raises(ValueError, match="workers"):
        Settings()


def test_metrics_render_prometheus_text_from_one_registry_per_app() -> None:
    # two apps' metrics never mix, and a histogram's buckets are cumulative and inclusive
    first, second = Metrics(), Metrics()
    for value in (0.05, 0.1, 0.5, 2.0):  # 0.1 counts in le="0.1": buckets are <=
        first.request_seconds.labels("POST", "/x").observe(value)
    first.rejections.labels('a"b').inc()
    text = first.render().decode()
    assert (
        'layoutopt_http_request_duration_seconds_bucket{le="0.1",method="POST",route="/x"} 2.0'
        in text
    )
    assert (
        'layoutopt_http_request_duration_seconds_bucket{le="1.0",method="POST",route="/x"} 3.0'
        in text
    )
    assert 'layoutopt_http_request_duration_seconds_count{method="POST",route="/x"} 4.0' in text
    assert 'layoutopt_http_request_duration_seconds_sum{method="POST",route="/x"} 2.65' in text
    assert 'layoutopt_rejections_total{reason="a\\"b"} 1.0' in text  # label values escaped
    assert "layoutopt_rejections_total{" not in second.render().decode()


def test_log_line_is_one_json_object_with_the_request_id() -> None:
    token = request_id.set("req-1")
    try:
        raise RuntimeError("went wrong")
    except RuntimeError:
        record = logging.LogRecord(
            "layoutopt.http", logging.ERROR, __file__, 1, "unhandled error", (), sys.exc_info()
        )
        record.status = 500
        line = JsonFormatter().format(record)
    finally:
        request_id.reset(token)
    assert "\n" not in line
    entry = json.loads(line)
    assert (entry["request_id"], entry["level"], entry["status"]) == ("req-1", "error", 500)
    assert "RuntimeError: went wrong" in entry["exception"]


@pytest.mark.parametrize("sent", [None, "", "x" * 129, "two words", "new\nline"])
def test_unusable_request_ids_are_replaced(sent: str | None) -> None:
    made = new_request_id(sent)
    assert made != sent and len(made) == 32


def test_cache_evicts_the_least_recently_used() -> None:
    cache = AnswerCache(max_entries=2, max_bytes=10**6)
    cache.put("a", 1, 100)
    cache.put("b", 2, 100)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3, 100)  # evicts "b"
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
