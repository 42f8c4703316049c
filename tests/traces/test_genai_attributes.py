"""Model calls and tool calls as the OpenTelemetry GenAI conventions name them.

The model a provider was asked for and the one that answered are recorded
in the log with each step, so live and offline traces read them from there;
MCP tools are typed ``extension`` and name their server.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from turnlog import (
    Agent,
    McpServer,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import turn_events as t
from turnlog.domain.model import ModelRequest, ModelResponse, assistant_message
from turnlog.providers import (
    AnthropicMessagesProvider,
    HttpModelProvider,
    OpenAIChatCompletionsProvider,
    OpenAIResponsesProvider,
)
from turnlog.traces import session_events, session_spans

MCP_SERVER = Path(__file__).parents[1] / "mcp" / "mcp_server.py"
"""The MCP test server (the SDK's MCPServer), run over stdio."""

ASKED = "gpt-4.1-mini"
ANSWERED = "gpt-4.1-mini-2025-04-14"
"""Providers answer with a dated snapshot of the alias they were asked for."""


def _sse(*events: dict[str, object]) -> bytes:
    return b"".join(f"data: {json.dumps(event)}\n\n".encode() for event in events)


def _chat_stream() -> bytes:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": ANSWERED,
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
    }
    return _sse(chunk) + b"data: [DONE]\n\n"


def _responses_stream() -> bytes:
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi"}],
    }
    response = {"model": ANSWERED, "status": "completed", "output": [message]}
    return _sse(
        {"type": "response.output_text.delta", "output_index": 0, "delta": "hi"},
        {"type": "response.completed", "response": response},
    )


def _anthropic_stream() -> bytes:
    return _sse(
        {
            "type": "message_start",
            "message": {"model": ANSWERED, "usage": {"input_tokens": 3}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "hi"},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    )


def _answering(body: bytes) -> httpx.MockTransport:
    def handle(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=body, headers={"content-type": "text/event-stream"}
        )

    return httpx.MockTransport(handle)


PROVIDERS: dict[str, tuple[Callable[[httpx.MockTransport], HttpModelProvider], str]] = {
    "chat": (
        lambda transport: OpenAIChatCompletionsProvider(ASKED, transport=transport),
        "openai",
    ),
    "responses": (
        lambda transport: OpenAIResponsesProvider(ASKED, transport=transport),
        "openai",
    ),
    "anthropic": (
        lambda transport: AnthropicMessagesProvider(
            ASKED, api_key="k", transport=transport
        ),
        "anthropic",
    ),
}
STREAMS = {
    "chat": _chat_stream,
    "responses": _responses_stream,
    "anthropic": _anthropic_stream,
}


@pytest.mark.parametrize("dialect", sorted(PROVIDERS))
def test_a_chat_span_names_the_model_asked_for_the_one_that_answered_and_whose(
    dialect: str,
) -> None:
    make, provider_name = PROVIDERS[dialect]
    provider = make(_answering(STREAMS[dialect]()))
    agent = Agent("a", model=provider)  # on the route "default"
    with Runtime.open("memory://") as rt:
        try:
            rt.create_session(agent, session_id="s").prompt("hi", timeout=30)
        finally:
            provider.close()
        events = session_events(rt.store, "s")
        spans = session_spans(rt, "s")
    # The log holds the facts, per step.
    [step] = [e for e in events if isinstance(e, t.ModelStepStarted)]
    assert (step.route, step.model, step.provider) == ("default", ASKED, provider_name)
    [chat] = [span for span in spans if span.kind == "client"]
    assert chat.name == f"chat {ASKED}"
    assert chat.attributes["gen_ai.request.model"] == ASKED
    assert chat.attributes["gen_ai.response.model"] == ANSWERED
    assert chat.attributes["gen_ai.provider.name"] == provider_name
    assert chat.attributes["turnlog.model.route"] == "default"


def test_the_scripted_model_says_it_is_a_script() -> None:
    model = ScriptedModel(["one"], model="canned")
    with Runtime.open("memory://") as rt:
        rt.create_session(Agent("a", model=model), session_id="s").prompt("hi")
        [chat] = [span for span in session_spans(rt, "s") if span.kind == "client"]
        completed = [
            e
            for e in session_events(rt.store, "s")
            if isinstance(e, t.ModelStepCompleted)
        ]
    assert chat.name == "chat canned"
    assert chat.attributes["gen_ai.provider.name"] == "turnlog.scripted"
    assert chat.attributes["gen_ai.response.model"] == "canned"
    assert [e.response_model for e in completed] == ["canned"]


@function_tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def test_an_mcp_tool_is_an_extension_of_its_server_and_a_function_tool_a_function(
    tmp_path: Path,
) -> None:
    server = McpServer.stdio(
        sys.executable,
        [str(MCP_SERVER), "stdio"],
        name="srv",
        env={
            "MCP_TEST_MARK": str(tmp_path / "calls.log"),
            "MCP_TEST_EXTRA_TOOLS": str(tmp_path / "extra"),
        },
    )
    model = ScriptedModel(
        [
            calls(
                tool_call("srv_echo", {"text": "hi"}, call_id="m1"),
                tool_call("add", {"a": 1, "b": 2}, call_id="f1"),
            ),
            "done",
        ]
    )
    agent = Agent("a", model=model, tools=[add], mcp_servers=[server])
    allow = RunConfig(approval_policy="allow")
    try:
        with Runtime.open("memory://", run_config=allow) as rt:
            session = rt.create_session(agent, session_id="s")
            assert session.prompt("go", timeout=30).final_output == "done"
            spans = session_spans(rt, "s")
            started = {
                e.call_id: e
                for e in session_events(rt.store, "s")
                if isinstance(e, t.ToolCallStarted)
            }
    finally:
        server.close()
    assert (started["m1"].tool_type, started["m1"].mcp_server) == ("extension", "srv")
    assert (started["f1"].tool_type, started["f1"].mcp_server) == ("function", "")
    tools = {
        span.attributes["gen_ai.tool.call.id"]: span.attributes
        for span in spans
        if span.name.startswith("execute_tool ")
    }
    assert tools["m1"]["gen_ai.tool.type"] == "extension"
    assert tools["m1"]["turnlog.mcp.server"] == "srv"
    assert tools["f1"]["gen_ai.tool.type"] == "function"
    assert "turnlog.mcp.server" not in tools["f1"]


class OwnModel:
    """A provider of one's own: it may name its model, or say nothing."""

    def __init__(self, model: str | None) -> None:
        if model is not None:
            self.model = model

    async def respond(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse((assistant_message("ok"),))


@pytest.mark.parametrize(
    ("model", "name"), [("local-7b", "chat local-7b"), (None, "chat")]
)
def test_a_provider_of_ones_own_is_named_by_what_it_says(
    model: str | None, name: str
) -> None:
    with Runtime.open("memory://") as rt:
        agent = Agent("a", model=OwnModel(model))
        rt.create_session(agent, session_id="s").prompt("hi", timeout=30)
        [chat] = [span for span in session_spans(rt, "s") if span.kind == "client"]
    assert chat.name == name
    assert chat.attributes.get("gen_ai.request.model") == model
    assert "gen_ai.provider.name" not in chat.attributes
    assert "gen_ai.response.model" not in chat.attributes  # the answer named none
    assert chat.attributes["turnlog.model.route"] == "default"
