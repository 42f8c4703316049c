"""A tool's shared-state update is durable when the call to make it returns.

The child's tool records an update, says so, and is SIGKILLed while still
running; the session opened again holds the update, and the call is
closed as interrupted after it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from turnlog import Agent, Runtime, ScriptedModel

pytestmark = pytest.mark.subprocess

CHILD = Path(__file__).with_name("context_child.py")


def kill_after_update(url: str, session_id: str, mode: str) -> None:
    with subprocess.Popen(
        [sys.executable, str(CHILD), url, session_id, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            for line in proc.stdout:
                if line.startswith("UPDATED"):
                    break
            else:
                pytest.fail(f"child exited early ({proc.wait()}): {proc.stderr.read()}")
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("mode", ["sync-update", "async-update"])
def test_an_update_a_tool_made_survives_a_kill_before_its_output(
    store_url: str, mode: str
) -> None:
    kill_after_update(store_url, "ledger", mode)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("clerk", model=ScriptedModel(["unused"])), session_id="ledger"
        )
        assert session.shared_state()["booked"] == "acct-9"
        kinds = [type(e.msg).__name__ for e in rt.replay_events("ledger")]
        updated = kinds.index("SharedStateUpdatedMsg")
        finished = kinds.index("ToolCallFinishedMsg")
        assert updated < finished
        [closed] = [
            e.msg
            for e in rt.replay_events("ledger")
            if type(e.msg).__name__ == "ToolCallFinishedMsg"
        ]
        assert "interrupted" in str(closed)
