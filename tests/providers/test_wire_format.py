"""The wire format, checked by code this project did not write.

Request bodies turnlog sends are validated against the ``openai``
package's own typed request parameters (made strict: no unknown keys
anywhere, every list checked), and the fake server's streams against its
typed event models, so both sides of the provider tests follow the APIs'
published shapes rather than our reading of them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pydantic
import pydantic_core
import pytest
from fake_openai import Call, Compacted, FakeOpenAI, Reply
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses import CompactedResponse, ResponseStreamEvent
from openai.types.responses.response_compact_params import ResponseCompactParams
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from provider_support import WEATHER, make_provider, model_request, respond

from turnlog.domain.context import compaction_marker
from turnlog.domain.model import (
    assistant_message,
    function_call,
    function_call_output,
    user_message,
)
from turnlog.providers.chat_messages import MISSING_OUTPUT


def strict_validator(params: Any) -> pydantic_core.SchemaValidator:
    """A validator for an openai TypedDict that refuses unknown keys.

    The SDK's TypedDicts ignore extra keys and check ``Iterable`` fields
    only lazily; both are tightened here so a stray turnlog key or a bad
    message fails the test.
    """
    schema = copy.deepcopy(pydantic.TypeAdapter(params).core_schema)

    def tighten(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "typed-dict":
                node["extra_behavior"] = "forbid"
            if node.get("type") == "generator":
                node["type"] = "list"
            for value in node.values():
                tighten(value)
        elif isinstance(node, list):
            for value in node:
                tighten(value)

    tighten(schema)
    return pydantic_core.SchemaValidator(schema)


RESPONSES_PARAMS = strict_validator(ResponseCreateParamsStreaming)
CHAT_PARAMS = strict_validator(CompletionCreateParamsStreaming)
COMPACT_PARAMS = strict_validator(ResponseCompactParams)

ATTACHMENT = {
    "id": "file_1",
    "name": "plan.pdf",
    "size": 2048,
    "media_type": "application/pdf",
}


def rich_context() -> tuple[dict[str, Any], ...]:
    """A context with every kind of item a session records."""
    prompt = user_message("Compare the weather in Paris and Tokyo.")
    prompt["attachments"] = [ATTACHMENT]
    peer = {
        "type": "message",
        "role": "developer",
        "content": "Agent B says: use Celsius.",
        "input_kind": "peer",
    }
    hook = {
        "type": "message",
        "role": "developer",
        "content": "The user is in Europe.",
        "turnlog_kind": "user_prompt_hook",
    }
    steer = user_message("Also mention the wind.")
    pre_tool = {
        "type": "message",
        "role": "developer",
        "content": "Weather data is cached.",
        "turnlog_kind": "pre_tool_hook",
    }
    return (
        {"type": "compaction", "encrypted_content": "gAAAA-opaque"},
        compaction_marker(),
        prompt,
        peer,
        hook,
        assistant_message("Let me look both up."),
        function_call("call_paris", "get_weather", '{"city": "Paris"}'),
        function_call("call_tokyo", "get_weather", '{"city": "Tokyo"}'),
        steer,
        pre_tool,
        function_call_output("call_paris", "18 C, light wind"),
        function_call_output("call_tokyo", "24 C, calm"),
        assistant_message("Paris 18 C, Tokyo 24 C."),
        user_message("And Oslo?"),
        function_call("call_lost", "get_weather", '{"city": "Oslo"}'),
        user_message("Never mind."),  # the turn was interrupted: no output
    )


def turnlog_keys(value: Any, path: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key.startswith("turnlog_") or key in ("input_kind", "attachments"):
                yield f"{path}.{key}"
            yield from turnlog_keys(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from turnlog_keys(inner, f"{path}[{index}]")


def sent_body(
    fake: FakeOpenAI, provider: Any, run: Any, **request: Any
) -> dict[str, Any]:
    fake.script(Reply(text="ok"))
    run(respond(provider, model_request(*rich_context(), **request)))
    body = fake.requests[-1].body
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize("cache_breakpoints", [True, False])
def test_responses_requests_are_valid_openai_request_params(
    fake: FakeOpenAI, run: Any, cache_breakpoints: bool
) -> None:
    provider = make_provider(
        "responses", fake.base_url, cache_breakpoints=cache_breakpoints
    )
    try:
        body = sent_body(fake, provider, run)
    finally:
        run(provider.aclose())
    RESPONSES_PARAMS.validate_python(body)
    assert list(turnlog_keys(body)) == []
    assert body["stream"] is True
    assert body["store"] is False  # turnlog keeps the context itself
    assert body["instructions"] == "Be brief."
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": WEATHER.description,
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    assert "s1" not in body["prompt_cache_key"]
    items = body["input"]
    assert items[0] == {"type": "compaction", "encrypted_content": "gAAAA-opaque"}
    marker_part = items[1]["content"][0]
    if cache_breakpoints:
        assert marker_part["prompt_cache_breakpoint"] == {"mode": "explicit"}
    else:
        assert "prompt_cache_breakpoint" not in marker_part
    assert items[2]["content"] == (
        "Compare the weather in Paris and Tokyo.\n\n"
        "[attached file: plan.pdf (application/pdf, 2048 bytes), id file_1]"
    )
    assert items[3] == {
        "type": "message",
        "role": "developer",
        "content": "Agent B says: use Celsius.",
    }
    assert [i["type"] for i in items].count("function_call") == 3


@pytest.mark.parametrize("developer_role", ["user", "system", "developer"])
def test_chat_requests_are_valid_openai_request_params(
    fake: FakeOpenAI, run: Any, developer_role: str
) -> None:
    provider = make_provider("chat", fake.base_url, developer_role=developer_role)
    try:
        body = sent_body(fake, provider, run)
    finally:
        run(provider.aclose())
    CHAT_PARAMS.validate_python(body)
    assert list(turnlog_keys(body)) == []
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": WEATHER.description,
                "parameters": WEATHER.parameters,
            },
        }
    ]
    dev = developer_role
    assert [(m["role"], m.get("content")) for m in body["messages"]] == [
        ("system", "Be brief."),
        (dev, "[developer message]\nThe conversation before this point was compacted."),
        (
            "user",
            "Compare the weather in Paris and Tokyo.\n\n"
            "[attached file: plan.pdf (application/pdf, 2048 bytes), id file_1]",
        ),
        (dev, "[message from another agent]\nAgent B says: use Celsius."),
        (dev, "[developer message]\nThe user is in Europe."),
        ("assistant", "Let me look both up."),
        # tool answers follow their calls; what came in between waits
        ("tool", "18 C, light wind"),
        ("tool", "24 C, calm"),
        ("user", "Also mention the wind."),
        (dev, "[developer message]\nWeather data is cached."),
        ("assistant", "Paris 18 C, Tokyo 24 C."),
        ("user", "And Oslo?"),
        ("assistant", None),
        ("tool", MISSING_OUTPUT),  # the call was never answered
        ("user", "Never mind."),
    ]
    calls = body["messages"][5]["tool_calls"]
    assert [
        (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls
    ] == [
        ("call_paris", "get_weather", '{"city": "Paris"}'),
        ("call_tokyo", "get_weather", '{"city": "Tokyo"}'),
    ]
    assert body["messages"][6]["tool_call_id"] == "call_paris"
    assert body["messages"][12]["tool_calls"][0]["id"] == "call_lost"
    assert body["messages"][13]["tool_call_id"] == "call_lost"


def test_options_are_merged_into_the_request_and_stay_valid(
    fake: FakeOpenAI, run: Any
) -> None:
    responses = make_provider(
        "responses",
        fake.base_url,
        options={"temperature": 0.2, "max_output_tokens": 50},
    )
    chat = make_provider("chat", fake.base_url, options={"temperature": 0.2, "seed": 7})
    try:
        body = sent_body(fake, responses, run)
        chat_body = sent_body(fake, chat, run)
    finally:
        run(responses.aclose())
        run(chat.aclose())
    RESPONSES_PARAMS.validate_python(body)
    CHAT_PARAMS.validate_python(chat_body)
    assert (body["temperature"], body["max_output_tokens"]) == (0.2, 50)
    assert (chat_body["temperature"], chat_body["seed"]) == (0.2, 7)


def test_a_request_without_tools_or_instructions_leaves_them_out(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Reply(text="ok"))
    run(respond(provider, model_request(tools=(), instructions="")))
    body = fake.requests[0].body
    assert "tools" not in body
    assert "instructions" not in body
    assert "system" not in body
    if "max_tokens" in body:  # Anthropic: content blocks, the last one cached
        text = {"type": "text", "text": "What is the weather in Paris?"}
        cached = {**text, "cache_control": {"type": "ephemeral"}}
        assert body["messages"] == [{"role": "user", "content": [cached]}]
    elif "messages" in body:
        assert body["messages"] == [
            {"role": "user", "content": "What is the weather in Paris?"}
        ]


def test_native_compaction_posts_to_responses_compact(
    fake: FakeOpenAI, run: Any
) -> None:
    provider = make_provider("responses", fake.base_url)
    summary = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Compare the weather."}],
    }
    opaque = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-summary"}
    fake.script(Compacted(output=(summary, opaque)))
    try:
        response = run(provider.compact(model_request(*rich_context(), tools=())))
    finally:
        run(provider.aclose())
    request = fake.requests[0]
    assert request.path == "/v1/responses/compact"
    COMPACT_PARAMS.validate_python(request.body)
    assert list(turnlog_keys(request.body)) == []
    assert "stream" not in request.body
    assert response.output == (
        {"type": "message", "role": "user", "content": "Compare the weather."},
        opaque,
    )
    assert response.usage == {
        "input_tokens": 12,
        "cached_input_tokens": 4,
        "output_tokens": 7,
        "reasoning_tokens": 2,
        "total_tokens": 19,
    }


def test_the_chat_provider_has_no_native_compaction() -> None:
    provider = make_provider("chat", "http://127.0.0.1:9/v1")
    assert not hasattr(provider, "compact")  # turnlog summarises with respond()


# -- the fake server follows the published shapes ----------------------------------

STREAM_EVENT = pydantic.TypeAdapter(ResponseStreamEvent)
REPLY = Reply(
    text="Sunny and mild.",
    chunks=4,
    calls=(
        Call("call_1", "get_weather", '{"city": "Paris"}'),
        Call("call_2", "x", "{}"),
    ),
    argument_chunks=3,
)


def data_lines(
    fake: FakeOpenAI, path: str, body: dict[str, Any]
) -> list[tuple[str, str]]:
    fake.script(REPLY)
    response = httpx.post(f"{fake.base_url}{path}", json=body, timeout=10)
    assert response.headers["content-type"].startswith("text/event-stream")
    events, name = [], "message"
    for line in response.text.split("\n"):
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, line[6:]))
            name = "message"
    return events


def test_the_fake_responses_stream_parses_as_openai_stream_events(
    fake: FakeOpenAI,
) -> None:
    events = data_lines(
        fake, "/responses", {"model": "m", "input": "hi", "stream": True}
    )
    parsed = [STREAM_EVENT.validate_python(json.loads(data)) for _, data in events]
    assert all(
        name == event.type for (name, _), event in zip(events, parsed, strict=True)
    )
    assert [e.sequence_number for e in parsed] == list(range(len(parsed)))
    assert parsed[-1].type == "response.completed"
    assert "".join(
        e.delta for e in parsed if e.type == "response.output_text.delta"
    ) == ("Sunny and mild.")


def test_the_fake_chat_stream_parses_as_openai_chunks(fake: FakeOpenAI) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = data_lines(fake, "/chat/completions", body)
    assert events[-1] == ("message", "[DONE]")
    chunks = [ChatCompletionChunk.model_validate(json.loads(d)) for _, d in events[:-1]]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == 12
    assert chunks[-2].choices[0].finish_reason == "tool_calls"


def test_the_fake_compaction_parses_as_an_openai_compacted_response(
    fake: FakeOpenAI,
) -> None:
    opaque = {"type": "compaction", "id": "cmp_1", "encrypted_content": "x"}
    fake.script(Compacted(output=(opaque,)))
    response = httpx.post(
        f"{fake.base_url}/responses/compact", json={"model": "m"}, timeout=10
    )
    compacted = CompactedResponse.model_validate(response.json())
    assert compacted.object == "response.compaction"
