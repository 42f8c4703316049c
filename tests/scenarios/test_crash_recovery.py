"""SIGKILL at the worst moments, with real processes, then reopen.

The promise (README, "Durability"): with the SQLite file store, every event
a session reported is on disk; a process killed at any point loses nothing
that was reported, and a turn it cut off is closed when the session is
opened again, with any tool call it was running marked as interrupted
(outcome unknown) and not run again.
"""

from __future__ import annotations

import pytest

from turnlog import Agent, Message, Runtime, ScriptedModel, function_tool

pytestmark = pytest.mark.subprocess


def test_a_session_killed_between_turns_reopens_and_continues(
    sqlite_url: str, kill_child_at
) -> None:
    kill_child_at(sqlite_url, "crashy", "between-turns", "DONE")
    model = ScriptedModel(["second answer"])
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("assistant", model=model), session_id="crashy"
        )
        assert session.messages() == [
            Message.user("first question"),
            Message.assistant("first answer"),
        ]
        result = session.prompt("second question", timeout=10)
        assert result.final_output == "second answer"
        assert [m.content for m in session.messages()] == [
            "first question",
            "first answer",
            "second question",
            "second answer",
        ]
        assert [i["content"] for i in model.requests[0].items][:2] == [
            "first question",
            "first answer",
        ]


def test_a_tool_cut_off_by_a_kill_is_closed_as_interrupted_and_not_rerun(
    sqlite_url: str, kill_child_at
) -> None:
    kill_child_at(sqlite_url, "mid-tool", "in-tool", "TOOL STARTED")
    runs: list[str] = []

    @function_tool
    def write_file(path: str) -> str:
        """Would write a file; must not be called again after the crash."""
        runs.append(path)
        return "written"

    model = ScriptedModel(["recovered", "follow-up done"])
    agent = Agent("assistant", model=model, tools=[write_file])
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(agent, session_id="mid-tool")
        checkpoint = rt.checkpoints.load("mid-tool")
        assert checkpoint is not None
        assert checkpoint.running_turn is None
        outputs = [i for i in checkpoint.context if i["type"] == "function_call_output"]
        assert [o["output"] for o in outputs] == ["interrupted; outcome unknown"]
        replayed = [type(e.msg).__name__ for e in rt.replay_events("mid-tool")]
        assert replayed[-2:] == ["ToolCallFinishedMsg", "TurnAbortedMsg"]
        # the follow-up queued before the kill is still queued, and runs
        # behind the next prompt, as any follow-up queued while idle does
        assert [q.text for q in session.queued()] == ["queued before the kill"]
        result = session.prompt("carry on", timeout=10)
        assert result.final_output == "follow-up done"
        assert [m.content for m in session.messages()][-4:] == [
            "carry on",
            "recovered",
            "queued before the kill",
            "follow-up done",
        ]
        assert runs == []
        # the first request answers the cut-off call, so the context is valid
        sent = model.requests[0].items
        call = next(i for i in sent if i["type"] == "function_call")
        answer = next(i for i in sent if i["type"] == "function_call_output")
        assert answer["call_id"] == call["call_id"]
