"""Retried requests (issue 23, item 1): an ``Idempotency-Key`` (and, over
AG-UI, the user message's id) makes a retry answer as the original did,
recording nothing; the same key for another body is a 409 problem. On both
stores, and across a server restart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pydantic
import pytest
from ag_ui.core import Event, EventType
from service_agents import approval_agent, chat_agent
from service_support import TOKENS, Served, ServerThread, SSEReader, await_event

from turnlog import Runtime
from turnlog.domain import protocol as p
from turnlog.service import create_app

AGENTS = {"publisher": approval_agent, "chat": chat_agent}
EVENTS = pydantic.TypeAdapter(Event)


class Servers:
    """Servers over runtimes on one store; ``stop`` ends one (a restart)."""

    def __init__(self, store_url: str) -> None:
        self.store_url = store_url
        self.running: list[tuple[Served, ServerThread]] = []

    def start(self) -> Served:
        runtime = Runtime.open(self.store_url)
        app = create_app(runtime, AGENTS, TOKENS)
        server = ServerThread(app).__enter__()
        served = Served(f"http://127.0.0.1:{server.port}", runtime, app)
        self.running.append((served, server))
        return served

    def stop(self, served: Served) -> None:
        for entry in list(self.running):
            if entry[0] is served:
                self.running.remove(entry)
                entry[1].__exit__()
                served.runtime.close()


@pytest.fixture
def servers(store_url: str) -> Iterator[Servers]:
    """Servers on the test's store (each backend in turn), stopped after."""
    started = Servers(store_url)
    yield started
    for served, _ in reversed(list(started.running)):
        started.stop(served)


def inputs(runtime: Runtime, session_id: str) -> list[str]:
    return [
        e.msg.text
        for e in runtime.replay_events(session_id)
        if isinstance(e.msg, p.InputAcceptedMsg)
    ]


def new_session(client: httpx.Client, agent: str) -> str:
    answer = client.post("/sessions", json={"agent": agent})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["session_id"])


def key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


def test_a_prompt_retried_with_its_key_answers_the_same_run(servers) -> None:
    served = servers.start()
    with served.client() as client:
        session_id = new_session(client, "chat")
        path = f"/sessions/{session_id}/prompts?wait=true"
        first = client.post(path, json={"text": "hello"}, headers=key("k-1"))
        assert first.status_code == 200, first.text
        again = client.post(path, json={"text": "hello"}, headers=key("k-1"))
        assert again.status_code == 200, again.text
        assert again.json() == first.json()
        conflict = client.post(path, json={"text": "other"}, headers=key("k-1"))
        assert conflict.status_code == 409
        assert conflict.headers["content-type"] == "application/problem+json"
        assert "'k-1'" in conflict.json()["detail"]
        assert inputs(served.runtime, session_id) == ["hello"]
        bad = client.post(path, json={"text": "hello"}, headers=key("x" * 201))
        assert bad.status_code == 422
        assert bad.json()["field"] == "Idempotency-Key"


def test_a_prompt_retried_while_its_run_waits_answers_its_submission(
    servers,
) -> None:
    served = servers.start()
    with served.client() as client:
        session_id = new_session(client, "publisher")
        path = f"/sessions/{session_id}/prompts"
        first = client.post(path, json={"text": "go"}, headers=key("k-1"))
        assert first.status_code == 202, first.text
        request, _ = await_event(client, session_id, "approval_request")
        again = client.post(path, json={"text": "go"}, headers=key("k-1"))
        assert again.status_code == 202, again.text
        assert again.json() == first.json()
        assert client.post(path, json={"text": "new"}).status_code == 409  # busy
        decide = f"/sessions/{session_id}/approvals/{request['request_id']}"
        for _ in range(2):  # the answer, then its retry
            answer = client.post(decide, json={"decision": "allow"}, headers=key("a"))
            assert answer.status_code == 200, answer.text
        await_event(client, session_id, "turn_complete")
        assert client.post(decide, json={"decision": "allow"}).status_code == 200
        refused = client.post(decide, json={"decision": "deny"})
        assert refused.status_code == 409
        assert "already decided 'allow'" in refused.json()["detail"]
        unknown = client.post(
            f"/sessions/{session_id}/approvals/nope", json={"decision": "allow"}
        )
        assert unknown.status_code == 404
        done = client.post(path, json={"text": "go"}, headers=key("k-1"))
        assert done.status_code == 200  # the run ended: its result
        assert done.json()["submission_id"] == first.json()["submission_id"]
        assert done.json()["status"] == "completed"
        decided = [
            e.msg
            for e in served.runtime.replay_events(session_id)
            if isinstance(e.msg, p.ApprovalDecidedMsg)
        ]
        assert [(d.decision, d.decided_by) for d in decided] == [("allow", "user")]
        assert inputs(served.runtime, session_id) == ["go"]


def test_follow_ups_and_steers_retried_are_queued_once(servers) -> None:
    served = servers.start()
    with served.client() as client:
        session_id = new_session(client, "chat")
        for resource in ("follow-ups", "steer"):
            path = f"/sessions/{session_id}/{resource}"
            first = client.post(path, json={"text": resource}, headers=key(resource))
            again = client.post(path, json={"text": resource}, headers=key(resource))
            assert first.status_code == again.status_code == 202
            assert again.json() == first.json()
            other = client.post(path, json={"text": "x"}, headers=key(resource))
            assert other.status_code == 409
        queued = served.runtime.store.get_session(session_id).queued
        assert [q["text"] for q in queued] == ["follow-ups", "steer"]


def test_a_retry_reaching_a_restarted_server_is_answered_from_the_log(
    servers,
) -> None:
    served = servers.start()
    with served.client() as client:
        session_id = new_session(client, "chat")
        path = f"/sessions/{session_id}/prompts?wait=true"
        first = client.post(path, json={"text": "hello"}, headers=key("k-1"))
        assert first.status_code == 200, first.text
    servers.stop(served)  # the response was lost; the server restarts
    again_served = servers.start()  # another server on the same log
    with again_served.client() as client:
        again = client.post(path, json={"text": "hello"}, headers=key("k-1"))
        assert again.status_code == 200, again.text
        assert again.json() == first.json()
        assert inputs(again_served.runtime, session_id) == ["hello"]


def agui_run(client: httpx.Client, body: dict[str, Any]) -> list[Any]:
    events = []
    with client.stream("POST", "/agui", json=body) as response:
        assert response.status_code == 200, response.read()
        reader = SSEReader(response)
        while True:
            try:
                events.append(EVENTS.validate_json(reader.next().data))
            except EOFError:
                return events


def test_an_agui_message_sent_again_streams_its_run_without_a_second(
    servers,
) -> None:
    served = servers.start()
    with served.client() as client:
        thread = new_session(client, "chat")
        message = {"id": "msg-1", "role": "user", "content": "hello"}
        body = {"threadId": thread, "runId": "run-1", "messages": [message]}
        first = agui_run(client, body)
        assert first[-1].type == EventType.RUN_FINISHED
        again = agui_run(client, {**body, "runId": "run-2"})
        assert again[-1].type == EventType.RUN_FINISHED
        assert again[-1].result == first[-1].result
        said = [e.delta for e in again if e.type == EventType.TEXT_MESSAGE_CONTENT]
        assert "".join(said) == first[-1].result
        changed = {**message, "content": "something else"}
        conflict = client.post("/agui", json={**body, "messages": [changed]})
        assert conflict.status_code == 409
        assert inputs(served.runtime, thread) == ["hello"]


def test_an_agui_message_sent_again_while_its_turn_waits_streams_the_wait(
    servers,
) -> None:
    served = servers.start()
    with served.client() as client:
        thread = new_session(client, "publisher")
        message = {"id": "msg-1", "role": "user", "content": "go"}
        body = {"threadId": thread, "runId": "run-1", "messages": [message]}
        first = agui_run(client, body)
        again = agui_run(client, {**body, "runId": "run-2"})
        for events in (first, again):
            assert events[-1].type == EventType.RUN_FINISHED
            assert events[-1].outcome.type == "interrupt"
        assert [i.id for i in again[-1].outcome.interrupts] == [
            i.id for i in first[-1].outcome.interrupts
        ]
        assert inputs(served.runtime, thread) == ["go"]
