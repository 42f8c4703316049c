"""Image and audio results of MCP tools reach the model as media parts,
recorded once in the log.

The real test server's ``picture`` tool answers text, a PNG and a WAV,
over stdio and over HTTP. What each provider sends of the media is
tested against the fake provider servers in tests/providers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.types import CallToolResult, ImageContent, TextContent
from mcp_server import PNG, WAV

from turnlog import (
    Agent,
    McpServer,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    tool_call,
)
from turnlog.domain.events import event_name
from turnlog.mcp.results import MAX_MEDIA_BYTES, tool_result

MakeServer = Callable[..., McpServer]
ALLOW = RunConfig(approval_policy="allow")
IMAGE = {"type": "image", "mime_type": "image/png", "data": PNG}
AUDIO = {"type": "audio", "mime_type": "audio/wav", "data": WAV}


def tool_outputs(model: ScriptedModel, request: int) -> list[dict[str, Any]]:
    items = model.requests[request].items
    return [i for i in items if i["type"] == "function_call_output"]


def test_images_and_audio_reach_the_model_and_are_stored_once(
    make_server: MakeServer,
) -> None:
    model = ScriptedModel(
        [calls(tool_call("srv_picture", {}, call_id="c1")), "a chart", "still"]
    )
    agent = Agent("a", model=model, mcp_servers=[make_server()])
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("draw", timeout=30).final_output == "a chart"
        assert session.prompt("again", timeout=30).final_output == "still"
        [output] = tool_outputs(model, 1)
        assert output["output"] == (
            "the chart\n[image 1: image/png, 70 bytes]\n[audio 2: audio/wav, 44 bytes]"
        )
        assert output["media"] == [IMAGE, AUDIO]
        assert tool_outputs(model, 2)[0]["media"] == [IMAGE, AUDIO]  # next turn
        # In the log, the bytes are in one event only, however many steps
        # and turns came after.
        stored = rt.store.notifications(1, 10_000)
        holding = [event_name(n.topic) for n in stored if PNG.encode() in n.state]
        assert holding == ["ToolCallFinished"]
        assert sum(WAV.encode() in n.state for n in stored) == 1
        checkpoint = rt.checkpoints.load("s1")
        assert checkpoint is not None
        [folded] = [i for i in checkpoint.context if i.get("media")]
        assert folded["media"] == [IMAGE, AUDIO]


def test_media_that_is_not_base64_or_too_large_is_left_out_with_a_line() -> None:
    big = "A" * (4 * (MAX_MEDIA_BYTES // 3 + 2))
    result = tool_result(
        CallToolResult(
            content=[
                TextContent(type="text", text="two"),
                ImageContent(type="image", data="not base64!", mime_type="image/png"),
                ImageContent(type="image", data=big, mime_type="image/png"),
            ]
        )
    )
    assert result.media == ()
    lines = result.output.splitlines()
    assert lines[0] == "two"
    assert lines[1] == "[image image/png left out: its data is not base64]"
    assert lines[2].startswith("[image image/png left out: ")
    assert "over the 5 MB limit" in lines[2]
