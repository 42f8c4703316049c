"""``POST /agui``: AG-UI runs over a session, checked against the AG-UI
SDK's own event models, on a real server."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pydantic
from ag_ui.core import Event, EventType
from service_agents import approval_agent, chat_agent
from service_support import TOKEN_B, SSEReader

from turnlog.service import demo_agent

EVENTS = pydantic.TypeAdapter(Event)
AGENTS = {"publisher": approval_agent, "chat": chat_agent, "demo": demo_agent}


def run(
    client: httpx.Client,
    thread_id: str,
    *,
    prompt: str | None = "hello",
    resume: list[dict[str, Any]] | None = None,
    state: dict[str, Any] | None = None,
    run_id: str = "run-1",
) -> list[Any]:
    """One AG-UI run: its events, each validated by the SDK's models."""
    body: dict[str, Any] = {"threadId": thread_id, "runId": run_id, "messages": []}
    if prompt is not None:
        body["messages"] = [{"id": f"m-{run_id}", "role": "user", "content": prompt}]
    if resume is not None:
        body["resume"] = resume
    if state is not None:
        body["state"] = state
    events = []
    with client.stream("POST", "/agui", json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        reader = SSEReader(response)
        while True:
            try:
                sse = reader.next()
            except EOFError:
                break
            events.append(EVENTS.validate_json(sse.data))
    return events


def types(events: list[Any]) -> list[str]:
    return [event.type.value for event in events]


def new_session(client: httpx.Client, agent: str, **state: Any) -> str:
    body: dict[str, Any] = {"agent": agent}
    if state:
        body["shared_state"] = state
    answer = client.post("/sessions", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["session_id"])


def test_a_text_run_streams_a_text_message_between_run_start_and_finish(
    serve,
) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "chat")
        events = run(client, thread, run_id="run-text")
    assert types(events) == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START",
        *["TEXT_MESSAGE_CONTENT"] * 7,
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    started, finished = events[0], events[-1]
    assert (started.thread_id, started.run_id) == (thread, "run-text")
    assert (finished.thread_id, finished.run_id) == (thread, "run-text")
    assert finished.outcome is None
    message_ids = {e.message_id for e in events[2:-1]}
    assert len(message_ids) == 1
    assert events[2].role == "assistant"
    text = "".join(e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT)
    assert text == "Hello there, this is a streamed answer."
    assert finished.result == text


def test_a_tool_call_is_start_args_end_then_its_result(serve) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "demo")
        events = run(client, thread, prompt="three little words")
    tool = [e for e in events if e.type.value.startswith("TOOL_CALL")]
    assert types(tool) == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    start, args, end, result = tool
    assert start.tool_call_name == "count_words"
    assert json.loads(args.delta) == {"text": "three little words"}
    assert start.tool_call_id == args.tool_call_id == end.tool_call_id
    assert result.tool_call_id == start.tool_call_id
    assert result.content == "3"
    # The answer comes after the tool's result, in one text message.
    assert types(events).index("TOOL_CALL_RESULT") < types(events).index(
        "TEXT_MESSAGE_START"
    )
    assert types(events)[-1] == "RUN_FINISHED"


def test_state_snapshots_carry_the_shared_state_and_the_inputs_state(
    serve,
) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "publisher", plan="draft")
        first = run(client, thread, state={"theme": "dark"})
        snapshot = first[1]
        assert snapshot.type == EventType.STATE_SNAPSHOT
        assert snapshot.snapshot["plan"] == "draft"
        assert snapshot.snapshot["theme"] == "dark"
        interrupt = first[-1].outcome.interrupts[0]
        # A state change while the turn goes on is a new snapshot.
        rest = run(
            client,
            thread,
            prompt=None,
            state={"theme": "light"},
            resume=[
                {
                    "interruptId": interrupt.id,
                    "status": "resolved",
                    "payload": {"decision": "allow"},
                }
            ],
        )
        snapshots = [e for e in rest if e.type == EventType.STATE_SNAPSHOT]
        assert snapshots[0].snapshot["theme"] == "light"
        assert client.get(f"/sessions/{thread}").json()["shared_state"]["theme"] == (
            "light"
        )


def interrupted(client: httpx.Client, thread: str) -> tuple[list[Any], Any]:
    events = run(client, thread, prompt="go", run_id="run-a")
    finished = events[-1]
    assert finished.type == EventType.RUN_FINISHED
    assert finished.outcome.type == "interrupt"
    (interrupt,) = finished.outcome.interrupts
    return events, interrupt


def resume(client: httpx.Client, thread: str, entry: dict[str, Any]) -> list[Any]:
    return run(client, thread, prompt=None, resume=[entry], run_id="run-b")


def test_an_approval_ends_the_run_with_an_interrupt_and_allow_resumes_it(
    serve,
) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "publisher")
        events, interrupt = interrupted(client, thread)
        # count_words ran; publish waits: no TOOL_CALL_START for it yet.
        starts = [e for e in events if e.type == EventType.TOOL_CALL_START]
        assert [e.tool_call_name for e in starts] == ["count_words"]
        assert interrupt.reason == "tool_approval"
        assert interrupt.metadata == {
            "toolName": "publish",
            "arguments": {"text": "hello"},
        }
        pending = client.get(f"/sessions/{thread}/approvals").json()["approvals"]
        assert interrupt.id == pending[0]["request_id"]
        assert interrupt.tool_call_id == pending[0]["call_id"]

        rest = resume(
            client,
            thread,
            {
                "interruptId": interrupt.id,
                "status": "resolved",
                "payload": {"decision": "allow"},
            },
        )
    assert rest[0].run_id == "run-b"
    names = [e.tool_call_name for e in rest if e.type == EventType.TOOL_CALL_START]
    assert names == ["publish"]
    result = next(e for e in rest if e.type == EventType.TOOL_CALL_RESULT)
    assert result.content == "published 'hello'"
    assert rest[-1].type == EventType.RUN_FINISHED
    assert rest[-1].outcome is None
    assert rest[-1].result == "All done: counted and published."


def test_deny_answers_the_model_and_the_turn_goes_on(serve) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "publisher")
        _, interrupt = interrupted(client, thread)
        rest = resume(
            client,
            thread,
            {"interruptId": interrupt.id, "status": "resolved", "payload": "deny"},
        )
    result = next(e for e in rest if e.type == EventType.TOOL_CALL_RESULT)
    assert result.tool_call_id == interrupt.tool_call_id
    assert "denied" in str(result.content).lower()
    assert rest[-1].type == EventType.RUN_FINISHED
    assert rest[-1].outcome is None


def test_abort_and_a_cancelled_entry_end_the_turn_as_cancelled(serve) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        for entry in (
            {"status": "resolved", "payload": {"decision": "abort"}},
            {"status": "cancelled"},
        ):
            thread = new_session(client, "publisher")
            _, interrupt = interrupted(client, thread)
            rest = resume(client, thread, {"interruptId": interrupt.id, **entry})
            assert types(rest)[-1] == "RUN_FINISHED"
            assert rest[-1].outcome.type == "cancelled"
            assert "TOOL_CALL_START" not in types(rest)
            approvals = client.get(f"/sessions/{thread}/approvals").json()
            assert approvals["approvals"] == []


def test_allow_for_the_session_lets_the_next_call_run_unasked(serve) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "publisher")
        _, interrupt = interrupted(client, thread)
        decision = {"decision": "allow_session"}
        entry = {"interruptId": interrupt.id, "status": "resolved", "payload": decision}
        assert resume(client, thread, entry)[-1].outcome is None
        again = run(client, thread, prompt="again", run_id="run-c")
    assert again[-1].type == EventType.RUN_FINISHED
    assert again[-1].outcome is None
    names = [e.tool_call_name for e in again if e.type == EventType.TOOL_CALL_START]
    assert names == ["count_words", "publish"]


def test_bad_resume_entries_are_refused_and_decide_nothing(serve) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "publisher")
        _, interrupt = interrupted(client, thread)
        body = {"threadId": thread, "runId": "r", "messages": []}
        bad = [
            (
                {"interruptId": interrupt.id, "status": "resolved", "payload": "yes"},
                422,
            ),
            ({"interruptId": "nope", "status": "resolved", "payload": "allow"}, 409),
        ]
        for entry, status in bad:
            answer = client.post("/agui", json={**body, "resume": [entry]})
            assert answer.status_code == status, answer.text
            assert answer.headers["content-type"] == "application/problem+json"
        # A new prompt while the turn waits is refused too.
        busy = client.post(
            "/agui",
            json={**body, "messages": [{"id": "m", "role": "user", "content": "x"}]},
        )
        assert busy.status_code == 409
        pending = client.get(f"/sessions/{thread}/approvals").json()["approvals"]
        assert [p["request_id"] for p in pending] == [interrupt.id]


def test_another_tenants_thread_is_404_and_a_bad_input_is_422(serve) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "chat")
        no_prompt = client.post(
            "/agui",
            json={
                "threadId": thread,
                "runId": "r",
                "messages": [{"id": "a", "role": "assistant", "content": "hi"}],
            },
        )
        assert no_prompt.status_code == 422
        missing = client.post("/agui", json={"threadId": thread})
        assert missing.status_code == 422
        assert missing.json()["field"] == "$.runId"
    body = {
        "threadId": thread,
        "runId": "r",
        "messages": [{"id": "m", "role": "user", "content": "hi"}],
        "forwardedProps": {"agent": "chat"},
    }
    with served.client(TOKEN_B) as other:
        assert other.post("/agui", json=body).status_code == 404
    with served.client(None) as anonymous:
        assert anonymous.post("/agui", json=body).status_code == 401
    with served.client() as client:
        transcript = client.get(f"/sessions/{thread}/transcript").json()["items"]
        assert not any(item["event"] == "TurnStarted" for item in transcript)


def test_a_deep_or_surrogate_body_is_a_422_naming_the_member(serve) -> None:
    served = serve(agents=AGENTS)
    with served.client() as client:
        thread = new_session(client, "chat")
        deep = (
            b'{"threadId":"' + thread.encode() + b'","runId":"r","messages":[],'
            b'"state":' + b"[" * 999 + b"]" * 999 + b"}"
        )
        answer = client.post(
            "/agui", content=deep, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 422
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["field"] == "$.state"
        surrogate = (
            b'{"threadId":"' + thread.encode() + b'","runId":"r",'
            b'"messages":[{"id":"m","role":"user","content":"\\ud800"}]}'
        )
        answer = client.post(
            "/agui", content=surrogate, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 422
        assert answer.json()["field"] == "$.messages[0].content"
        transcript = client.get(f"/sessions/{thread}/transcript").json()["items"]
        assert not any(item["event"] == "TurnStarted" for item in transcript)
