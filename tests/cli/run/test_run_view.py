"""How a turn is shown: streamed text, tool lines, approval questions."""

from __future__ import annotations

from typing import Any

import pytest

from turnlog import ApprovalDecision, Event, RunEvent
from turnlog.cli.run.view import (
    ASSISTANT,
    TurnView,
    approval_question,
    parse_approval,
    terminal_safe,
)
from turnlog.domain import protocol as p
from turnlog.domain.run import EventsMissed, RunFinished, RunResult


def event(msg: Any) -> RunEvent:
    return RunEvent("s1", Event("s1", None, "t1", 0, msg))


def finished() -> RunFinished:
    result = RunResult("s1", "sub", "completed", "done", ("t1",), {}, {})
    return RunFinished("s1", "completed", result)


def shown(*items: Any) -> str:
    out: list[str] = []
    view = TurnView(out.append)
    for item in items:
        view.show(item)
    return "".join(out)


def test_streamed_text_is_shown_as_it_comes_and_not_repeated() -> None:
    out: list[str] = []
    view = TurnView(out.append)
    view.show(event(p.ModelStepStartedMsg(1, "default")))
    view.show(event(p.AgentMessageDeltaMsg("Hel")))
    assert "".join(out) == ASSISTANT + "Hel"  # no waiting for the whole answer
    view.show(event(p.AgentMessageDeltaMsg("lo!")))
    view.show(event(p.AgentMessageMsg("Hello!")))
    view.show(finished())
    assert "".join(out) == ASSISTANT + "Hello!\n"


def test_an_answer_that_was_not_streamed_is_shown_whole() -> None:
    text = shown(
        event(p.ModelStepStartedMsg(1, "default")), event(p.AgentMessageMsg("Hi"))
    )
    assert text == ASSISTANT + "Hi\n"


def test_tool_calls_and_results_are_shown_on_their_own_lines() -> None:
    text = shown(
        event(p.ModelStepStartedMsg(1, "default")),
        event(p.AgentMessageDeltaMsg("Let me look.")),
        event(p.ToolCallStartedMsg("c1", "read_file", '{"path":"a.txt"}')),
        event(p.ToolCallFinishedMsg("c1", "read_file", "line one\nline two", False)),
        event(p.ToolCallFinishedMsg("c2", "deploy", "the call was denied", True)),
    )
    assert text.splitlines() == [
        ASSISTANT + "Let me look.",
        '  tool    read_file {"path": "a.txt"}',
        "  result  read_file: line one line two",
        "  error   deploy: the call was denied",
    ]


def test_long_tool_output_is_cut() -> None:
    text = shown(event(p.ToolCallFinishedMsg("c1", "read_file", "x" * 5000, False)))
    assert len(text) < 300
    assert text.rstrip().endswith("...")


def test_turn_endings_and_failures() -> None:
    text = shown(
        event(p.ModelStepFailedMsg(1, "Cancelled", "interrupted")),
        event(p.TurnAbortedMsg("t1", "interrupted", False)),
        event(p.ModelStepFailedMsg(2, "AuthenticationError", "HTTP 401 from x")),
        event(p.TurnAbortedMsg("t1", "model step failed", True)),
        event(p.WarningRaisedMsg("careful")),
        EventsMissed("s1", 3),
    )
    assert text.splitlines() == [
        "  turn stopped: interrupted",  # the cancelled step is not news
        "  model error: AuthenticationError: HTTP 401 from x",
        "  turn failed: model step failed",
        "  warning: careful",
        "  (3 events were missed: the terminal fell behind)",
    ]


def test_a_turn_that_failed_of_a_model_error_does_not_repeat_it() -> None:
    error = "HTTP 503 from x: overloaded (gave up after 4 attempts)"
    text = shown(
        event(p.ModelStepFailedMsg(1, "ServerError", error)),
        event(p.TurnAbortedMsg("t1", f"model step failed: ServerError: {error}", True)),
    )
    assert text.splitlines() == [
        f"  model error: ServerError: {error}",
        "  turn failed: model step failed",
    ]


def test_model_text_cannot_steer_the_terminal() -> None:
    assert terminal_safe("a\x1b[2Jb\tc\nd\x07") == "a\\x1b[2Jb\tc\nd\\x07"
    text = shown(event(p.AgentMessageDeltaMsg("\x1b]0;pwned\x07hi")))
    assert "\x1b" not in text
    assert "\x07" not in text


def test_the_approval_question_shows_the_call() -> None:
    request = p.ApprovalRequestedMsg("r1", "c1", "deploy", '{"env":"prod"}')
    assert approval_question(request) == (
        'approve deploy({"env": "prod"})? '
        "[y]es once / [a]ll for the session / [n]o / [q]uit turn: "
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("y", ApprovalDecision.allow()),
        (" Yes ", ApprovalDecision.allow()),
        ("a", ApprovalDecision.allow_session()),
        ("n", ApprovalDecision.deny()),
        ("NO", ApprovalDecision.deny()),
        ("q", ApprovalDecision.abort()),
        ("", None),
        ("maybe", None),
    ],
)
def test_approval_answers(answer: str, expected: ApprovalDecision | None) -> None:
    assert parse_approval(answer) == expected
