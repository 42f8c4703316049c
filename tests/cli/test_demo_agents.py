"""``turnlog demo --agents``: a planner asks the date helper (a child
session of its own) and answers typed; the log holds both, linked."""

from __future__ import annotations

import re

import pytest
from cli_support import FINAL_ANSWER, run

from turnlog import Runtime
from turnlog.cli.demo import AGENT_NAME, QUESTION
from turnlog.cli.demo_agents import PLANNER_NAME, DateAnswer, planner_agent


def test_the_agents_demo_delegates_to_a_child_and_answers_typed(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    code, out, err = run(capsys, "--store", store, "demo", "--agents")

    assert (code, err) == (0, "")
    expected_in_order = [
        f"user         {QUESTION}",
        "tool call    ask_date_helper",
        f"tool result  ask_date_helper -> {FINAL_ANSWER}",
        "child session demo-",
        "tool call    add_days",
        "tool result  add_days -> 2024-05-20 (Monday)",
        "typed answer: DateAnswer(date='2024-05-20', weekday='Monday', "
        "answered_by='date-helper')",
        "session:      demo-",
    ]
    positions = [out.find(text) for text in expected_in_order]
    assert -1 not in positions, out
    assert positions == sorted(positions), out

    session_id = re.search(r"session:      (demo-[0-9a-f]{12})", out)
    assert session_id is not None
    with Runtime.open(store) as rt:
        (child,) = rt.children(session_id[1])
        assert (child.agent, child.parent_session) == (AGENT_NAME, session_id[1])
        checkpoint = rt.checkpoints.load(session_id[1])
        assert checkpoint is not None
        assert checkpoint.output == {
            "date": "2024-05-20",
            "weekday": "Monday",
            "answered_by": AGENT_NAME,
        }
        # Reopened with the planner, the session gives the typed object back.
        again = rt.create_session(planner_agent(), session_id=session_id[1])
        assert again.last_output() == DateAnswer(
            date="2024-05-20", weekday="Monday", answered_by=AGENT_NAME
        )

    code, out, err = run(capsys, "--store", store, "audit", "--verify", session_id[1])
    assert code == 0, out + err


def test_the_agents_demo_continues_only_its_own_sessions(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    assert run(capsys, "--store", store, "demo", "--session", "plain")[0] == 0
    code, _, err = run(
        capsys, "--store", store, "demo", "--agents", "--session", "plain"
    )
    assert code != 0
    assert f"belongs to agent {AGENT_NAME!r}" in err
    assert "the demo continues only its own sessions" in err
    # Nothing was written to it: the planner's session would have a child.
    with Runtime.open(store) as rt:
        assert rt.children("plain") == []
        checkpoint = rt.checkpoints.load("plain")
        assert checkpoint is not None
        assert checkpoint.agent_name != PLANNER_NAME
