"""The turn machine beside its table: stale facts, refusals, and what it reads.

Pure, as the table's tests (test_turn_machine.py): no actor, thread or store.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import turn_machine_support as support

from turnlog.domain.errors import SessionBusyError, UsageError
from turnlog.domain.ids import child_session_id
from turnlog.domain.protocol import Interrupt
from turnlog.domain.turn_facts import (
    IGNORED,
    CompactionBegan,
    InputReviewed,
    Reviewed,
    StepFailed,
    TurnActorFailed,
    TurnFailed,
    TurnInput,
)


def test_a_stale_fact_is_no_transition() -> None:
    harness = support.harness_at({}, [support.PROMPT, support.calls("echo")])
    stale: list[Any] = [
        support.answer("late", step=1),  # the step already completed
        StepFailed(1, 1, "Cancelled", "model call was cancelled"),
        support.finished("c9"),  # no such call
        InputReviewed(1, None, (), None, None),  # nothing under review
        TurnActorFailed(2, "another turn"),
        CompactionBegan(2, "k1", "another turn"),
    ]
    for fact in stale:
        assert harness.machine.take(fact) is IGNORED
    harness.take(support.finished("c1"))
    harness.take(support.answer("done", step=2))
    assert harness.machine.take(support.finished("c1")) is IGNORED
    assert harness.machine.take(TurnFailed("too late")) is IGNORED


@pytest.mark.parametrize(
    "fact",
    [support.decide("r9", "allow"), Interrupt(turn_id="not-this-one")],
    ids=["a decision on no pending request", "an interrupt of another turn"],
)
def test_a_refused_fact_triggers_nothing(fact: Any) -> None:
    harness = support.harness_at({}, [support.PROMPT, support.calls("risky")])
    held = harness.held
    before = harness.machine.phase()
    with pytest.raises(UsageError):
        harness.machine.take(fact)
    assert held.session.pending_events == []
    assert held.turn is not None
    assert held.turn.pending_events == []
    assert harness.machine.phase() == before


def test_an_interrupt_with_no_turn_running_is_refused() -> None:
    harness = support.Harness()
    with pytest.raises(UsageError, match="no running turn"):
        harness.machine.take(Interrupt())


def test_input_while_a_turn_runs_is_refused_by_the_session() -> None:
    harness = support.harness_at({}, [support.PROMPT])
    with pytest.raises(SessionBusyError):
        harness.machine.take(TurnInput("sub-2", "prompt", "again", []))


def test_the_next_turn_takes_the_oldest_queued_input_with_its_review() -> None:
    harness = support.harness_at({"reviews": True}, [])
    harness.queue("sub-1", "follow_up", "first")
    harness.queue("sub-2", "follow_up", "second")
    answers: Reviewed = ((("user_prompt_hook", "noted"),), None)
    harness.held.reviewed["sub-1"] = answers
    fact = harness.machine.next_input()
    assert fact == TurnInput("sub-1", "follow_up", "first", [], answers)
    assert harness.held.reviewed == {}  # taken with it
    # Reviewed when it was queued: recorded at once, not reviewed again.
    assert harness.take(fact) == (
        ["TurnStarted", "TurnOpened", "InputAccepted", "HookContextAdded"],
        ["BeginTurn(1)", "PrepareModelStep(1)"],
    )
    assert harness.held.session.queued[0]["submission_id"] == "sub-2"


def test_a_closed_session_starts_no_queued_input() -> None:
    harness = support.Harness()
    harness.queue("sub-1", "follow_up", "first")
    harness.held.session.close()
    assert harness.machine.next_input() is None


def test_a_step_after_compaction_tells_the_prompt_cache_it_was_rewritten() -> None:
    harness = support.harness_at(
        {"middleware": True},
        [
            support.PROMPT,
            CompactionBegan(1, "k1", "long"),
            support.prepared(compaction=support.compaction()),
        ],
    )
    harness.take(support.answer("done"))
    (completed,) = [
        e for e in harness.events if type(e).__name__ == "ModelStepCompleted"
    ]
    assert completed.diagnostics["prompt_cache"] == {
        "context_epoch": 1,
        "outcome": "context_rewrite",
        "rewrite_reasons": ["compaction"],
    }


def test_pending_approvals_are_read_with_their_arguments() -> None:
    harness = support.harness_at({}, [support.PROMPT, support.calls("echo", "risky")])
    (request,) = harness.machine.pending_approvals()
    assert (request.request_id, request.call_id, request.tool_name) == (
        "r1",
        "c2",
        "risky",
    )
    assert request.arguments == '{"x": 1}'


def test_steps_and_calls_record_what_traces_name_them_by() -> None:
    tools = {"echo": ("function", ""), "risky": ("extension", "files")}
    harness = support.Harness(
        model_identity=lambda route: ("gpt-test", f"openai via {route}"),
        tool_identity=lambda name: tools[name],
    )

    def recorded(name: str) -> list[Any]:
        return [e for e in harness.events if type(e).__name__ == name]

    harness.take(support.PROMPT)
    (started,) = recorded("ModelStepStarted")
    assert (started.model, started.provider) == ("gpt-test", "openai via default")
    step = support.calls("echo", "risky")
    answered = msgspec.structs.replace(
        step, response=msgspec.structs.replace(step.response, model="gpt-test-2")
    )
    harness.take(answered)
    (completed,) = recorded("ModelStepCompleted")
    assert completed.response_model == "gpt-test-2"
    (echo,) = recorded("ToolCallStarted")
    assert (echo.tool_type, echo.mcp_server) == ("function", "")
    harness.take(support.decide("r1", "allow"))
    (risky,) = recorded("ToolCallStarted")
    assert (risky.tool_type, risky.mcp_server) == ("extension", "files")
    image = {"type": "image", "mime_type": "image/png", "data": "aGk="}
    harness.take(support.finished("c1", media=(image,)))
    (finished,) = recorded("ToolCallFinished")
    assert list(finished.media) == [image]


def test_a_started_call_of_an_agent_tool_records_its_child_session() -> None:
    harness = support.Harness(
        child_agent=lambda name: "researcher" if name == "echo" else ""
    )
    harness.take(support.PROMPT)
    names, _ = harness.take(support.calls("echo", "risky"))
    assert names.count("ChildSessionStarted") == 1
    (child,) = [e for e in harness.events if type(e).__name__ == "ChildSessionStarted"]
    assert (child.call_id, child.agent) == ("c1", "researcher")
    assert child.child_session == child_session_id(support.SESSION, 1, "c1")
    # the call that waited for approval records its child when it starts
    names, _ = harness.take(support.decide("r1", "allow"))
    assert "ChildSessionStarted" not in names  # risky runs no agent
