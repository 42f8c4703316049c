"""The Turn aggregate's invariants, pure: no store, no actors."""

from __future__ import annotations

import pytest

from turnlog.domain.errors import InvalidInputError, InvariantViolation
from turnlog.domain.ids import (
    check_session_id,
    child_session_id,
    turn_id_text,
    turn_uuid,
)
from turnlog.domain.model import function_call
from turnlog.domain.turn import Turn
from turnlog.domain.turn_events import TurnFields


def running_turn_with_calls(*call_ids: str) -> Turn:
    turn = Turn.open("s1", 1, "sub-1")
    turn.accept_input("sub-1", "prompt", "hi")
    step = turn.start_step("default")
    output = [function_call(call_id, "tool", "{}") for call_id in call_ids]
    turn.complete_step(step, output, None)
    turn.collect_events()
    return turn


def test_a_turn_has_every_field_its_events_set() -> None:
    # The events (turn_events.py) set a Turn's fields through TurnFields
    # alone: a field named there and missing from Turn would fail on replay.
    turn: TurnFields = Turn.open("s1", 1, "sub-1")
    missing = [name for name in TurnFields.__annotations__ if not hasattr(turn, name)]
    assert missing == []


def test_model_steps_run_one_at_a_time() -> None:
    turn = Turn.open("s1", 1, "sub-1")
    assert turn.start_step("default") == 1
    with pytest.raises(InvariantViolation):
        turn.start_step("default")
    turn.complete_step(1, [], None)
    assert turn.start_step("default") == 2


def test_only_the_running_step_can_complete_or_fail() -> None:
    turn = Turn.open("s1", 1, "sub-1")
    with pytest.raises(InvariantViolation):
        turn.complete_step(1, [], None)
    turn.start_step("default")
    with pytest.raises(InvariantViolation):
        turn.fail_step(2, "E", "x")


def test_a_tool_call_starts_once_and_finishes_once() -> None:
    turn = running_turn_with_calls("c1")
    turn.start_tool_call("c1", "tool", "{}")
    with pytest.raises(InvariantViolation):
        turn.start_tool_call("c1", "tool", "{}")
    turn.finish_tool_call("c1", "ok", is_error=False)
    with pytest.raises(InvariantViolation):
        turn.finish_tool_call("c1", "again", is_error=False)
    names = [type(e).__name__ for e in turn.collect_events()]
    assert names == ["ToolCallStarted", "ToolCallFinished"]


def test_a_call_the_model_never_made_cannot_start_or_finish() -> None:
    turn = running_turn_with_calls("c1")
    with pytest.raises(InvariantViolation):
        turn.start_tool_call("c9", "tool", "{}")
    with pytest.raises(InvariantViolation):
        turn.finish_tool_call("c9", "x", is_error=True)
    assert turn.collect_events() == []


def test_every_call_is_answered_before_the_next_model_step() -> None:
    turn = running_turn_with_calls("c1", "c2")
    turn.finish_tool_call("c1", "unknown tool", is_error=True)
    with pytest.raises(InvariantViolation):
        turn.start_step("default")
    turn.start_tool_call("c2", "tool", "{}")
    turn.finish_tool_call("c2", "ok", is_error=False)
    assert turn.start_step("default") == 2


def test_an_approval_is_decided_once() -> None:
    turn = running_turn_with_calls("c1")
    turn.request_approval("r1", "c1", "tool", "{}")
    with pytest.raises(InvariantViolation):
        turn.request_approval("r1", "c1", "tool", "{}")
    turn.decide_approval("r1", "allow", "user")
    with pytest.raises(InvariantViolation):
        turn.decide_approval("r1", "deny", "user")
    with pytest.raises(InvariantViolation):
        turn.decide_approval("unknown", "allow", "user")
    assert turn.pending_approvals == {}


def test_unknown_decisions_and_input_kinds_are_refused() -> None:
    turn = running_turn_with_calls("c1")
    turn.request_approval("r1", "c1", "tool", "{}")
    turn.collect_events()
    with pytest.raises(InvalidInputError):
        turn.decide_approval("r1", "maybe", "user")
    with pytest.raises(InvalidInputError):
        turn.accept_input("sub-2", "shout", "hi")
    assert turn.collect_events() == []
    assert turn.pending_approvals == {"r1": "c1"}


def test_a_rejected_input_records_no_content() -> None:
    turn = Turn.open("s1", 1, "sub-1")
    turn.reject_input("sub-1", "policy")
    events = turn.collect_events()
    assert "secret" not in repr(events)
    assert events[-1].reason == "policy"


def test_a_child_session_is_recorded_only_for_a_running_call() -> None:
    turn = Turn.open("s1", 1, "sub")
    with pytest.raises(InvariantViolation, match="not running"):
        turn.start_child_session("c1", "s1:1:c1", "researcher")
    assert not [
        e for e in turn.collect_events() if type(e).__name__ == "ChildSessionStarted"
    ]


def test_a_child_session_id_is_derived_and_stays_a_valid_session_id() -> None:
    assert child_session_id("parent", 2, "call_1") == "parent:2:call_1"
    assert child_session_id("parent", 2, "call_1") == child_session_id(
        "parent", 2, "call_1"
    )
    long = child_session_id("p" * 200, 1, "c1")
    assert long.startswith("child-")
    assert check_session_id(long) == long
    assert long != child_session_id("p" * 200, 1, "c2")


def test_the_turn_id_text_is_the_turn_aggregates_id() -> None:
    # Events and effects name a turn by turn_id_text, formatted once: the
    # text of the id its Turn aggregate has.
    turn = Turn.open("s1", 7, "sub")
    assert turn_id_text("s1", 7) == str(turn.id) == str(turn_uuid("s1", 7))
    assert turn_id_text("s1", 8) != turn_id_text("s1", 7)
