"""Images in tool outputs, as each API takes them; audio, and image types
the APIs do not read, left out with a line saying so.

Each request body is sent to the fake provider server and validated
against the official SDK's typed request params (strict: no unknown keys).
The last test runs the whole way: a real MCP server's image result, a
Runtime session, and each provider's next request.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, FakeOpenAI, Reply
from provider_support import make_provider, model_request, respond
from test_anthropic import PARAMS as ANTHROPIC_PARAMS
from test_wire_format import CHAT_PARAMS, RESPONSES_PARAMS, turnlog_keys

from turnlog import Agent, McpServer, RunConfig, Runtime
from turnlog.domain.model import function_call, function_call_output, user_message

sys.path.insert(0, str(Path(__file__).parents[1] / "mcp"))

from mcp_server import PNG
from mcp_support import SERVER

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
    assert outputs[1]["output"] == "12 C"  # no media: plain text


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


VALIDATORS = {
    "responses": RESPONSES_PARAMS,
    "chat": CHAT_PARAMS,
    "anthropic": ANTHROPIC_PARAMS,
}


def image_sent(dialect: str, body: dict[str, Any]) -> list[Any]:
    """The image parts of a request body, wherever the dialect puts them."""
    if dialect == "responses":
        return [
            part
            for item in body["input"]
            if item["type"] == "function_call_output"
            and isinstance(item["output"], list)
            for part in item["output"]
            if part["type"] == "input_image"
        ]
    if dialect == "chat":
        return [
            part
            for message in body["messages"]
            if message["role"] == "user" and isinstance(message["content"], list)
            for part in message["content"]
            if part["type"] == "image_url"
        ]
    return [
        block
        for message in body["messages"]
        for result in message["content"]
        if isinstance(result, dict) and result.get("type") == "tool_result"
        for block in result["content"]
        if isinstance(block, dict) and block["type"] == "image"
    ]


def test_an_mcp_image_reaches_each_provider_as_image_input(
    dialect: str, fake: FakeOpenAI
) -> None:
    server = McpServer.stdio(sys.executable, [str(SERVER), "stdio"], name="srv")
    provider = make_provider(dialect, fake.base_url)
    fake.script(Reply(calls=(Call("call_1", "srv_picture", "{}"),)), Reply(text="ok"))
    rt = Runtime.open("memory://", run_config=RunConfig(approval_policy="allow"))
    try:
        agent = Agent("a", model=provider, mcp_servers=[server])
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("draw", timeout=60).final_output == "ok"
    finally:
        provider.close()
        rt.close()
        server.close()
    body = fake.requests[1].body
    VALIDATORS[dialect].validate_python(body)
    [image] = image_sent(dialect, body)
    if dialect == "anthropic":
        assert image["source"]["media_type"] == "image/png"
        assert image["source"]["data"] == PNG
    else:
        url = (
            image["image_url"] if dialect == "responses" else image["image_url"]["url"]
        )
        assert url == PNG_URL
    assert "audio/wav audio" in str(body)  # left out, and said so
