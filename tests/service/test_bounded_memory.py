"""A service that runs for weeks holds memory for its live work only.

Sessions created and finished through the service, that no request holds
any longer, are let go: the service's per-session maps are empty, no
session actor (nor its thread) runs, and no activation is left in memory,
whatever the number of sessions served. Counted, not timed.
"""

from __future__ import annotations

import threading

import httpx
from kept_sessions import activations, eventually
from service_support import TOKEN_A, TOKENS, ServerThread

from turnlog import Runtime
from turnlog.service import create_app
from turnlog.service.demo import DEMO_AGENT, demo_agent

SESSIONS = 24
"""Sessions served: far above the bound asserted (a small constant)."""

BOUND = 2


def one_session(client: httpx.Client, background: bool) -> str:
    created = client.post("/sessions", json={"agent": DEMO_AGENT})
    assert created.status_code == 201, created.text
    session_id: str = created.json()["session_id"]
    for text in ("one two", "three four five"):
        answer = client.post(
            f"/sessions/{session_id}/prompts",
            params={"wait": "true"},
            json={"text": text},
        )
        assert answer.status_code == 200, answer.text
    if background:  # a run nobody waits on: the service holds it while it runs
        started = client.post(
            f"/sessions/{session_id}/prompts", json={"text": "six seven"}
        )
        assert started.status_code in (200, 202), started.text
    assert client.get(f"/sessions/{session_id}/audit").status_code == 200
    with client.stream("GET", f"/sessions/{session_id}/events") as stream:
        assert stream.status_code == 200
        for _ in stream.iter_lines():
            break  # opened, then dropped
    return session_id


def test_sessions_nobody_holds_are_let_go(store_url: str) -> None:
    runtime = Runtime.open(store_url)
    app = create_app(runtime, {DEMO_AGENT: demo_agent}, TOKENS)
    context = app.state.turnlog
    threads_before = threading.active_count()
    try:
        with (
            ServerThread(app) as server,
            httpx.Client(
                base_url=f"http://127.0.0.1:{server.port}",
                headers={"Authorization": f"Bearer {TOKEN_A}"},
                timeout=30,
            ) as client,
        ):
            ids = [one_session(client, background=i % 4 == 0) for i in range(SESSIONS)]
            # Every run is over (the background ones too) and nobody holds a
            # session: the actors passivate, their threads end.
            assert runtime.wait_live_sessions(0, timeout=20)
            # The server lets go of a dropped stream when it notices the
            # connection closed: no event a client could wait on.
            assert eventually(lambda: context.held_sessions() == 0)
            assert activations() <= BOUND
            assert eventually(lambda: threading.active_count() <= threads_before + 8), (
                threading.enumerate()
            )
            # Let go, not lost: each session opens again from the log.
            again = client.get(f"/sessions/{ids[0]}")
            assert again.status_code == 200
            answer = client.post(
                f"/sessions/{ids[1]}/prompts",
                params={"wait": "true"},
                json={"text": "eight"},
            )
            assert answer.status_code == 200, answer.text
            audit = client.get(f"/sessions/{ids[1]}/audit")
            assert audit.status_code == 200, audit.text
            assert audit.json()["verification"]["ok"], audit.text
    finally:
        runtime.close()
