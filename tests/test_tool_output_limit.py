"""A tool's output is cut to a limit before the model sees it or the log keeps it.

A 5 MB output of a function tool goes through a real session on each
store; the model's next request, the recorded ToolCallFinished and a
reopened log all hold the same cut output with its marker.
"""

from __future__ import annotations

import pytest

from turnlog import (
    Agent,
    InvalidInputError,
    McpServer,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.domain.tool_output import DEFAULT_MAX_TOOL_OUTPUT

FIVE_MB = 5 * 1024 * 1024


def _seen(model: ScriptedModel, request: int) -> dict[str, str]:
    return {
        i["call_id"]: i["output"]
        for i in model.requests[request].items
        if i["type"] == "function_call_output"
    }


def _recorded(rt: Runtime, session_id: str) -> dict[str, str]:
    return {
        e.msg.call_id: e.msg.output
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, p.ToolCallFinishedMsg)
    }


@function_tool
def dump() -> str:
    """Returns 5 MB."""
    return "x" * FIVE_MB


@function_tool(max_output=1_000, name="dump_small")
def dump_small() -> str:
    """Returns 5 MB, of which the model sees 1,000 characters."""
    return "y" * FIVE_MB


def test_a_5_mb_output_is_cut_to_the_limit_and_recorded_as_seen(store_url: str) -> None:
    model = ScriptedModel(
        [
            calls(
                tool_call("dump", {}, call_id="c1"),
                tool_call("dump_small", {}, call_id="c2"),
            ),
            "done",
        ]
    )
    agent = Agent("a", model=model, tools=[dump, dump_small])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("go", timeout=60).final_output == "done"
        seen = _seen(model, 1)
    big, small = seen["c1"], seen["c2"]
    assert big.startswith(
        "x" * DEFAULT_MAX_TOOL_OUTPUT + "\n[turnlog: tool output truncated"
    )
    assert f"{FIVE_MB - DEFAULT_MAX_TOOL_OUTPUT:,} of {FIVE_MB:,} characters cut" in big
    assert len(big) < DEFAULT_MAX_TOOL_OUTPUT + 200
    assert small.startswith("y" * 1_000 + "\n[turnlog: tool output truncated")
    assert "y" * 1_001 not in small
    # What the log keeps is what the model saw, read back by a new runtime.
    with Runtime.open(store_url) as rt:
        assert _recorded(rt, "s1") == {"c1": big, "c2": small}


def test_the_agent_sets_the_limit_for_its_tools_and_a_short_output_is_whole(
    sqlite_url: str,
) -> None:
    @function_tool
    def short() -> str:
        return "z" * 50

    model = ScriptedModel(
        [
            calls(
                tool_call("dump", {}, call_id="c1"),
                tool_call("short", {}, call_id="c2"),
            ),
            "ok",
        ]
    )
    agent = Agent("a", model=model, tools=[dump, short], max_tool_output=100)
    assert agent.clone(name="b").max_tool_output == 100
    # What the model may see shapes the agent; the default keeps old digests.
    default = Agent("a", model=model, tools=[dump, short])
    assert agent.digest() != default.digest()
    assert Agent(
        "a", model=model, tools=[dump, short], max_tool_output=None
    ).digest() == (default.digest())
    with Runtime.open(sqlite_url) as rt:
        rt.create_session(agent, session_id="s1").prompt("go", timeout=60)
    seen = _seen(model, 1)
    assert seen["c1"].startswith("x" * 100 + "\n[turnlog: tool output truncated:")
    assert seen["c2"] == "z" * 50  # under the limit: no marker


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "10"])
def test_a_limit_that_is_not_a_positive_int_is_refused(bad: object) -> None:
    model = ScriptedModel(["ok"])
    with pytest.raises(InvalidInputError, match="max_tool_output"):
        Agent("a", model=model, max_tool_output=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="max_output"):
        function_tool(name="t", max_output=bad)(lambda: "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="max_output"):
        McpServer.stdio("true", max_output=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="max_output"):
        McpServer.stdio("true", max_output={"t": bad})  # type: ignore[dict-item]
