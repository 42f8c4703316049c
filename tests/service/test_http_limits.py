"""``turnlog serve``'s connection limits, against a real server process
and raw sockets: a connection that never finishes its headers is closed
in the configured time (slow-loris), oversized or unreadable requests get
a problem+json refusal from the connection itself, and nothing cuts a
stream or a kept-alive connection short of its own limits."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_serve_process import TOKEN, TURNLOG, client, start_server, stop

from turnlog.service.problems import PROBLEM_JSON

pytestmark = pytest.mark.subprocess

HEADER_TIMEOUT = 1.0
"""The server's --header-timeout: short, so that the tests are."""

SLACK = 4.0
"""Seconds a close may come late on a loaded machine (two cores, shared)."""

LIMITS = (
    "--header-timeout",
    str(HEADER_TIMEOUT),
    "--keep-alive-timeout",
    "1",
    "--max-header-bytes",
    "4096",
    "--max-headers",
    "20",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """One ``turnlog serve --demo`` with short limits; (url, port)."""
    logs = tmp_path_factory.mktemp("limits")
    proc, url = start_server(f"sqlite:///{logs}/log.sqlite3", logs, "--demo", *LIMITS)
    try:
        yield url, int(urlsplit(url).port or 0)
    finally:
        stop(proc)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(HEADER_TIMEOUT + SLACK + 10)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a timeout fails the test)."""
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        except TimeoutError:
            pytest.fail(f"the server kept the connection open; got {received!r}")
        if not chunk:
            return received
        received += chunk


def parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def refusal(raw: bytes, status: int) -> dict[str, object]:
    found, headers, body = parse_response(raw)
    assert found == status, raw[:300]
    assert headers["content-type"] == PROBLEM_JSON
    assert headers["connection"] == "close"
    problem = json.loads(body)
    assert problem["status"] == status
    return problem


@pytest.mark.parametrize(
    "sent",
    [b"GET /healthz HT", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "],
    ids=["half a request line", "half a header"],
)
def test_a_request_whose_headers_never_finish_is_closed_in_time(
    server, sent: bytes
) -> None:
    _, port = server
    with connect(port) as sock:
        started = time.monotonic()
        sock.sendall(sent)
        raw = read_until_closed(sock)
        elapsed = time.monotonic() - started
    assert HEADER_TIMEOUT * 0.9 <= elapsed < HEADER_TIMEOUT + SLACK
    problem = refusal(raw, 408)
    assert "did not arrive within 1 s" in str(problem["detail"])


def test_a_connection_that_sends_nothing_is_closed_in_time(server) -> None:
    _, port = server
    with connect(port) as sock:
        started = time.monotonic()
        assert read_until_closed(sock) == b""
        elapsed = time.monotonic() - started
    assert HEADER_TIMEOUT * 0.9 <= elapsed < HEADER_TIMEOUT + SLACK


def test_a_trickled_request_gets_no_more_time_than_a_stalled_one(server) -> None:
    """The deadline counts from the first byte, not from the last one."""
    _, port = server
    pace = HEADER_TIMEOUT / 5
    payload = b"GET /healthz HTTP/1.1\r\nX-Trickle: " + b"y" * 1000
    raw = b""
    with connect(port) as sock:
        sock.settimeout(pace)  # one byte per pace while the server listens
        started = time.monotonic()
        for byte in payload:
            if time.monotonic() - started > HEADER_TIMEOUT + SLACK:
                pytest.fail("a trickling client kept the connection open")
            try:
                sock.send(bytes([byte]))
                raw = sock.recv(65536)
            except TimeoutError:
                continue  # still open: the next byte
            except OSError:
                break  # closed
            sock.settimeout(SLACK)
            raw += read_until_closed(sock)
            break
        elapsed = time.monotonic() - started
    assert elapsed < HEADER_TIMEOUT + SLACK
    refusal(raw, 408)


def test_a_kept_alive_connection_is_closed_after_its_idle_time(server) -> None:
    _, port = server
    with connect(port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        raw = read_until_closed(sock)
        elapsed = time.monotonic() - started
    status, _, body = parse_response(raw)
    assert (status, json.loads(body)) == (200, {"ok": True})
    assert elapsed < 1 + SLACK  # --keep-alive-timeout 1


@pytest.mark.parametrize(
    ("request_bytes", "status", "detail"),
    [
        (
            b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            414,
            "at most 4096 bytes",
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "
            + b"y" * 100_000
            + b"\r\n\r\n",
            431,
            "at most 4096 bytes",
        ),
        (
            b"GET /healthz HTTP/1.1\r\n"
            + b"".join(b"X-%d: y\r\n" % n for n in range(21))
            + b"\r\n",
            431,
            "at most 20 headers",
        ),
        (b"BREW /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "not valid HTTP/1.1"),
        (b"GET /healthz HTTP/1.1\r\nX-Nul: a\x00b\r\n\r\n", 400, "not valid HTTP/1.1"),
        (b"GET /a b c HTTP/1.1\r\n\r\n", 400, "not valid HTTP/1.1"),
    ],
    ids=[
        "long URL",
        "long header",
        "too many headers",
        "unknown method",
        "NUL in a header",
        "spaces in the path",
    ],
)
def test_a_request_the_connection_refuses_gets_a_problem(
    server, request_bytes: bytes, status: int, detail: str
) -> None:
    _, port = server
    with connect(port) as sock:
        sock.sendall(request_bytes)
        raw = read_until_closed(sock)
    assert detail in str(refusal(raw, status)["detail"])


def test_headers_within_the_limits_reach_the_app(server) -> None:
    url, _ = server
    headers = {f"X-{n}": "y" * 100 for n in range(10)}  # with httpx own: 16
    with client(url) as http:
        response = http.get("/sessions", headers=headers)
    assert response.status_code == 200, response.text


def test_a_stream_outlives_the_header_timeout(server) -> None:
    """The deadline ends with the headers: a stream open for several times
    as long keeps getting its heartbeats (every 0.5 s)."""
    url, _ = server
    with client(url) as http:
        session_id = http.post("/sessions", json={}).json()["session_id"]
        with http.stream("GET", f"/sessions/{session_id}/events") as response:
            assert response.status_code == 200
            started = time.monotonic()
            comments = 0
            for line in response.iter_lines():
                comments += line.startswith(":")
                if time.monotonic() - started > 3 * HEADER_TIMEOUT:
                    break
    assert comments >= 3


def test_past_max_connections_a_request_gets_a_503(tmp_path: Path) -> None:
    proc, url = start_server(
        f"sqlite:///{tmp_path}/log.sqlite3",
        tmp_path,
        "--demo",
        "--max-connections",
        "3",
    )
    port = int(urlsplit(url).port or 0)
    idle = [connect(port) for _ in range(3)]
    try:
        with connect(port) as sock:
            sock.sendall(
                b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
            )
            problem = refusal(read_until_closed(sock), 503)
        assert "at most 3 connections" in str(problem["detail"])
    finally:
        for sock in idle:
            sock.close()
        stop(proc)


def test_a_limit_that_is_not_above_0_is_refused_before_serving(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            TURNLOG,
            "--store",
            f"sqlite:///{tmp_path}/log.sqlite3",
            "serve",
            "--demo",
            "--header-timeout",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "header_timeout must be above 0" in done.stderr
    assert "Traceback" not in done.stderr
