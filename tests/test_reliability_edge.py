"""The HTTP edge under hostile clients, against a real `layoutopt serve` on loopback (conftest.py's
`make_server`): invented methods, request heads that never end, more connections than the
limit, ambiguous framing, slow bodies, huge bad names, security headers, and SIGTERM with a
request in flight. Each scenario is bounded in count and time."""

from __future__ import annotations

import asyncio
import json
import select
import signal
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from api.schemas import PLATE_EXAMPLE
from bench.server import stop_server
from tests.conftest import Server
from tests.test_reliability import LONG_PATH, _until_admitted, long_search


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server with the default settings for the scenarios that need no others: each
    leaves it as it found it (its sockets closed), and starting a server takes seconds."""
    started = Server({}, tmp_path_factory.mktemp("edge") / "server.log")
    try:
        yield started
    finally:
        stop_server(started.process)


def _connect(port: int, head: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head)
    return sock


def _closed_within(sock: socket.socket, timeout_s: float) -> bool:
    """True once the server has closed `sock` (EOF or reset) within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (left_s := deadline - time.monotonic()) > 0:
        if select.select([sock], [], [], left_s)[0]:
            try:
                if sock.recv(65536) == b"":
                    return True
            except ConnectionResetError:
                return True
    return False


def _read_to_eof(sock: socket.socket, timeout_s: float = 10.0) -> bytes:
    sock.settimeout(timeout_s)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def test_invented_methods_do_not_grow_the_metrics(server: Server) -> None:
    # each invented method used to be a label value of its own (3,000 grew /metrics 160-fold)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        client.request("FOO0", "/healthz")
        before = len(client.get("/metrics").content)
        statuses = {client.request(f"FOO{i}", "/healthz").status_code for i in range(1, 300)}
        metrics = client.get("/metrics").text
    assert statuses == {405}
    assert len(metrics) - before < 2_000
    assert 'method="other"' in metrics and "FOO" not in metrics


def test_request_heads_that_never_end_are_closed_and_probes_answer(make_server: Any) -> None:
    server = make_server(HEADER_TIMEOUT_S="1")
    slow = [_connect(server.port, PARTIAL_HEAD) for _ in range(300)]

    # a probe opens a connection for each call, as a scheduler's does: a kept-alive one would
    # idle past the 1 s timeout while the sockets below are watched and be closed the same way
    def probe(path: str) -> httpx.Response:
        return httpx.get(f"{server.url}{path}", headers={"Connection": "close"}, timeout=5)

    try:
        assert probe("/healthz").status_code == 200
        assert not _closed_within(slow[-1], 0.3)  # not before the timeout
        closed = [_closed_within(sock, 10.0) for sock in slow]
        assert probe("/healthz").status_code == 200
        metrics = probe("/metrics").text
    finally:
        for sock in slow:
            sock.close()
    assert all(closed)
    prefix = 'layoutopt_http_connections_closed_total{reason="header_timeout"} '
    (line,) = [line for line in metrics.splitlines() if line.startswith(prefix)]
    assert float(line.removeprefix(prefix)) == 300


def test_connections_past_the_limit_close_idle_ones_and_probes_answer(make_server: Any) -> None:
    # the limit reached by heads that never end: each new connection closes the oldest idle
    # one at once, so a probe still gets in (no header timeout to help within the test)
    server = make_server(MAX_CONNECTIONS="20", HEADER_TIMEOUT_S="60")
    first = [_connect(server.port, PARTIAL_HEAD) for _ in range(20)]
    later = [_connect(server.port, PARTIAL_HEAD) for _ in range(10)]
    try:
        closed_first = sum(_closed_within(sock, 2.0) for sock in first[:10])
        start = time.perf_counter()
        probe = httpx.get(f"{server.url}/healthz", timeout=5)
        probe_s = time.perf_counter() - start
        still_open = sum(not _closed_within(sock, 0.1) for sock in later)
    finally:
        for sock in first + later:
            sock.close()
    assert closed_first == 10
    assert probe.status_code == 200 and probe_s < 2.0
    assert still_open == 10


def test_a_connection_past_the_limit_with_every_one_busy_is_closed_at_once(
    make_server: Any,
) -> None:
    server = make_server(MAX_CONNECTIONS="10", BODY_TIMEOUT_S="30")
    head = (
        "POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    busy = [_connect(server.port, head.encode()) for _ in range(10)]
    try:
        time.sleep(0.3)  # their heads parsed: requests in progress, none idle
        start = time.perf_counter()
        extra = _connect(server.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _closed_within(extra, 2.0)
        closed_s = time.perf_counter() - start
        assert not any(_closed_within(sock, 0.05) for sock in busy)
    finally:
        for sock in busy:
            sock.close()
    assert closed_s < 2.0


def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed(
    server: Server,
) -> None:
    # RFC 9112 section 6.1: the body's end is ambiguous, so the request that seems to follow
    # it (a smuggled one) must not be served
    sock = _connect(
        server.port,
        b"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )
    try:
        answer = _read_to_eof(sock)  # ends: the server closed the connection
    finally:
        sock.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert answer.count(b"HTTP/1.1 ") == 1
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"connection: close" in head.lower()
    assert json.loads(body)["error"]["code"] == "ambiguous_framing"


def _slow_body(port: int, body_bytes: int, sent: bytes = b"{") -> socket.socket:
    head = (
        "POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {body_bytes}\r\n\r\n"
    )
    return _connect(port, head.encode() + sent)


def test_many_slow_bodies_lock_no_post_out(server: Server) -> None:
    # more trickling bodies than the 512 readers that used to be allowed: each holds a byte
    slow = [_slow_body(server.port, 1000) for _ in range(600)]
    try:
        time.sleep(0.5)
        with httpx.Client(base_url=server.url, timeout=30) as client:
            answer = client.post("/v1/evaluate", json=PLATE_EXAMPLE)
    finally:
        for sock in slow:
            sock.close()
    assert answer.status_code == 200


def test_bodies_in_progress_are_bounded_in_bytes(make_server: Any) -> None:
    # one body holding nearly the whole budget: the next body's bytes would pass it (503,
    # connection closed), and once it is gone a POST is served again
    server = make_server(
        MAX_BODY_BYTES="100000", MAX_BODY_BUFFER_BYTES="100000", BODY_TIMEOUT_S="30"
    )
    hog = _slow_body(server.port, 100_000, b"[" + b"0," * 49_000)
    body = {**PLATE_EXAMPLE, "padding": "x" * 3000}
    try:
        time.sleep(0.5)
        with httpx.Client(base_url=server.url, timeout=30) as client:
            refused = client.post("/v1/evaluate", json=body)
            hog.close()
            time.sleep(0.3)
            served = client.post("/v1/evaluate", json=PLATE_EXAMPLE)
    finally:
        hog.close()
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "saturated"
    assert int(refused.headers["Retry-After"]) >= 1
    assert refused.headers["Connection"] == "close"
    assert served.status_code == 200


def test_a_huge_bad_name_is_not_echoed_whole(server: Server) -> None:
    name = "x" * 900_000
    with httpx.Client(base_url=server.url, timeout=30) as client:
        preset = client.post("/v1/evaluate", json={**PLATE_EXAMPLE, "model": name})
        key = client.post("/v1/evaluate", json={**PLATE_EXAMPLE, name: 1})
    for answer in (preset, key):
        assert answer.status_code == 422
        assert len(answer.content) < 2_000
        error = answer.json()["error"]
        assert "characters]…" in error["message"]
        assert len(error["field"] or "") <= 600
    # the message keeps what was expected, after the name
    assert "known: " in preset.json()["error"]["message"]


def test_security_headers_on_the_page_the_docs_and_the_api(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        answers = {path: client.get(path) for path in ("/", "/docs", "/redoc", "/healthz")}
    for path, answer in answers.items():
        assert answer.status_code == 200, path
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["X-Frame-Options"] == "DENY"
        assert answer.headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
        assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]
    # the workshop page runs only the server's own scripts (modules from /static)
    for path in ("/", "/redoc", "/healthz"):
        assert "script-src 'self';" in answers[path].headers["Content-Security-Policy"]
    assert '<script type="module" src="/static/' in answers["/"].text
    # Swagger UI starts from an inline script: allowed on /docs only
    assert "<script>" in answers["/docs"].text
    assert (
        "'unsafe-inline'"
        in answers["/docs"].headers["Content-Security-Policy"].split("script-src")[1].split(";")[0]
    )


def test_sigterm_past_the_grace_period_answers_json_503(make_server: Any) -> None:
    # no drain and a 1 s grace period: uvicorn cancels the search still running, which used
    # to answer its plain-text 500 (logged as 499)
    server = make_server(WORKERS="1", SOLVER_TIME_LIMIT_S="6", SHUTDOWN_GRACE_S="1")

    async def scenario() -> httpx.Response:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            running = asyncio.create_task(client.post(LONG_PATH, json=long_search(5)))
            await _until_admitted(client, 1, "running")
            server.process.send_signal(signal.SIGTERM)
            return await running

    answer = asyncio.run(scenario())
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "draining"
    assert int(answer.headers["Retry-After"]) >= 1
    server.process.wait(timeout=30)
    assert server.requests_logged(LONG_PATH) == [503]
