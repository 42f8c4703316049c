"""Typed answers asked for natively, against a real server on 127.0.0.1.

A request with an ``output_schema`` (an agent's ``output_type``) asks the
OpenAI APIs for JSON of that schema (``text.format`` on Responses,
``response_format`` on Chat Completions; strict where the schema allows)
and Anthropic for a call of an answer tool it must make, whose input
comes back as the final message. The bodies are checked against the
SDKs' own request types, made strict.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pydantic
import pytest
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from fake_openai import Call, FakeOpenAI, Reply
from provider_support import WEATHER, make_provider, model_request, respond
from test_wire_format import CHAT_PARAMS, RESPONSES_PARAMS, strict_validator

from turnlog.domain.model import ModelRequest, final_text
from turnlog.output import OutputType

ANTHROPIC_PARAMS = strict_validator(MessageCreateParamsStreaming)


class Forecast(pydantic.BaseModel):
    """A forecast for one city."""

    city: str
    celsius: float
    note: str | None = None


class Loose(pydantic.BaseModel):
    readings: dict[str, float]  # open-ended keys: strict mode cannot say this


FORECAST = OutputType(Forecast).schema
ANSWER = '{"city": "Oslo", "celsius": -3.5, "note": null}'


def typed_request(schema: Any = FORECAST, *, tools: Any = (WEATHER,)) -> ModelRequest:
    return msgspec.structs.replace(model_request(tools=tools), output_schema=schema)


def sent(
    fake: FakeOpenAI, dialect: str, run: Any, request: ModelRequest, reply: Reply
) -> tuple[dict[str, Any], Any]:
    provider = make_provider(dialect, fake.base_url)
    fake.script(reply)
    try:
        response, deltas = run(respond(provider, request))
    finally:
        run(provider.aclose())
    body = fake.requests[-1].body
    assert isinstance(body, dict)
    return body, (response, deltas)


def test_the_schema_is_strict_compatible_where_it_can_be() -> None:
    schema = FORECAST.schema
    assert FORECAST.strict
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["city", "celsius", "note"]  # strict: all of them
    assert "default" not in schema["properties"]["note"]
    assert FORECAST.description == "A forecast for one city."
    loose = OutputType(Loose).schema
    assert not loose.strict
    assert loose.schema["properties"]["readings"]["additionalProperties"] == {
        "type": "number"
    }


def test_responses_asks_for_json_of_the_schema(fake: FakeOpenAI, run: Any) -> None:
    body, (response, _) = sent(
        fake, "responses", run, typed_request(), Reply(text=ANSWER)
    )
    RESPONSES_PARAMS.validate_python(body)
    assert body["text"]["format"] == {
        "type": "json_schema",
        "name": "Forecast",
        "schema": FORECAST.schema,
        "strict": True,
        "description": "A forecast for one city.",
    }
    assert final_text(response.output) == ANSWER


def test_responses_keeps_text_options_beside_the_format(
    fake: FakeOpenAI, run: Any
) -> None:
    provider = make_provider(
        "responses", fake.base_url, options={"text": {"verbosity": "low"}}
    )
    try:
        body = provider.request_body(typed_request())  # type: ignore[attr-defined]
    finally:
        run(provider.aclose())
    assert body["text"]["verbosity"] == "low"
    assert body["text"]["format"]["name"] == "Forecast"


def test_chat_completions_asks_with_response_format(fake: FakeOpenAI, run: Any) -> None:
    schema = OutputType(Loose).schema
    body, (response, _) = sent(
        fake, "chat", run, typed_request(schema), Reply(text='{"readings": {"a": 1}}')
    )
    CHAT_PARAMS.validate_python(body)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Loose", "schema": schema.schema, "strict": False},
    }
    assert final_text(response.output) == '{"readings": {"a": 1}}'


def test_without_a_schema_the_bodies_are_what_they_were(
    fake: FakeOpenAI, run: Any
) -> None:
    for dialect in ("responses", "chat", "anthropic"):
        body, _ = sent(fake, dialect, run, model_request(), Reply(text="hi"))
        assert "text" not in body
        assert "response_format" not in body
        assert "tool_choice" not in body


@pytest.mark.parametrize("with_tools", [False, True])
def test_anthropic_must_call_the_answer_tool_and_its_input_is_the_answer(
    fake: FakeOpenAI, run: Any, with_tools: bool
) -> None:
    tools = (WEATHER,) if with_tools else ()
    reply = Reply(calls=(Call("toolu_1", "final_answer", ANSWER),), argument_chunks=3)
    body, (response, deltas) = sent(
        fake, "anthropic", run, typed_request(tools=tools), reply
    )
    ANTHROPIC_PARAMS.validate_python(body)
    answer_tool = body["tools"][-1]
    assert answer_tool["name"] == "final_answer"
    assert answer_tool["input_schema"] == FORECAST.schema
    if with_tools:  # it may call its own tools first
        assert body["tool_choice"] == {"type": "any"}
    else:
        assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    # the rest of turnlog sees a final message, streamed as it came
    assert response.output == (
        {"type": "message", "role": "assistant", "content": ANSWER},
    )
    assert "".join(deltas) == ANSWER


def test_anthropic_tools_called_beside_the_answer_come_first(
    fake: FakeOpenAI, run: Any
) -> None:
    reply = Reply(
        calls=(
            Call("toolu_1", "get_weather", '{"city": "Oslo"}'),
            Call("toolu_2", "final_answer", ANSWER),
        )
    )
    _, (response, _) = sent(fake, "anthropic", run, typed_request(), reply)
    assert [item["type"] for item in response.output] == ["function_call"]
    assert response.output[0]["name"] == "get_weather"


def test_anthropic_answer_tool_keeps_clear_of_an_agent_tool_of_that_name(
    fake: FakeOpenAI, run: Any
) -> None:
    own = msgspec.structs.replace(WEATHER, name="final_answer")
    reply = Reply(calls=(Call("toolu_1", "turnlog_final_answer", ANSWER),))
    body, (response, _) = sent(
        fake, "anthropic", run, typed_request(tools=(own,)), reply
    )
    assert [tool["name"] for tool in body["tools"]] == [
        "final_answer",
        "turnlog_final_answer",
    ]
    assert final_text(response.output) == ANSWER


def test_anthropic_with_thinking_lets_the_model_choose(
    fake: FakeOpenAI, run: Any
) -> None:
    provider = make_provider(
        "anthropic",
        fake.base_url,
        options={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    try:
        body = provider.request_body(typed_request())  # type: ignore[attr-defined]
    finally:
        run(provider.aclose())
    assert body["tool_choice"] == {"type": "auto"}
