"""MCP servers' tools in turnlog sessions, over stdio and streamable HTTP.

Each test runs against a real MCP server (tests/mcp/mcp_server.py) in a
subprocess, once over stdio and once over HTTP on 127.0.0.1, with a
ScriptedModel that calls its tools through a session.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    InvalidInputError,
    McpServer,
    McpServerError,
    RunConfig,
    RunResult,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.testing import wait_for

MakeServer = Callable[..., McpServer]
ALLOW = RunConfig(approval_policy="allow")
PRE_MCP_DIGEST = "af998c48ad4e0f94"  # computed on the code before MCP support


def outputs(model: ScriptedModel, request: int) -> list[tuple[str, str]]:
    """(call id, output) of each tool output the model saw in a request."""
    items = model.requests[request].items
    return [
        (i["call_id"], i["output"])
        for i in items
        if i["type"] == "function_call_output"
    ]


def ends(rt: Runtime, session_id: str) -> dict[str, p.ToolCallFinishedMsg]:
    return {
        e.msg.call_id: e.msg
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, p.ToolCallFinishedMsg)
    }


def test_the_servers_tools_become_tools_with_their_schemas(
    make_server: MakeServer,
) -> None:
    server = make_server()
    tools = {tool.name: tool for tool in server.tools()}
    assert {"srv_echo", "srv_weather", "srv_fail", "srv_hang"} <= set(tools)
    echo = tools["srv_echo"]
    assert echo.remote_name == "echo"
    assert echo.spec.description == "Says the text back."
    assert echo.spec.parameters["type"] == "object"
    assert echo.spec.parameters["required"] == ["text"]
    assert echo.spec.parameters["properties"]["text"]["type"] == "string"
    assert echo.requires_approval("{}")  # MCP tools ask by default
    assert not echo.idempotent
    assert echo.timeout == 60.0


def test_text_structured_and_error_results_are_tool_outputs(
    make_server: MakeServer, files: Any
) -> None:
    model = ScriptedModel(
        [
            calls(
                tool_call("srv_echo", {"text": "hi"}, call_id="c1"),
                tool_call("srv_weather", {"city": "Oslo"}, call_id="c2"),
                tool_call("srv_fail", {"reason": "no"}, call_id="c3"),
            ),
            "done",
        ]
    )
    agent = Agent("a", model=model, mcp_servers=[make_server()])
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("go", timeout=30).final_output == "done"
        seen = dict(outputs(model, 1))
        assert seen["c1"] == "echo: hi"
        assert json.loads(seen["c2"]) == {"city": "Oslo", "celsius": 21.5}
        assert "refused: no" in seen["c3"]
        recorded = ends(rt, "s1")
        assert [recorded[c].is_error for c in ("c1", "c2", "c3")] == [
            False,
            False,
            True,
        ]
        assert recorded["c1"].name == "srv_echo"
    # The three calls run concurrently: each ran once, in any order.
    assert sorted(files.called()) == ["echo", "fail", "weather"]


def test_an_unlisted_tool_asks_and_a_listed_one_runs_unasked(
    make_server: MakeServer, files: Any
) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("srv_echo", {"text": "asked"}, call_id="c1")),
            calls(tool_call("srv_weather", {"city": "Rome"}, call_id="c2")),
            "done",
        ]
    )
    server = make_server(run_unasked=["weather"])
    agent = Agent("a", model=model, mcp_servers=[server])
    with Runtime.open("memory://") as rt:
        session = rt.create_session(agent, session_id="s1")
        events = session.subscribe()
        results: list[RunResult] = []
        prompting = threading.Thread(
            target=lambda: results.append(session.prompt("go", timeout=30))
        )
        prompting.start()
        asked, _ = wait_for(events, lambda m: isinstance(m, p.ApprovalRequestedMsg))
        assert asked.event.msg.name == "srv_echo"
        assert files.called() == []  # nothing ran before the decision
        session.approve(asked.event.msg.request_id, ApprovalDecision.allow())
        prompting.join(30)
        events.close()
        assert results[0].final_output == "done"
        assert outputs(model, 1) == [("c1", "echo: asked")]
        requested = [
            e.msg.name
            for e in rt.replay_events("s1")
            if isinstance(e.msg, p.ApprovalRequestedMsg)
        ]
        assert requested == ["srv_echo"]  # weather, listed, did not ask
    assert files.called() == ["echo", "weather"]


def test_read_only_hints_count_only_when_the_user_trusts_them(
    make_server: MakeServer,
) -> None:
    # The test server annotates pid readOnlyHint, and echo not.
    default = {tool.remote_name: tool for tool in make_server().tools()}
    assert default["pid"].requires_approval("{}")
    assert default["echo"].requires_approval("{}")
    trusting = make_server(trust_read_only_hints=True).tools()
    trusted = {tool.remote_name: tool for tool in trusting}
    assert not trusted["pid"].requires_approval("{}")
    assert trusted["echo"].requires_approval("{}")
    assert trusted["noisy"].requires_approval("{}")


def test_needs_approval_is_refused_naming_run_unasked() -> None:
    for make in (
        lambda: McpServer.stdio("server", needs_approval=["write_file"]),
        lambda: McpServer.http("http://127.0.0.1:1/mcp", needs_approval=False),
    ):
        with pytest.raises(InvalidInputError, match="run_unasked"):
            make()


def test_a_hung_call_times_out_as_an_error_and_the_turn_goes_on(
    make_server: MakeServer,
) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("srv_hang", {}, call_id="c1")),
            calls(tool_call("srv_echo", {"text": "still here"}, call_id="c2")),
            "done",
        ]
    )
    server = make_server(timeout=0.5)
    agent = Agent("a", model=model, mcp_servers=[server])
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("go", timeout=30).final_output == "done"
        assert outputs(model, 1) == [("c1", "tool timed out after 0.5 s")]
        # the connection outlives a timed-out call
        assert outputs(model, 2)[-1] == ("c2", "echo: still here")


def test_a_server_that_dies_mid_call_is_an_error_output_not_a_hang(
    make_server: MakeServer, files: Any, request: pytest.FixtureRequest
) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("srv_die", {}, call_id="c1")),
            calls(tool_call("srv_echo", {"text": "again"}, call_id="c2")),
            "done",
        ]
    )
    agent = Agent("a", model=model, mcp_servers=[make_server()])
    over_stdio = "http_process" not in request.fixturenames
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("go", timeout=30).final_output == "done"
        [(call, output)] = outputs(model, 1)
        assert call == "c1"
        assert output.startswith("MCP server 'srv' failed:")
        assert ends(rt, "s1")["c1"].is_error
        call, output = outputs(model, 2)[-1]
        if over_stdio:  # the next call started a new server process
            assert output == "echo: again"
        else:  # nothing listens any more: an error output again, not a hang
            assert output.startswith(
                ("MCP server 'srv' failed:", "MCP server 'srv' did not start:")
            )
    assert files.called() == (["die", "echo"] if over_stdio else ["die"])


def test_a_second_session_sees_a_changed_tool_list_after_refresh(
    make_server: MakeServer, files: Any, request: pytest.FixtureRequest
) -> None:
    server = make_server()
    model = ScriptedModel(
        [
            "first",
            calls(tool_call("srv_extra_add", {"a": 2, "b": 3})),
            "second",
            "first again",
        ]
    )
    agent = Agent("a", model=model, mcp_servers=[server])
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        first = rt.create_session(agent, session_id="s1")
        assert first.prompt("hi", timeout=30).final_output == "first"
        assert "srv_extra_add" not in {t.name for t in model.requests[0].tools}
        files.extra.touch()  # the server offers extra_add once restarted
        if "http_process" in request.fixturenames:
            process = request.getfixturevalue("http_process")
            process.start()
            server = McpServer.http(process.url, name="srv")
            agent = agent.clone(mcp_servers=[server])
        else:
            server.restart()
        server.refresh()
        second = rt.create_session(agent, session_id="s2")
        assert second.prompt("add", timeout=30).final_output == "second"
        assert "srv_extra_add" in {t.name for t in model.requests[1].tools}
        assert outputs(model, 2)[0][1] == "5"
        # the first session keeps the list it started with
        assert first.prompt("again", timeout=30).final_output == "first again"
        assert "srv_extra_add" not in {t.name for t in model.requests[3].tools}
        server.close()


def test_a_server_that_does_not_start_fails_the_session_start_and_writes_nothing(
    tmp_path: Any,
) -> None:
    server = McpServer.stdio(str(tmp_path / "no-such-server"), name="gone")
    agent = Agent("a", model=ScriptedModel([]), mcp_servers=[server])
    with Runtime.open("memory://") as rt:
        with pytest.raises(McpServerError, match="'gone' did not start"):
            rt.create_session(agent, session_id="s1")
        assert rt.sessions() == []
    server.close()


def test_runtime_close_stops_the_server_process(
    stdio_server: MakeServer,
) -> None:
    import os

    server = stdio_server()
    model = ScriptedModel([calls(tool_call("srv_pid", {})), "done"])
    agent = Agent("a", model=model, mcp_servers=[server])
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        rt.create_session(agent, session_id="s1").prompt("go", timeout=30)
        pid = int(outputs(model, 1)[0][1])
        os.kill(pid, 0)  # running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_tool_names_that_clash_are_refused_at_session_start(
    stdio_server: MakeServer,
) -> None:
    @function_tool
    def echo(text: str) -> str:
        """A function tool named like the server's tool."""
        return text

    server = stdio_server(tool_prefix="")
    agent = Agent("a", model=ScriptedModel([]), tools=[echo], mcp_servers=[server])
    with Runtime.open("memory://") as rt:
        with pytest.raises(McpServerError, match="'echo' of server 'srv' clashes"):
            rt.create_session(agent, session_id="s1")
        assert rt.sessions() == []


def test_an_agent_without_mcp_servers_keeps_its_digest() -> None:
    @function_tool
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    agent = Agent("a", model=ScriptedModel([]), instructions="be brief", tools=[add])
    assert agent.digest() == PRE_MCP_DIGEST
    with_server = agent.clone(mcp_servers=[McpServer.http("http://127.0.0.1:1/mcp")])
    assert with_server.digest() != agent.digest()


def test_bad_server_settings_are_refused_at_once() -> None:
    with pytest.raises(InvalidInputError):
        McpServer.http("ftp://example.com/mcp")
    with pytest.raises(InvalidInputError):
        McpServer.stdio("")
    with pytest.raises(InvalidInputError):
        McpServer.stdio("server", "--flag")  # a str, not a list of args
    with pytest.raises(InvalidInputError):
        McpServer.stdio("server", name="no spaces")
    with pytest.raises(InvalidInputError):
        McpServer.stdio("server", timeout=0)
    with pytest.raises(InvalidInputError):
        McpServer.stdio("server", run_unasked="echo")  # a str, not a list
    with pytest.raises(InvalidInputError):
        McpServer.stdio("server", trust_read_only_hints="yes")  # type: ignore[arg-type]
    twin = McpServer.stdio("server")
    with pytest.raises(InvalidInputError, match="two MCP servers"):
        Agent(
            "a", model=ScriptedModel([]), mcp_servers=[twin, McpServer.stdio("server")]
        )


def test_a_5_mb_mcp_output_is_cut_like_a_function_tools(
    make_server: MakeServer, sqlite_url: str
) -> None:
    from turnlog.domain.tool_output import DEFAULT_MAX_TOOL_OUTPUT

    five_mb = 5 * 1024 * 1024
    model = ScriptedModel(
        [
            calls(
                tool_call("srv_big", {"size": five_mb}, call_id="c1"),
                tool_call("srv_big", {"size": 50}, call_id="c2"),
                tool_call("srv_echo", {"text": "a" * 100}, call_id="c3"),
            ),
            "done",
        ]
    )
    server = make_server(max_output={"echo": 20})  # per tool; big: the agent's
    agent = Agent("a", model=model, mcp_servers=[server])
    with Runtime.open(sqlite_url, run_config=ALLOW) as rt:
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("go", timeout=60).final_output == "done"
        seen = dict(outputs(model, 1))
        recorded = ends(rt, "s1")
    assert len(seen["c2"]) == 50  # under the limit: whole, no marker
    head, marker = seen["c1"].rsplit("\n[turnlog: ", 1)
    assert len(head) == DEFAULT_MAX_TOOL_OUTPUT
    assert head.startswith(seen["c2"])
    assert marker.startswith(
        f"tool output truncated: {five_mb - DEFAULT_MAX_TOOL_OUTPUT:,} of "
        f"{five_mb:,} characters cut"
    )
    assert seen["c3"].startswith("echo: " + "a" * 14 + "\n[turnlog: tool output")
    assert {c: recorded[c].output for c in ("c1", "c2", "c3")} == seen
