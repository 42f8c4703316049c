"""Images in tool outputs, as each API takes them; audio, and image types
the APIs do not read, left out with a line saying so.

Each request body is sent to the fake provider server and validated
against the official SDK's typed request params (strict: no unknown keys).
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply
from provider_support import make_provider, model_request, respond
from test_anthropic import PARAMS as ANTHROPIC_PARAMS
from test_wire_format import CHAT_PARAMS, RESPONSES_PARAMS, turnlog_keys

from turnlog.domain.model import function_call, function_call_output, user_message

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
PNG_URL = f"data:image/png;base64,{PNG}"
MEDIA = [
    {"type": "image", "mime_type": "image/png", "data": PNG},
    {"type": "audio", "mime_type": "audio/wav", "data": "UklGRg=="},
    {"type": "image", "mime_type": "image/svg+xml", "data": "PHN2Zy8+"},
]
LEFT_OUT = "audio/wav audio, image/svg+xml image"


def context() -> tuple[dict[str, Any], ...]:
    """Two calls of one step; the first answered with media, the second not."""
    return (
        user_message("Chart the weather."),
        function_call("call_chart", "get_weather", '{"city": "Paris"}'),
        function_call("call_text", "get_weather", '{"city": "Oslo"}'),
        function_call_output("call_chart", "the chart", MEDIA),
        function_call_output("call_text", "12 C"),
    )


@pytest.fixture
def sent(fake: FakeOpenAI, run: Any) -> Any:
    def send(dialect: str) -> dict[str, Any]:
        provider = make_provider(dialect, fake.base_url)
        try:
            fake.script(Reply(text="ok"))
            run(respond(provider, model_request(*context())))
        finally:
            run(provider.aclose())
        body = fake.requests[-1].body
        assert isinstance(body, dict)
        assert list(turnlog_keys(body)) == []
        assert "media" not in str(body.keys())
        return body

    return send


def test_responses_sends_images_as_input_image_content(sent: Any) -> None:
    body = sent("responses")
    RESPONSES_PARAMS.validate_python(body)
    outputs = [i for i in body["input"] if i["type"] == "function_call_output"]
    assert outputs[0]["output"][1:] == [{"type": "input_image", "image_url": PNG_URL}]
    text = outputs[0]["output"][0]
    assert text["type"] == "input_text"
    assert text["text"].startswith(
        "the chart\n[turnlog: left out of this tool output: "
    )
    assert LEFT_OUT in text["text"]
    assert outputs[1]["output"] == "12 C"  # no media: plain text, as before


def test_chat_sends_images_in_a_user_message_after_the_tool_messages(
    sent: Any,
) -> None:
    body = sent("chat")
    CHAT_PARAMS.validate_python(body)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    chart, plain, images = body["messages"][3:]
    assert chart["tool_call_id"] == "call_chart"
    assert LEFT_OUT in chart["content"]
    assert chart["content"].endswith(
        "[turnlog: its 1 image(s) follow in a user message]"
    )
    assert plain == {"role": "tool", "tool_call_id": "call_text", "content": "12 C"}
    assert images["content"] == [
        {"type": "text", "text": "[images from the output of tool call call_chart]"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
    ]


def test_anthropic_sends_images_in_the_tool_result(sent: Any) -> None:
    body = sent("anthropic")
    ANTHROPIC_PARAMS.validate_python(body)
    results = body["messages"][-1]["content"]
    chart, plain = results[0], results[1]
    assert chart["tool_use_id"] == "call_chart"
    text, image = chart["content"]
    assert text["type"] == "text"
    assert LEFT_OUT in text["text"]
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    }
    assert plain["content"] == "12 C"
