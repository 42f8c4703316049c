"""The reads behind the console, over HTTP: the agents a session may be
started with, each listed session's state and first prompt, and each
turn's and model step's tokens and time."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
from console_support import HeldModel, deploy_agent, failing_agent
from service_support import TOKEN_A, TOKEN_B, TOKENS, await_event
from starlette.testclient import TestClient

from turnlog import Agent, Runtime
from turnlog.service import create_app
from turnlog.service.overview import TURNS_MAX


def test_agents_are_named_with_the_default(serve) -> None:
    served = serve({"deployer": deploy_agent, "failing": failing_agent})
    with served.client() as client:
        assert client.get("/agents").json() == {
            "agents": ["deployer", "failing"],
            "default": None,
        }
    with served.client(token=None) as anonymous:
        assert anonymous.get("/agents").status_code == 401
    chosen = serve(
        {"deployer": deploy_agent, "failing": failing_agent}, default_agent="failing"
    )
    with chosen.client() as client:
        assert client.get("/agents").json()["default"] == "failing"


def test_sessions_are_listed_with_their_state_and_first_prompt(serve) -> None:
    release = threading.Event()
    served = serve(
        {
            "deployer": deploy_agent,
            "failing": failing_agent,
            "held": lambda: Agent("held", model=HeldModel(release)),
        }
    )
    try:
        with served.client() as client:

            def start(agent: str, prompt: str | None) -> str:
                created = client.post("/sessions", json={"agent": agent})
                session_id = str(created.json()["session_id"])
                if prompt is not None:
                    answer = client.post(
                        f"/sessions/{session_id}/prompts", json={"text": prompt}
                    )
                    assert answer.status_code in (200, 202), answer.text
                return session_id

            fresh = start("deployer", None)
            idle = start("deployer", "tell me\n  something")
            waiting = start("deployer", "deploy the site")
            failed = start("failing", "hello there")
            running = start("held", "take your time")
            aborted = start("held", "stop me")
            assert client.post(f"/sessions/{aborted}/interrupt", json={}).status_code
            expected = {
                fresh: ("idle", ""),
                idle: ("idle", "tell me something"),
                waiting: ("waiting_for_approval", "deploy the site"),
                failed: ("failed", "hello there"),
                running: ("running", "take your time"),
                aborted: ("aborted", "stop me"),
            }
            # The event each state is reached by; the listing reads the log
            # that far at least once the stream has sent it.
            for session_id, kind in [
                (idle, "turn_complete"),
                (waiting, "approval_request"),
                (failed, "turn_aborted"),
                (running, "model_step_started"),
                (aborted, "turn_aborted"),
            ]:
                await_event(client, session_id, kind)
            sessions = client.get("/sessions").json()["sessions"]
            found = {s["session_id"]: (s["state"], s["first_prompt"]) for s in sessions}
            assert found == expected
            entry = client.get("/sessions").json()["sessions"][1]
            assert entry["session_id"] == idle
            assert entry["turns"] == 1
            assert datetime.fromisoformat(entry["last_activity"]).tzinfo is not None
        with served.client(token=TOKEN_B) as other:
            assert other.get("/sessions").json() == {"sessions": []}
    finally:
        release.set()


def test_executions_give_tokens_and_time_per_turn_and_step(serve) -> None:
    served = serve({"deployer": deploy_agent})
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        base = f"/sessions/{session_id}"
        assert client.get(f"{base}/executions").json()["turns"] == []
        client.post(f"{base}/prompts", json={"text": "deploy it"})
        pending, asked = await_event(client, session_id, "approval_request")
        running = client.get(f"{base}/executions").json()["turns"]
        assert [t["outcome"] for t in running] == ["running"]
        assert running[0]["ended_at"] is None
        assert running[0]["seconds"] is None
        client.post(
            f"{base}/approvals/{pending['request_id']}", json={"decision": "allow"}
        )
        await_event(client, session_id, "turn_complete", after=asked)
        assert client.get(f"{base}/executions").json()["turns"][0]["outcome"] == (
            "completed"
        )
        answer = client.post(f"{base}/prompts?wait=true", json={"text": "and one more"})
        assert answer.status_code == 200

        report = client.get(f"{base}/executions").json()
        assert report["has_more"] is False
        first, second = report["turns"]
        assert [first["number"], second["number"]] == [1, 2]
        assert [len(first["steps"]), len(second["steps"])] == [2, 1]
        # The tokens each step reported (DeployModel: 50 + 10 per prompt
        # character in, 12 out), adding up to the turn's.
        assert [s["usage"]["total_tokens"] for s in first["steps"]] == [152, 152]
        assert second["steps"][0]["usage"]["total_tokens"] == 50 + 120 + 12
        assert first["usage"]["total_tokens"] == 304
        for turn in (first, second):
            assert turn["outcome"] == "completed"
            start = datetime.fromisoformat(turn["started_at"])
            end = datetime.fromisoformat(turn["ended_at"])
            assert turn["seconds"] == pytest.approx((end - start).total_seconds())
            for step in turn["steps"]:
                assert step["outcome"] == "completed"
                assert start <= datetime.fromisoformat(step["started_at"])
                assert datetime.fromisoformat(step["ended_at"]) <= end
                assert step["seconds"] >= 0.02  # the model took that long

        newest = client.get(f"{base}/executions?limit=1").json()
        assert [t["number"] for t in newest["turns"]] == [2]
        assert newest["has_more"] is True


@pytest.mark.parametrize("limit", ["0", "\u00b2", "-1", "1.5", str(TURNS_MAX + 1), ""])
def test_a_bad_limit_is_named(serve, limit: str) -> None:
    served = serve({"deployer": deploy_agent})
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        answer = client.get(
            f"/sessions/{session_id}/executions", params={"limit": limit}
        )
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["field"] == "limit"


def test_executions_of_another_tenant_are_not_found(serve) -> None:
    served = serve({"deployer": deploy_agent})
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
    with served.client(token=TOKEN_B) as other:
        answer = other.get(f"/sessions/{session_id}/executions")
        assert answer.status_code == 404
        missing = other.get("/sessions/session-0000000000000000/executions")
        assert missing.status_code == 404
        assert answer.json()["detail"].replace(session_id, "X") == missing.json()[
            "detail"
        ].replace("session-0000000000000000", "X")


def test_an_owner_row_without_a_session_is_not_listed(serve) -> None:
    # A crash between writing the owner row and the session's first event
    # leaves a row naming nothing: no client could open it.
    served = serve({"deployer": deploy_agent})
    owners = served.app.state.turnlog.owners
    owners.claim("session-0123456789abcdef", "tenant-a", "deployer")
    with served.client() as client:
        created = client.post("/sessions", json={}).json()["session_id"]
        listed = client.get("/sessions").json()["sessions"]
    assert [entry["session_id"] for entry in listed] == [created]


@pytest.mark.parametrize("session_id", ["a%00b", "x" * 201, "%07bell"])
def test_a_session_id_no_session_can_have_is_not_found(
    store_url: str, session_id: str
) -> None:
    # Refused before the owners table is asked: PostgreSQL refuses a NUL
    # in text outright, which would be a 500.
    runtime = Runtime.open(store_url)
    try:
        app = create_app(runtime, {"deployer": deploy_agent}, TOKENS)
        with TestClient(app, headers={"Authorization": f"Bearer {TOKEN_A}"}) as client:
            answer = client.get(f"/sessions/{session_id}/executions")
    finally:
        runtime.close()
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("application/problem+json")
