"""The Session aggregate's invariants, pure: no store, no actors."""

from __future__ import annotations

import pytest

from turnlog.domain.errors import (
    InvalidInputError,
    InvariantViolation,
    SessionBusyError,
    SessionClosedError,
)
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.domain.session import Session, SessionCreated, TurnStarted


def new_session() -> Session:
    session = Session.create(
        "s1",
        agent_name="a",
        agent_digest="d",
        shared_state={"todo_list": []},
        model_route="default",
    )
    session.collect_events()
    return session


def test_create_derives_the_aggregate_id_from_the_session_id() -> None:
    session = Session.create(
        "s1", agent_name="a", agent_digest="d", shared_state={}, model_route="r"
    )
    (created,) = session.collect_events()
    assert isinstance(created, SessionCreated)
    assert session.id == session_uuid("s1")
    assert created.session_id == "s1"


def test_one_running_turn_per_session() -> None:
    session = new_session()
    assert session.start_turn("sub-1") == 1
    with pytest.raises(SessionBusyError):
        session.start_turn("sub-2")
    events = session.collect_events()
    assert [type(e) for e in events] == [TurnStarted]
    assert events[0].turn_id == str(turn_uuid("s1", 1))


def test_a_turn_that_ended_frees_the_session_for_the_next() -> None:
    session = new_session()
    session.start_turn("sub-1")
    session.complete_turn(1, "done")
    assert session.start_turn("sub-2") == 2
    session.abort_turn(2, "interrupted", failed=False)
    assert not session.running


def test_only_the_running_turn_can_end() -> None:
    session = new_session()
    with pytest.raises(InvariantViolation):
        session.complete_turn(1, None)
    session.start_turn("sub-1")
    with pytest.raises(InvariantViolation):
        session.abort_turn(2, "x", failed=True)
    assert session.running


def test_usage_totals_only_grow() -> None:
    session = new_session()
    session.start_turn("sub-1")
    session.record_usage(1, 1, "default", {"input_tokens": 3, "total_tokens": 5})
    session.record_usage(1, 2, "default", None)
    session.record_usage(1, 3, "default", {"input_tokens": 2, "total_tokens": 2})
    assert session.usage_totals == {"input_tokens": 5, "total_tokens": 7}
    before = session.version
    with pytest.raises(InvariantViolation):
        session.record_usage(1, 4, "default", {"input_tokens": -1})
    with pytest.raises(InvalidInputError):
        session.record_usage(1, 4, "default", {"made_up": 1})
    assert session.version == before
    assert session.usage_totals == {"input_tokens": 5, "total_tokens": 7}


def test_unreported_usage_is_recorded_as_unknown_not_zero() -> None:
    session = new_session()
    session.start_turn("sub-1")
    session.record_usage(1, 1, "default", None)
    (_, recorded) = session.collect_events()
    assert recorded.usage is None
    assert session.usage_totals == {}


def test_shared_state_records_only_real_changes() -> None:
    session = new_session()
    session.update_shared_state({"todo_list": []})
    assert session.collect_events() == []
    session.update_shared_state({"host": "desktop", "todo_list": []})
    (updated,) = session.collect_events()
    assert updated.changes == {"host": "desktop"}
    assert session.shared_state == {"todo_list": [], "host": "desktop"}


def test_a_closed_session_refuses_commands() -> None:
    session = new_session()
    session.close()
    with pytest.raises(SessionClosedError):
        session.start_turn("sub-1")
    with pytest.raises(SessionClosedError):
        session.update_shared_state({"x": 1})


def test_a_session_with_a_running_turn_cannot_close() -> None:
    session = new_session()
    session.start_turn("sub-1")
    with pytest.raises(SessionBusyError):
        session.close()
    assert not session.closed


def test_queued_input_once_gone_leaves_the_empty_tuple_not_a_list() -> None:
    # domain.session_snapshot.EMPTY_AS_TUPLE: an empty list is one more
    # object for the collector to walk in every live session; and a Session
    # loaded from a snapshot (where empty is the empty tuple) must equal one
    # folded.
    session = new_session()
    assert session.queued == ()
    session.queue_input("sub-1", "follow_up", "first", [])
    session.queue_input("sub-2", "follow_up", "second", [])
    assert [q["submission_id"] for q in session.queued] == ["sub-1", "sub-2"]
    number = session.start_turn("sub-1")
    assert [q["submission_id"] for q in session.queued] == ["sub-2"]
    session.take_queued("sub-2", number)
    assert session.queued == ()
    session.queue_input("sub-3", "follow_up", "third", [])
    assert session.drop_queued("closing") == ["sub-3"]
    assert session.queued == ()
    session.complete_turn(number, "ok")
    session.start_turn("sub-4")  # nothing queued: no list made on the way
    assert session.queued == ()
