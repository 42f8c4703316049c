"""A SIGKILL while an agent tool's child session runs: the revived parent
takes the child's recorded outcome, and the child's finished work is never
redone. Killed at each point: the child created but not prompted, the child
mid-turn (in a tool call), the child finished but the parent's call not
yet recorded; on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents_crash_child import CHILD, PARENT, agents, ask_child  # scenarios/conftest
from kill_support import kill_when  # scenarios/conftest puts this folder on sys.path

from turnlog import ApprovalDecision, ApprovalRequest, RunConfig, RunFinished, Runtime
from turnlog.domain import protocol as p
from turnlog.testing import wait_for

SCRIPT = Path(__file__).with_name("agents_crash_child.py")

pytestmark = pytest.mark.subprocess


def _kill_at(url: str, mode: str, marker: str) -> None:
    kill_when(SCRIPT, marker, url, mode)


def _revive(
    url: str, mode: str, child_answers: list[Any], config: RunConfig | None = None
) -> tuple[Runtime, Any]:
    """Opens the parent again; its interrupted call runs again. Returns the
    runtime and how the resumed run ended."""
    lead = agents(
        mode,
        child_answers=child_answers,
        lead_answers=["the lead's answer"],
        live=False,
    )
    rt = Runtime.open(url, run_config=config)
    try:
        session = rt.create_session(lead, session_id=PARENT)
        events = session.subscribe()
        if session.running():
            finished, _ = wait_for(events, lambda m: isinstance(m, RunFinished), 30)
        else:
            finished = None
        events.close()
    except BaseException:
        rt.close()
        raise
    return rt, finished


def _calls_of(rt: Runtime, session_id: str) -> list[tuple[str, str, bool]]:
    return [
        (e.msg.name, e.msg.output, e.msg.is_error)
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, p.ToolCallFinishedMsg)
    ]


def _prompts_of(rt: Runtime, session_id: str) -> list[str]:
    return [
        e.msg.text
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, p.InputAcceptedMsg)
    ]


def test_a_child_created_but_not_prompted_is_prompted_once(store_url: str) -> None:
    _kill_at(store_url, "child-created", "CHILD CREATED")
    rt, finished = _revive(store_url, "child-created", ["a durable agent runtime"])
    with rt:
        assert finished is not None
        assert finished.result.final_output == "the lead's answer"
        assert _prompts_of(rt, CHILD) == ["what is turnlog?"]
        assert _calls_of(rt, PARENT) == [("research", "a durable agent runtime", False)]
        assert [c.session_id for c in rt.children(PARENT)] == [CHILD]


def test_a_child_killed_mid_turn_answers_the_parent_with_its_failure(
    store_url: str,
) -> None:
    _kill_at(store_url, "child-mid-turn", "CHILD TOOL STARTED")
    # No answer is scripted for the child: its turn must not run again.
    rt, finished = _revive(store_url, "child-mid-turn", [])
    with rt:
        assert finished is not None
        assert finished.result.final_output == "the lead's answer"
        (child_call,) = _calls_of(rt, CHILD)
        assert child_call == ("look_up", "interrupted; outcome unknown", True)
        ((name, output, is_error),) = _calls_of(rt, PARENT)
        assert (name, is_error) == ("research", True)
        assert output == (
            f"child session {CHILD} failed: "
            "the process stopped while this turn was running"
        )
        assert _prompts_of(rt, CHILD) == ["what is turnlog?"]


def test_a_finished_child_is_not_run_again(store_url: str) -> None:
    _kill_at(store_url, "child-finished", "CHILD FINISHED")
    # No answer is scripted for the child: it must not be asked again.
    rt, finished = _revive(store_url, "child-finished", [])
    with rt:
        assert finished is not None
        assert finished.result.final_output == "the lead's answer"
        assert _calls_of(rt, PARENT) == [("research", "a durable agent runtime", False)]
        assert _prompts_of(rt, CHILD) == ["what is turnlog?"]
        completed = [
            e for e in rt.replay_events(CHILD) if isinstance(e.msg, p.TurnCompletedMsg)
        ]
        assert len(completed) == 1


def test_a_child_waiting_for_approval_resumes_and_its_answer_reaches_the_parent(
    store_url: str,
) -> None:
    _kill_at(store_url, "child-approval", "CHILD PENDING")
    asked: list[str] = []

    class Allow:
        def decide(self, request: ApprovalRequest) -> ApprovalDecision:
            asked.append(request.session_id)
            return ApprovalDecision.allow()

    rt, finished = _revive(
        store_url,
        "child-approval",
        ["found it"],  # the child's turn goes on after its tool ran
        RunConfig(approval_provider=Allow()),
    )
    with rt:
        assert finished is not None
        assert finished.result.final_output == "the lead's answer"
        assert asked == [CHILD]  # the parent's provider decided the child's request
        assert _calls_of(rt, CHILD) == [("look_up", "facts about turnlog", False)]
        assert _calls_of(rt, PARENT) == [("research", "found it", False)]
        assert _prompts_of(rt, CHILD) == ["what is turnlog?"]


def test_the_killed_parents_first_step_is_what_the_child_script_asked() -> None:
    # Guards the scripts: the parent's first step is the call the ids assume.
    (item,) = ask_child().output
    assert item["call_id"] == "ask-1"
    assert f"{PARENT}:1:ask-1" == CHILD
