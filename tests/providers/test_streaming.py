"""Both providers against the fake server: answers, tool calls, usage, and
every way a stream can go wrong, each a ModelResponse or a clear error."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fake_openai import Call, Fail, FakeOpenAI, Hang, Reply, Trickle, Usage
from provider_support import expected_usage, make_provider, model_request, respond

from turnlog.domain.model import ModelResponse, check_response
from turnlog.providers import (
    EmptyResponseError,
    MalformedStreamError,
    ProviderTimeoutError,
    ResponseFailedError,
    StreamCutError,
    Timeouts,
)

FULL_USAGE = {
    "input_tokens": 12,
    "cached_input_tokens": 4,
    "output_tokens": 7,
    "reasoning_tokens": 2,
    "total_tokens": 19,
}


def test_a_plain_answer_streams_in_chunks_and_reports_usage(
    fake: FakeOpenAI, provider: Any, run: Any, dialect: str
) -> None:
    fake.script(Reply(text="The weather in Paris is sunny.", chunks=6))
    response, deltas = run(respond(provider, model_request()))
    assert response == ModelResponse(
        (
            {
                "type": "message",
                "role": "assistant",
                "content": "The weather in Paris is sunny.",
            },
        ),
        expected_usage(dialect, FULL_USAGE),
        provider.model,  # the model that answered, as the answer named it
    )
    assert len(deltas) == 6
    assert "".join(deltas) == "The weather in Paris is sunny."
    assert check_response(response) is response


def test_usage_the_server_did_not_send_is_none_not_zero(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Reply(text="hi", usage=None))
    response, _ = run(respond(provider, model_request()))
    assert response.usage is None


def test_usage_counters_the_server_leaves_out_are_left_out(
    fake: FakeOpenAI, provider: Any, run: Any, dialect: str
) -> None:
    fake.script(Reply(text="hi", usage=Usage(input=3, cached=0, output=1, reasoning=0)))
    response, _ = run(respond(provider, model_request()))
    assert response.usage == expected_usage(
        dialect,
        {
            "input_tokens": 3,
            "cached_input_tokens": 0,
            "output_tokens": 1,
            "reasoning_tokens": 0,
            "total_tokens": 4,
        },
    )


def test_several_function_calls_with_arguments_split_across_chunks(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    calls = (
        Call("call_a", "get_weather", json.dumps({"city": "Paris"})),
        Call("call_b", "get_weather", json.dumps({"city": "Tokyo, Japan"})),
        Call("call_c", "get_weather", "{}"),
    )
    fake.script(Reply(calls=calls, argument_chunks=5))
    response, deltas = run(respond(provider, model_request()))
    assert response.output == tuple(
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        }
        for call in calls
    )
    assert deltas == []
    assert check_response(response) is response


def test_text_and_a_function_call_in_one_response(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(
        Reply(
            text="Let me check.",
            chunks=3,
            calls=(Call("call_1", "get_weather", '{"city":"Oslo"}'),),
        )
    )
    response, deltas = run(respond(provider, model_request()))
    assert [item["type"] for item in response.output] == ["message", "function_call"]
    assert response.output[0]["content"] == "Let me check."
    assert "".join(deltas) == "Let me check."


def test_invalid_json_in_tool_arguments_is_passed_through(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    """The tool layer tells the model its arguments were not JSON, not the provider."""
    fake.script(
        Reply(
            calls=(Call("call_1", "get_weather", '{"city": "Par'),), argument_chunks=3
        )
    )
    response, _ = run(respond(provider, model_request()))
    assert response.output[0]["arguments"] == '{"city": "Par'


def test_an_empty_response_is_an_empty_response_error(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Reply(text=None))
    with pytest.raises(EmptyResponseError, match="no text and no tool call"):
        run(respond(provider, model_request()))
    assert len(fake.requests) == 1


def test_an_answer_of_empty_text_is_an_empty_response_error(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Reply(text=""))
    with pytest.raises(EmptyResponseError):
        run(respond(provider, model_request()))


def test_a_stream_cut_after_text_is_not_retried(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(
        Reply(text="one two three four five six", chunks=6, cut_after=5),
        Reply(text="x"),
    )
    deltas: list[str] = []

    async def go() -> None:
        await provider.respond(model_request(), deltas.append)

    with pytest.raises(StreamCutError, match="cut"):
        run(go())
    assert deltas  # text reached the subscribers, so a retry would repeat it
    assert len(fake.requests) == 1


def test_a_stream_cut_before_any_text_is_retried(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Reply(text="lost", cut_after=1), Reply(text="second try"))
    response, deltas = run(respond(provider, model_request()))
    assert response.output[0]["content"] == "second try"
    assert deltas == ["second try"]
    assert len(fake.requests) == 2


def test_a_stream_cut_after_every_attempt_fails_clearly(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(*[Reply(text="lost", cut_after=1)] * 3)
    with pytest.raises(StreamCutError, match="gave up after 3 attempts"):
        run(respond(provider, model_request()))
    assert len(fake.requests) == 3


def test_malformed_sse_is_a_malformed_stream_error(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Reply(text="some words here", chunks=3, malformed_after=2))
    with pytest.raises(MalformedStreamError, match="not JSON"):
        run(respond(provider, model_request()))
    assert len(fake.requests) == 1


def test_a_failure_reported_inside_the_stream_is_a_response_failed_error(
    fake: FakeOpenAI, provider: Any, run: Any, dialect: str
) -> None:
    fake.script(Reply(text="some words here", chunks=3, error_after=2))
    with pytest.raises(ResponseFailedError, match="error while processing") as caught:
        run(respond(provider, model_request()))
    # Anthropic reports an overload mid-stream as an error event.
    code = "overloaded_error" if dialect == "anthropic" else "server_error"
    assert caught.value.code == code


def test_a_server_that_ignores_stream_true_still_answers(
    fake: FakeOpenAI, provider: Any, run: Any, dialect: str
) -> None:
    fake.script(
        Reply(text="whole", calls=(Call("call_1", "get_weather", "{}"),), stream=False)
    )
    response, deltas = run(respond(provider, model_request()))
    assert [item["type"] for item in response.output] == ["message", "function_call"]
    assert response.usage == expected_usage(dialect, FULL_USAGE)
    assert deltas == ["whole"]


def test_a_server_that_never_answers_times_out_quickly(
    fake: FakeOpenAI, dialect: str, run: Any
) -> None:
    fake.script(Hang())
    provider = make_provider(
        dialect, fake.base_url, timeouts=Timeouts(connect=1.0, read=0.3, total=10.0)
    )
    started = time.monotonic()
    try:
        with pytest.raises(ProviderTimeoutError, match=r"no data for 0\.3 s"):
            run(respond(provider, model_request()))
    finally:
        run(provider.aclose())
    assert time.monotonic() - started < 5
    assert len(fake.requests) == 1  # a hung model is not asked again


def test_the_total_timeout_bounds_a_stream_that_never_ends(
    fake: FakeOpenAI, dialect: str, run: Any
) -> None:
    fake.script(Trickle(interval=0.01))
    provider = make_provider(
        dialect, fake.base_url, timeouts=Timeouts(connect=1.0, read=5.0, total=0.3)
    )
    try:
        with pytest.raises(ProviderTimeoutError, match=r"total timeout of 0\.3 s"):
            run(respond(provider, model_request()))
    finally:
        run(provider.aclose())
    assert fake.client_gone.wait(10)


def test_a_body_that_is_neither_an_event_stream_nor_json_is_malformed(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Fail(200, body=b"<html>hello</html>"))
    with pytest.raises(MalformedStreamError, match="not JSON"):
        run(respond(provider, model_request()))
