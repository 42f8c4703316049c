"""What only the Anthropic provider does: Messages-shaped requests checked
against the ``anthropic`` package's typed params, thinking blocks kept with
their signatures across a tool loop, cache_control breakpoints, cache usage,
529 overloads, and a real Runtime session through it all.

The behaviour it shares with the OpenAI providers (streaming, cuts,
retries, timeouts, cancellation, the key kept out of sight) is covered by
the dialect-parametrised tests, which include ``anthropic``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pydantic
import pytest
from anthropic.types import RawMessageStreamEvent
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from fake_anthropic import signature_of
from fake_openai import Call, Fail, FakeOpenAI, Reply, Usage
from provider_support import make_provider, model_request, respond
from test_wire_format import rich_context, strict_validator, turnlog_keys

from turnlog import Agent, Runtime, function_tool
from turnlog.domain.model import (
    assistant_message,
    function_call,
    function_call_output,
    user_message,
)
from turnlog.providers import (
    AnthropicMessagesProvider,
    ResponseFailedError,
    ServerError,
)
from turnlog.providers.anthropic_messages import thinking_item
from turnlog.providers.responses_items import responses_input

PARAMS = strict_validator(MessageCreateParamsStreaming)
EPHEMERAL = {"type": "ephemeral"}
THINKING = {"type": "thinking", "thinking": "Two cities.", "signature": "sig-1"}
REDACTED = {"type": "redacted_thinking", "data": "EnCrYpTeD"}


@pytest.fixture
def claude(fake: FakeOpenAI, run: Any) -> Iterator[Any]:
    provider = make_provider("anthropic", fake.base_url)
    yield provider
    run(provider.aclose())


def sent(fake: FakeOpenAI, provider: Any, run: Any, *items: Any) -> dict[str, Any]:
    fake.script(Reply(text="ok"))
    run(respond(provider, model_request(*items)))
    body = fake.requests[-1].body
    PARAMS.validate_python(body)  # refuses unknown keys anywhere
    return body


def marked(value: Any) -> list[str]:
    """Where ``cache_control`` is set, as readable paths."""
    found = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "cache_control":
                found.append(str(inner.get("type")))
            found.extend(marked(inner))
    elif isinstance(value, list):
        for inner in value:
            found.extend(marked(inner))
    return found


def test_a_rich_context_is_a_valid_messages_request(
    fake: FakeOpenAI, claude: Any, run: Any
) -> None:
    context = list(rich_context())
    # The step that called the tools thought first.
    context.insert(5, thinking_item(THINKING))
    body = sent(fake, claude, run, *context)
    assert list(turnlog_keys(body)) == []
    assert fake.requests[-1].path == "/v1/messages"
    assert fake.requests[-1].headers["anthropic-version"] == "2023-06-01"
    roles = [message["role"] for message in body["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))  # they alternate
    assert body["system"][0]["text"] == "Be brief."
    # Thinking first, then text, then both tool_use blocks in one turn.
    turn = next(m for m in body["messages"] if m["role"] == "assistant")
    assert [b["type"] for b in turn["content"]] == [
        "thinking",
        "text",
        "tool_use",
        "tool_use",
    ]
    assert turn["content"][0] == THINKING
    assert turn["content"][2]["input"] == {"city": "Paris"}
    # Both results at the start of the next user message, the steer after.
    answer = body["messages"][roles.index("assistant") + 1]
    kinds = [b["type"] for b in answer["content"]]
    assert kinds[:2] == ["tool_result", "tool_result"]
    assert "Also mention the wind." in json.dumps(answer["content"][2:])
    # The call never answered gets a stand-in result.
    last_results = [
        b
        for b in body["messages"][-1]["content"]
        if b["type"] == "tool_result" and b["tool_use_id"] == "call_lost"
    ]
    assert last_results
    assert last_results[0]["is_error"] is True


def test_cache_control_marks_the_system_prompt_breakpoint_and_last_block(
    fake: FakeOpenAI, claude: Any, run: Any
) -> None:
    body = sent(fake, claude, run, *rich_context())
    assert body["system"][0]["cache_control"] == EPHEMERAL
    breakpoint_block = body["messages"][0]["content"][1]
    assert breakpoint_block["text"].startswith("The conversation before")
    assert breakpoint_block["cache_control"] == EPHEMERAL
    assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert marked(body) == ["ephemeral"] * 3  # the API allows at most 4
    assert "cache_control" not in body["tools"][-1]  # the system one covers tools


def test_without_a_system_prompt_the_last_tool_is_marked(
    fake: FakeOpenAI, run: Any
) -> None:
    provider = make_provider("anthropic", fake.base_url)
    fake.script(Reply(text="ok"))
    try:
        run(respond(provider, model_request(instructions="")))
    finally:
        run(provider.aclose())
    body = fake.requests[-1].body
    PARAMS.validate_python(body)
    assert body["tools"][-1]["cache_control"] == EPHEMERAL


def test_cache_control_can_be_turned_off(fake: FakeOpenAI, run: Any) -> None:
    provider = make_provider("anthropic", fake.base_url, cache_control=False)
    try:
        body = sent(fake, provider, run, *rich_context())
    finally:
        run(provider.aclose())
    assert marked(body) == []


def test_thinking_and_several_tool_uses_in_one_response(
    fake: FakeOpenAI, claude: Any, run: Any
) -> None:
    fake.script(
        Reply(
            thinking="Paris, then Tokyo.",
            redacted_thinking="opaque",
            text="Looking both up.",
            chunks=3,
            calls=(
                Call("toolu_1", "get_weather", '{"city": "Paris"}'),
                Call("toolu_2", "get_weather", '{"city": "Tokyo"}'),
            ),
            argument_chunks=4,
            usage=Usage(input=100, cached=60, output=9, cache_write=30),
        )
    )
    response, deltas = run(respond(claude, model_request()))
    assert [item["type"] for item in response.output] == [
        "anthropic_thinking",
        "anthropic_thinking",
        "message",
        "function_call",
        "function_call",
    ]
    assert response.output[0]["block"] == {
        "type": "thinking",
        "thinking": "Paris, then Tokyo.",
        "signature": signature_of("Paris, then Tokyo."),
    }
    assert response.output[1]["block"] == {
        "type": "redacted_thinking",
        "data": "opaque",
    }
    assert [json.loads(i["arguments"]) for i in response.output[3:]] == [
        {"city": "Paris"},
        {"city": "Tokyo"},
    ]
    assert "".join(deltas) == "Looking both up."  # thinking is not streamed as text
    assert response.usage == {
        "input_tokens": 100,
        "cached_input_tokens": 60,
        "cache_write_input_tokens": 30,
        "output_tokens": 9,
        "total_tokens": 109,
    }


def test_the_openai_providers_leave_thinking_items_out() -> None:
    context = [user_message("hi"), thinking_item(THINKING), assistant_message("yo")]
    assert [i["type"] for i in responses_input(context, True)] == [
        "message",
        "message",
    ]


def test_529_overloaded_is_retried_then_a_server_error(
    fake: FakeOpenAI, claude: Any, run: Any
) -> None:
    overloaded = Fail(529, "Overloaded", type="overloaded_error")
    fake.script(overloaded, Reply(text="fine now"))
    response, _ = run(respond(claude, model_request()))
    assert response.output[0]["content"] == "fine now"
    fake.script(overloaded, overloaded, overloaded)
    with pytest.raises(ServerError, match="Overloaded") as caught:
        run(respond(claude, model_request(turn_id="t2")))
    assert caught.value.status == 529
    assert len(fake.requests) == 5


def test_a_429_with_retry_after_in_anthropics_shape(
    fake: FakeOpenAI, claude: Any, run: Any
) -> None:
    fake.script(
        Fail(
            429,
            "Rate limited",
            type="rate_limit_error",
            headers=(("retry-after", "0"),),
        ),
        Reply(text="ok"),
    )
    response, _ = run(respond(claude, model_request()))
    assert response.output[0]["content"] == "ok"
    assert len(fake.requests) == 2


def test_an_error_event_before_any_text_is_a_response_failed_error(
    fake: FakeOpenAI, claude: Any, run: Any
) -> None:
    fake.script(Reply(text="never", error_after=2, error_message="Overloaded"))
    with pytest.raises(ResponseFailedError, match="Overloaded") as caught:
        run(respond(claude, model_request()))
    assert caught.value.code == "overloaded_error"


def test_the_fake_stream_parses_as_anthropic_stream_events(fake: FakeOpenAI) -> None:
    fake.script(
        Reply(
            thinking="hm",
            text="Sunny.",
            chunks=3,
            calls=(Call("toolu_1", "get_weather", '{"city": "Paris"}'),),
            argument_chunks=3,
        )
    )
    response = httpx.post(
        f"{fake.root_url}/v1/messages",
        json={"model": "m", "max_tokens": 5, "messages": [], "stream": True},
        timeout=10,
    )
    adapter = pydantic.TypeAdapter(RawMessageStreamEvent)
    payloads = [
        json.loads(line[6:])
        for line in response.text.split("\n")
        if line.startswith("data: ")
    ]
    # ping is documented but has no model in the package.
    assert {"type": "ping"} in payloads
    events = [adapter.validate_python(p) for p in payloads if p["type"] != "ping"]
    assert events[0].type == "message_start"
    assert events[-1].type == "message_stop"
    assert {e.type for e in events} >= {"content_block_delta", "message_delta"}


def test_max_tokens_is_checked_and_reserved() -> None:
    with pytest.raises(Exception, match="max_tokens"):
        AnthropicMessagesProvider("m", max_tokens=0)
    with pytest.raises(Exception, match="max_tokens"):
        AnthropicMessagesProvider("m", options={"max_tokens": 5})


# -- a real session ----------------------------------------------------------------


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_a_tool_loop_through_the_runtime_sends_thinking_back(
    fake: FakeOpenAI,
) -> None:
    provider = make_provider("anthropic", fake.base_url)
    fake.script(
        Reply(
            thinking="I should look up both.",
            calls=(
                Call("toolu_1", "get_weather", '{"city": "Paris"}'),
                Call("toolu_2", "get_weather", '{"city": "Oslo"}'),
            ),
            usage=Usage(input=50, cached=0, output=5, cache_write=40),
        ),
        Reply(
            text="Sunny in both.",
            chunks=3,
            usage=Usage(input=80, cached=40, output=4, cache_write=30),
        ),
    )
    rt = Runtime.open("memory://")
    try:
        agent = Agent(
            "weather", model=provider, tools=[get_weather], instructions="Be brief."
        )
        session = rt.create_session(agent, session_id="claude")
        result = session.prompt("Weather in Paris and Oslo?", timeout=30)
        checkpoint = rt.checkpoints.load("claude")
    finally:
        provider.close()
        rt.close()
    assert result.status == "completed"
    assert result.final_output == "Sunny in both."
    second = fake.requests[1].body
    PARAMS.validate_python(second)
    assistant, results = second["messages"][1:3]
    assert [b["type"] for b in assistant["content"]] == [
        "thinking",
        "tool_use",
        "tool_use",
    ]
    assert assistant["content"][0]["signature"] == signature_of(
        "I should look up both."
    )
    assert [(b["type"], b["content"]) for b in results["content"]] == [
        ("tool_result", "sunny in Paris"),
        ("tool_result", "sunny in Oslo"),
    ]
    assert checkpoint.total_usage == {
        "input_tokens": 130,
        "cached_input_tokens": 40,
        "cache_write_input_tokens": 70,
        "output_tokens": 9,
        "total_tokens": 139,
    }


def test_context_items_map_to_anthropic_without_a_server() -> None:
    provider = AnthropicMessagesProvider("m", base_url="http://127.0.0.1:9")
    body = provider.request_body(
        model_request(
            user_message("go"),
            function_call("a", "get_weather", "not json"),
            function_call_output("a", "x"),
        )
    )
    PARAMS.validate_python(body)
    assert body["messages"][1]["content"][0]["input"] == {"arguments": "not json"}
