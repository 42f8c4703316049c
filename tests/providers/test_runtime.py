"""End to end: sessions of a real Runtime whose agent talks HTTP to the fake
server, through both providers. Deltas reach subscribers, the log replays
to the live stream, and every bad answer is a recorded failure or an error
output with a clear message, after which the session goes on."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from fake_openai import Call, Compacted, Fail, FakeOpenAI, Reply, Trickle
from provider_support import API_KEY, make_provider

from turnlog import Agent, Compaction, Runtime, function_tool
from turnlog.domain import protocol as p
from turnlog.domain.run import RunEvent


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime.open("memory://")
    yield runtime
    runtime.close()


@pytest.fixture
def http_model(dialect: str, fake: FakeOpenAI, rt: Runtime) -> Iterator[Any]:
    """A provider on the fake server, closed before the runtime's loop stops."""
    provider = make_provider(dialect, fake.base_url)
    yield provider
    provider.close()


def agent(model: Any, **changes: Any) -> Agent:
    return Agent(
        "weather", model=model, tools=[get_weather], instructions="Be brief.", **changes
    )


def tool_outputs(body: dict[str, Any]) -> list[str]:
    """The tool outputs a request sent, in any dialect."""
    if "max_tokens" in body:  # Anthropic: tool_result blocks of user messages
        return [
            block["content"]
            for message in body["messages"]
            for block in message["content"]
            if message["role"] == "user" and block["type"] == "tool_result"
        ]
    if "input" in body:
        return [
            i["output"]
            for i in body["input"]
            if i.get("type") == "function_call_output"
        ]
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def live_events(subscription: Any) -> list[Any]:
    return [item.event for item in subscription.drain() if isinstance(item, RunEvent)]


def test_a_prompt_with_a_tool_call_streams_and_replays(
    rt: Runtime, http_model: Any, fake: FakeOpenAI
) -> None:
    fake.script(
        Reply(
            calls=(Call("call_1", "get_weather", '{"city": "Paris"}'),),
            argument_chunks=4,
        ),
        Reply(text="It is sunny in Paris today.", chunks=5),
    )
    session = rt.create_session(agent(http_model), session_id="e2e")
    subscription = session.subscribe()
    result = session.prompt("What is the weather in Paris?", timeout=30)
    assert result.status == "completed"
    assert result.final_output == "It is sunny in Paris today."
    assert result.usage["input_tokens"] == 24  # two steps of 12
    assert tool_outputs(fake.requests[1].body) == ["sunny in Paris"]

    live = live_events(subscription)
    deltas = [e.msg.delta for e in live if isinstance(e.msg, p.AgentMessageDeltaMsg)]
    assert "".join(deltas) == "It is sunny in Paris today."
    assert len(deltas) == 5
    assert all(e.transient for e in live if isinstance(e.msg, p.AgentMessageDeltaMsg))
    durable = [e for e in live if not e.transient]
    assert any(isinstance(e.msg, p.ToolCallFinishedMsg) for e in durable)
    assert rt.replay_events("e2e")[-len(durable) :] == durable
    assert [m.content for m in session.messages()] == [
        "What is the weather in Paris?",
        "It is sunny in Paris today.",
    ]


def test_invalid_json_arguments_become_an_error_output_and_the_turn_goes_on(
    rt: Runtime, http_model: Any, fake: FakeOpenAI
) -> None:
    fake.script(
        Reply(
            calls=(Call("call_1", "get_weather", '{"city": "Par'),), argument_chunks=2
        ),
        Reply(text="Sorry, let me answer without the tool."),
    )
    session = rt.create_session(agent(http_model), session_id="badjson")
    result = session.prompt("Weather?", timeout=30)
    assert result.status == "completed"
    [output] = tool_outputs(fake.requests[1].body)
    assert output.startswith("arguments are not valid JSON")


def test_a_call_to_an_unknown_tool_is_answered_with_an_error_output(
    rt: Runtime, http_model: Any, fake: FakeOpenAI
) -> None:
    fake.script(
        Reply(calls=(Call("call_1", "launch_rockets", "{}"),)),
        Reply(text="I cannot do that."),
    )
    session = rt.create_session(agent(http_model), session_id="unknown")
    result = session.prompt("Launch!", timeout=30)
    assert result.final_output == "I cannot do that."
    assert tool_outputs(fake.requests[1].body) == [
        "unknown tool 'launch_rockets'; available tools: get_weather"
    ]


FAILURES = {
    "401": (Fail(401, f"Incorrect API key provided: {API_KEY}"), "AuthenticationError"),
    "empty": (Reply(text=None), "EmptyResponseError"),
    "cut": (Reply(text="half an ans", chunks=4, cut_after=5), "StreamCutError"),
    "malformed": (
        Reply(text="broken", chunks=2, malformed_after=3),
        "MalformedStreamError",
    ),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failed_model_call_is_recorded_and_the_session_goes_on(
    rt: Runtime, http_model: Any, fake: FakeOpenAI, failure: str
) -> None:
    action, error_type = FAILURES[failure]
    fake.script(action)
    session = rt.create_session(agent(http_model), session_id="fails")
    result = session.prompt("Weather?", timeout=30)
    assert result.status == "failed"
    [failed] = [
        e.msg
        for e in rt.replay_events("fails")
        if isinstance(e.msg, p.ModelStepFailedMsg)
    ]
    assert failed.error_type == error_type
    assert failed.message
    assert API_KEY not in msgspec.json.encode(rt.replay_events("fails")).decode()

    fake.script(Reply(text="Back again."))
    assert session.prompt("Weather now?", timeout=30).final_output == "Back again."


def test_an_interrupt_closes_the_stream(
    rt: Runtime, http_model: Any, fake: FakeOpenAI
) -> None:
    fake.script(Trickle(interval=0.005))
    session = rt.create_session(agent(http_model), session_id="stop")
    subscription = session.subscribe()
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.append(session.prompt("Go on.", timeout=30))
    )
    worker.start()
    for item in subscription:
        if isinstance(item, RunEvent) and isinstance(
            item.event.msg, p.AgentMessageDeltaMsg
        ):
            break  # the model is streaming
    session.interrupt()
    worker.join(30)
    assert results[0].status == "aborted"
    assert fake.client_gone.wait(10)  # the server saw the connection closed


def test_compaction_uses_the_responses_compact_endpoint(
    rt: Runtime, fake: FakeOpenAI
) -> None:
    provider = make_provider("responses", fake.base_url)
    opaque = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA"}
    fake.script(
        Reply(text="x" * 400),
        Compacted(
            output=({"type": "message", "role": "user", "content": "first"}, opaque)
        ),
        Reply(text="after compaction"),
    )
    try:
        session = rt.create_session(
            agent(provider, middleware=[Compaction(threshold_tokens=50)]),
            session_id="c",
        )
        session.prompt("first", timeout=30)
        result = session.prompt("second", timeout=30)
    finally:
        provider.close()
    assert result.final_output == "after compaction"
    assert fake.paths() == ["/v1/responses", "/v1/responses/compact", "/v1/responses"]
    sent = fake.requests[2].body["input"]
    assert sent[1] == opaque  # the opaque item goes back to the server as it came
    assert json.dumps(sent).count("prompt_cache_breakpoint") == 1
