"""Turns a SIGKILL left waiting resume when the session is opened again:
a pending approval can still be decided, an idempotent tool runs again."""

from __future__ import annotations

import threading

import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    RunEvent,
    RunFinished,
    Runtime,
    ScriptedModel,
    function_tool,
)
from turnlog.domain import protocol as p
from turnlog.testing import HeldModel, wait_for

pytestmark = pytest.mark.subprocess


def test_a_pending_approval_survives_a_kill_and_accepts_the_decision(
    sqlite_url: str, kill_child_at
) -> None:
    kill_child_at(sqlite_url, "waiting", "pending-approval", "PENDING")
    ran: list[str] = []

    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Needs approval."""
        ran.append(target)
        return f"deployed {target}"

    model = ScriptedModel(["deployed it", "reported"])
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("assistant", model=model, tools=[deploy]), session_id="waiting"
        )
        (pending,) = session.pending_approvals()
        assert (pending.tool_name, pending.arguments) == ("deploy", '{"target":"prod"}')
        assert rt.checkpoints.load("waiting").pending_approval["name"] == "deploy"
        assert session.running()
        assert [q.text for q in session.queued()] == ["then report"]
        events = session.subscribe()
        session.approve(pending.request_id, ApprovalDecision.allow())
        finished, _ = wait_for(events, lambda m: isinstance(m, RunFinished))
        assert ran == ["prod"]
        # the resumed turn finished, then the follow-up queued before the kill
        assert finished.result.final_output == "reported"
        assert [m.content for m in session.messages()][-3:] == [
            "deployed it",
            "then report",
            "reported",
        ]


def test_an_idempotent_tool_cut_off_by_a_kill_runs_again(
    sqlite_url: str, kill_child_at
) -> None:
    kill_child_at(sqlite_url, "idem", "idempotent-tool", "TOOL STARTED")
    release = threading.Event()
    ran: list[str] = []

    @function_tool(idempotent=True)
    def refresh_cache(key: str) -> str:
        """Safe to run twice."""
        ran.append(key)
        release.wait(10)
        return "refreshed"

    held = HeldModel(ScriptedModel(["cache refreshed"]))
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("assistant", model=held, tools=[refresh_cache]), session_id="idem"
        )
        events = session.subscribe()
        release.set()
        held.release()
        finished, seen = wait_for(events, lambda m: isinstance(m, RunFinished))
        assert ran == ["k1"]
        assert finished.result.final_output == "cache refreshed"
        ends = [
            item.event.msg
            for item in seen
            if isinstance(item, RunEvent)
            and isinstance(item.event.msg, p.ToolCallFinishedMsg)
        ]
        assert [(e.name, e.output, e.is_error) for e in ends] == [
            ("refresh_cache", "refreshed", False)
        ]
        warnings = [
            e.msg.message
            for e in rt.replay_events("idem")
            if isinstance(e.msg, p.WarningRaisedMsg)
        ]
        assert warnings == [
            "the process stopped during this turn; it resumed on reopening"
        ]
