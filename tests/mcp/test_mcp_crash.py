"""A turnlog process SIGKILLed during an MCP call, then reopened.

An MCP call is a tool call like any other: started and never finished, it
is closed as interrupted (outcome unknown) when the session is reopened,
and not run again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from turnlog import Agent, McpServer, RunConfig, Runtime, ScriptedModel

pytestmark = pytest.mark.subprocess

CHILD = Path(__file__).with_name("mcp_crash_child.py")


def kill_during_the_call(url: str, session_id: str, calls_log: Path) -> None:
    """Runs the child until its MCP call started, then SIGKILLs it."""
    with subprocess.Popen(
        [sys.executable, str(CHILD), url, session_id, str(calls_log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        server_pid = None
        try:
            seen = []
            for line in proc.stderr:
                seen.append(line)
                if "TOOL STARTED" in line:
                    server_pid = int(line.split()[-1])
                    break
            else:
                pytest.fail(f"child exited early ({proc.wait()}): {''.join(seen)}")
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=30)
            if server_pid is not None:  # orphaned by the kill: not left behind
                with contextlib.suppress(ProcessLookupError):
                    os.kill(server_pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL


def test_an_mcp_call_cut_off_by_a_kill_is_interrupted_and_not_rerun(
    sqlite_url: str, files: Any, stdio_server: Callable[..., McpServer]
) -> None:
    kill_during_the_call(sqlite_url, "mcp-crash", files.calls)
    assert files.called() == ["slow_mark"]
    model = ScriptedModel(["recovered"])
    agent = Agent("assistant", model=model, mcp_servers=[stdio_server()])
    config = RunConfig(approval_policy="allow")
    with Runtime.open(sqlite_url, run_config=config) as rt:
        session = rt.create_session(agent, session_id="mcp-crash")
        checkpoint = rt.checkpoints.load("mcp-crash")
        assert checkpoint is not None
        assert checkpoint.running_turn is None
        outputs = [i for i in checkpoint.context if i["type"] == "function_call_output"]
        assert [o["output"] for o in outputs] == ["interrupted; outcome unknown"]
        assert session.prompt("carry on", timeout=30).final_output == "recovered"
    assert files.called() == ["slow_mark"]  # not called again
