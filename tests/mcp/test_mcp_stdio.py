"""A stdio server's own streams: its stderr stays off turnlog's terminal,
bad bytes on its stdout do not wedge it, and a server that stops
answering after a timed-out call is started again.

Each test runs the real test server (tests/mcp/mcp_server.py) over stdio.
"""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp_support import SERVER

from turnlog import (
    Agent,
    McpServer,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    tool_call,
)
from turnlog.mcp import stdio as mcp_stdio
from turnlog.mcp.link import BAD_BYTES_NOTE, McpLink
from turnlog.mcp.stdio import BadBytes
from turnlog.mcp.targets import StdioTarget

pytestmark = pytest.mark.subprocess

MakeServer = Callable[..., McpServer]
ALLOW = RunConfig(approval_policy="allow")
CHILD = Path(__file__).with_name("mcp_quiet_child.py")


def outputs(model: ScriptedModel, request: int) -> dict[str, str]:
    """Tool outputs the model saw in a request, by call id."""
    items = model.requests[request].items
    return {
        i["call_id"]: i["output"] for i in items if i["type"] == "function_call_output"
    }


def run_child(files: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs the quiet child with its stdout and stderr captured (its terminal)."""
    return subprocess.run(
        [sys.executable, str(CHILD), str(files.calls), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_servers_stderr_goes_to_its_log_file_not_the_terminal(
    files: Any, tmp_path: Path
) -> None:
    log = tmp_path / "logs" / "srv.log"  # the folder is made as needed
    child = run_child(files, str(log))
    assert child.returncode == 0, child.stderr
    assert child.stdout == "done\n"
    assert child.stderr == ""
    assert files.called() == ["noisy"]
    written = log.read_text()
    assert "turnlog started python" in written.splitlines()[0]
    assert "turnlog-test MCP server started on stdio" in written
    assert "NOISE hello" in written


def test_without_a_log_file_the_terminal_stays_clean_too(files: Any) -> None:
    child = run_child(files)
    assert child.returncode == 0, child.stderr
    assert (child.stdout, child.stderr) == ("done\n", "")
    assert files.called() == ["noisy"]


def test_without_a_log_file_each_stderr_line_goes_to_the_logger(
    stdio_server: MakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="turnlog.mcp")
    server = stdio_server()
    model = ScriptedModel([calls(tool_call("srv_noisy", {"text": "logged"})), "ok"])
    agent = Agent("a", model=model, mcp_servers=[server])
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        rt.create_session(agent, session_id="s1").prompt("go", timeout=30)
    server.close()  # the server's last lines are logged before close returns
    lines = [r.getMessage() for r in caplog.records if r.name == "turnlog.mcp"]
    assert "MCP server 'srv': NOISE logged" in lines
    assert "MCP server 'srv': turnlog-test MCP server started on stdio" in lines


def test_bad_bytes_become_replacement_characters_and_the_server_goes_on(
    stdio_server: MakeServer, files: Any
) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("srv_bad_bytes", {}, call_id="c1")),
            calls(tool_call("srv_echo", {"text": "later"}, call_id="c2")),
            "done",
        ]
    )
    # A short timeout: the old strict decoding wedged the server, and every
    # later call timed out.
    server = stdio_server(timeout=10)
    agent = Agent("a", model=model, mcp_servers=[server])
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("go", timeout=60).final_output == "done"
        # ED A0 80: three bytes that are not UTF-8, three replacements.
        bad = "before \ufffd\ufffd\ufffd after"
        assert outputs(model, 1)["c1"] == f"{bad}\n{BAD_BYTES_NOTE}"
        assert outputs(model, 2)["c2"] == "echo: later"
    assert files.called() == ["bad_bytes", "echo"]


def test_a_server_frozen_past_the_timeout_is_started_again(
    stdio_server: MakeServer, files: Any
) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("srv_pid", {}, call_id="c1")),
            calls(tool_call("srv_freeze", {}, call_id="c2")),
            calls(tool_call("srv_pid", {}, call_id="c3")),
            "done",
        ]
    )
    server = stdio_server(timeout=6)  # the check after it: 1.5 s
    agent = Agent("a", model=model, mcp_servers=[server])
    with Runtime.open("memory://", run_config=ALLOW) as rt:
        session = rt.create_session(agent, session_id="s1")
        assert session.prompt("go", timeout=60).final_output == "done"
        frozen = int(outputs(model, 1)["c1"])
        assert outputs(model, 2)["c2"] == "tool timed out after 6 s"
        restarted = int(outputs(model, 3)["c3"])  # answered, by a new process
        assert restarted != frozen
    server.close()
    assert files.called() == ["pid", "freeze", "pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(frozen, 0)  # the frozen process was stopped, not left behind


def test_a_links_decoding_counts_bad_bytes_and_its_handler_name_is_reused() -> None:
    counter = BadBytes()
    decoded = b"ok \xed\xa0\x80".decode("utf-8", errors=counter.handler_name)
    assert decoded == "ok \ufffd\ufffd\ufffd"
    assert counter.count == 3
    name = counter.handler_name
    del counter
    gc.collect()
    # codecs cannot forget a handler: a new link takes a free name over
    # (this one, or another link's that was collected too).
    free = set(mcp_stdio._free_names)
    assert name in free
    fresh = BadBytes()
    assert fresh.handler_name in free
    assert b"\xff".decode("utf-8", errors=name) == "\ufffd"  # still replaces


def test_a_call_made_right_after_a_cancelled_one_waits_for_the_check(
    files: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # No model step in between: the cancelled request is still unwinding
    # when the next call comes, and that call must not go to the frozen
    # process.
    target = StdioTarget(sys.executable, (str(SERVER), "stdio"), files.env, None)
    link = McpLink("srv", target, check_timeout=1.0)
    caplog.set_level(logging.INFO, logger="turnlog.mcp")  # restored after
    freezing = SeenOnStderr("FREEZING")
    logging.getLogger("turnlog.mcp").addHandler(freezing)
    try:
        frozen = int(link.call_tool("pid", {}).result(30).output)
        stuck = link.call_tool("freeze", {})
        assert freezing.seen.wait(30)  # the server's loop is blocked now
        stuck.cancel()
        answer = link.call_tool("pid", {}).result(30)
        assert not answer.is_error, answer.output
        assert int(answer.output) != frozen
    finally:
        logging.getLogger("turnlog.mcp").removeHandler(freezing)
        link.close()


class SeenOnStderr(logging.Handler):
    """Sets ``seen`` once a server's stderr line holding ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.INFO)
        self.text = text
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()
