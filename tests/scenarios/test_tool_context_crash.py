"""A tool's shared-state update is durable when the call to make it returns.

The child's tool records an update, says so, and is SIGKILLed while still
running; the session opened again holds the update, and the call is
closed as interrupted after it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kill_support import kill_when  # scenarios/conftest puts this folder on sys.path

from turnlog import Agent, Runtime, ScriptedModel

pytestmark = pytest.mark.subprocess

CHILD = Path(__file__).with_name("context_child.py")


def kill_after_update(url: str, session_id: str, mode: str) -> None:
    kill_when(CHILD, "UPDATED", url, session_id, mode)


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
