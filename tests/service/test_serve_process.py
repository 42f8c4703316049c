"""``turnlog serve`` as a real process: the demo answers; and a server
SIGKILLed mid-stream is replaced by another on the same PostgreSQL, where
the client resumes with Last-Event-ID and gets the rest, nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from service_support import HERE, SSEReader, await_event, free_socket

from turnlog import Runtime
from turnlog.domain.translation import EventTranslator
from turnlog.service.feed import read_entries

pytestmark = pytest.mark.subprocess
TOKEN = "process-test-token-0123456789abcdef"


TURNLOG = str(Path(sys.executable).with_name("turnlog"))


def start_server(
    store: str, logs: Path, *args: str
) -> tuple[subprocess.Popen[bytes], str]:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # the server binds it again (SO_REUSEADDR)
    env = {
        **os.environ,
        "TURNLOG_SERVICE_TOKENS": f"tenant-a={TOKEN}",
        "PYTHONPATH": str(HERE),
    }
    errors = logs / f"server-{port}.err"
    with errors.open("wb") as stderr:
        proc = subprocess.Popen(
            [
                TURNLOG,
                "--store",
                store,
                "serve",
                "--port",
                str(port),
                "--heartbeat",
                "0.5",
                *args,
            ],
            env=env,
            cwd=logs,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    url = f"http://127.0.0.1:{port}"

    # The one poll left in these tests, on purpose: the server is another
    # process, and whether it listens yet can only be learnt by asking it,
    # as a readiness probe does (``turnlog serve`` prints its line before
    # uvicorn binds the port, so that line says nothing of readiness).
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            pytest.fail(f"server exited: {errors.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"server did not answer within 30 s: {errors.read_text()}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _read_to_the_end(reader: SSEReader) -> None:
    while True:
        reader.next()


def client(url: str) -> httpx.Client:
    return httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
    )


def test_serve_demo_starts_and_answers(tmp_path: Path) -> None:
    proc, url = start_server(f"sqlite:///{tmp_path}/log.sqlite3", tmp_path, "--demo")
    try:
        with client(url) as http:
            assert httpx.get(f"{url}/sessions").status_code == 401
            session_id = http.post("/sessions", json={}).json()["session_id"]
            run = http.post(
                f"/sessions/{session_id}/prompts",
                params={"wait": "true"},
                json={"text": "three little words"},
            ).json()
            assert run["status"] == "completed"
            assert run["final_output"] == "Your message has 3 words."
            assert http.get("/openapi.json").json()["openapi"].startswith("3.")
    finally:
        stop(proc)


def test_a_killed_server_is_resumed_from_another_with_nothing_lost_or_repeated(
    postgres_schema_url: str, tmp_path: Path
) -> None:
    agent = ["--agent", "service_agents:approval_agent"]
    first, url = start_server(postgres_schema_url, tmp_path, *agent)
    received = []
    try:
        with client(url) as http:
            session_id = http.post("/sessions", json={}).json()["session_id"]
            http.post(f"/sessions/{session_id}/prompts", json={"text": "go"})
            with http.stream("GET", f"/sessions/{session_id}/events") as response:
                reader = SSEReader(response)
                while True:
                    event = reader.next()
                    received.append(event)
                    if json.loads(event.data)["msg"]["type"] == "tool_call_end":
                        break
                # The run goes on to its approval while this client is away.
                await_event(http, session_id, "approval_request")
                os.kill(first.pid, signal.SIGKILL)  # mid-stream
                with pytest.raises(httpx.HTTPError):
                    _read_to_the_end(reader)
    finally:
        first.kill()
        first.wait()
    second, url = start_server(postgres_schema_url, tmp_path, *agent)
    try:
        with client(url) as http:
            last_id = [e.id for e in received if e.id][-1]
            with http.stream(
                "GET",
                f"/sessions/{session_id}/events",
                headers={"Last-Event-ID": last_id},
            ) as response:
                reader = SSEReader(response)
                (pending,) = http.get(f"/sessions/{session_id}/approvals").json()[
                    "approvals"
                ]
                decided = http.post(
                    f"/sessions/{session_id}/approvals/{pending['request_id']}",
                    json={"decision": "allow"},
                )
                assert decided.status_code == 200, decided.text
                while True:
                    event = reader.next()
                    received.append(event)
                    if json.loads(event.data)["msg"]["type"] == "turn_complete":
                        break
    finally:
        stop(second)
    ids = [e.id for e in received if e.id]
    assert len(ids) == len(set(ids))
    with Runtime.open(postgres_schema_url) as runtime:
        entries = read_entries(
            runtime.transcript, session_id, EventTranslator(session_id)
        )
    assert ids == [entry.event_id for entry in entries]
    assert json.loads(received[-1].data)["msg"]["last_agent_message"] == (
        "All done: counted and published."
    )
