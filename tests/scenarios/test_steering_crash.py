"""A call a steer skipped is never run, even after a SIGKILL (README,
"Steering"; the crash rules are README "Durability")."""

from __future__ import annotations

import pytest

from turnlog import Agent, Runtime, ScriptedModel, function_tool
from turnlog.domain import protocol as p

pytestmark = pytest.mark.subprocess

SKIPPED = "skipped: the user steered the turn before this call started"


def test_a_skipped_call_stays_skipped_after_a_kill(
    store_url: str, kill_child_at
) -> None:
    kill_child_at(store_url, "steered", "steered", "STEERED")
    runs: list[str] = []

    @function_tool
    def write_file(path: str) -> str:
        """Would write a file; must not run again after the kill."""
        runs.append(path)
        return "written"

    model = ScriptedModel(["went on"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("assistant", model=model, tools=[write_file]), session_id="steered"
        )
        finished = [
            (e.msg.call_id, e.msg.output, e.msg.skipped)
            for e in rt.replay_events("steered")
            if isinstance(e.msg, p.ToolCallFinishedMsg)
        ]
        # c2 was answered when the steer came; c1, cut off, is closed as
        # interrupted when the session is opened again. Neither runs.
        assert finished == [
            ("c2", SKIPPED, "steered"),
            ("c1", "interrupted; outcome unknown", ""),
        ]
        assert [q.text for q in session.queued()] == ["only the first one"]
        result = session.prompt("carry on", timeout=10)
        assert result.final_output == "went on"
        assert runs == []
