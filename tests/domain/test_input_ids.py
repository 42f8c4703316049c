"""Input ids in the Session aggregate, pure: the fold knows every id it saw
(and how ended turns' approvals were decided), old snapshots load, and a
recorded id cannot be recorded again."""

from __future__ import annotations

import pytest

from turnlog.domain.errors import InputConflictError, InvariantViolation
from turnlog.domain.input_ids import (
    check_same_decision,
    input_digest,
    seen_submission,
)
from turnlog.domain.session import Session
from turnlog.domain.session_snapshot import SessionSnapshot


def new_session() -> Session:
    return Session.create(
        "s1", agent_name="a", agent_digest="d", shared_state={}, model_route="r"
    )


def folded(session: Session) -> Session:
    """The session as the log rebuilds it: every event applied anew."""
    events = session.collect_events()
    rebuilt = None
    for event in events:
        rebuilt = event.mutate(rebuilt)
    assert isinstance(rebuilt, Session)
    return rebuilt


def test_the_digest_is_of_what_was_asked_kind_text_and_attachments() -> None:
    assert input_digest("prompt", "hi") == input_digest("prompt", "hi", [])
    assert input_digest("prompt", "hi") != input_digest("follow_up", "hi")
    assert input_digest("prompt", "hi") != input_digest("prompt", "hi ")
    assert input_digest("prompt", "hi") != input_digest("prompt", "hi", [{"id": "f"}])


def test_the_fold_knows_the_ids_of_started_and_queued_input() -> None:
    session = new_session()
    prompt, later = input_digest("prompt", "go"), input_digest("follow_up", "later")
    session.start_turn("sub-1", "p-1", prompt)
    session.queue_input(
        "sub-2", "follow_up", "later", [], input_id="f-1", input_digest=later
    )
    session.complete_turn(1, "done", {"req-1": "allow"})
    session.start_turn("sub-2", "f-1")  # the queued one's turn: the same id
    rebuilt = folded(session)
    assert rebuilt.input_ids == {"p-1": [prompt, "sub-1"], "f-1": [later, "sub-2"]}
    assert rebuilt.decided_approvals == {"req-1": "allow"}
    assert seen_submission(rebuilt.input_ids, "p-1", prompt) == "sub-1"
    assert seen_submission(rebuilt.input_ids, "new", prompt) is None
    with pytest.raises(InputConflictError, match="'p-1'"):
        seen_submission(rebuilt.input_ids, "p-1", later)


def test_a_recorded_id_is_not_recorded_again() -> None:
    session = new_session()
    session.start_turn("sub-1", "p-1", input_digest("prompt", "go"))
    session.collect_events()
    with pytest.raises(InvariantViolation, match="'p-1'"):
        session.queue_input("sub-2", "follow_up", "go", [], input_id="p-1")
    session.complete_turn(1, "done")
    with pytest.raises(InvariantViolation, match="'p-1'"):
        session.start_turn("sub-3", "p-1")
    assert [type(e).__name__ for e in session.collect_events()] == ["TurnCompleted"]


def test_a_decision_repeated_is_known_another_is_a_conflict() -> None:
    decided = {"req-1": "allow"}
    assert check_same_decision("req-1", decided, "allow")
    assert not check_same_decision("req-2", decided, "allow")
    with pytest.raises(InputConflictError, match="already decided 'allow'"):
        check_same_decision("req-1", decided, "allow_session")


def test_a_snapshot_from_before_input_ids_loads_with_none() -> None:
    session = new_session()
    session.start_turn("sub-1", "p-1", "digest")
    session.collect_events()
    taken = SessionSnapshot.take(session)
    assert SessionSnapshot.take(session).mutate(None).input_ids == {
        "p-1": ["digest", "sub-1"]
    }
    del taken.state["input_ids"]
    del taken.state["decided_approvals"]
    older = taken.mutate(None)
    assert (older.input_ids, older.decided_approvals) == ({}, {})
