"""Forks and rewinds on the Session aggregate, pure: no store, no actors."""

from __future__ import annotations

import pytest

from turnlog.domain.errors import (
    InvalidInputError,
    SessionBusyError,
    SessionClosedError,
)
from turnlog.domain.lineage import (
    SessionForked,
    SessionRewound,
    rewind,
    set_aside_turns,
    turn_owner,
)
from turnlog.domain.session import Session
from turnlog.domain.session_snapshot import SessionSnapshot

REWIND_FIELDS = {
    "point_seq": 5,
    "point_position": 5,
    "shared_state": {"todo_list": []},
    "context_start_turn": 1,
    "context_start_position": 0,
    "last_position": 20,
}


def with_turns(count: int) -> Session:
    session = Session.create(
        "s", agent_name="a", agent_digest="d", shared_state={}, model_route="r"
    )
    for _ in range(count):
        number = session.start_turn("sub")
        session.complete_turn(number, "done")
    session.collect_events()
    return session


def forked(**changes: object) -> Session:
    fields: dict[str, object] = {
        "agent_name": "a",
        "agent_digest": "d",
        "shared_state": {"plan": "pro"},
        "model_route": "r",
        "source_session_id": "s",
        "source_seq": 12,
        "source_position": 40,
        "source_digest": "ab" * 32,
        "turn_owners": [["s", 3]],
        "turn_count": 3,
        "usage_totals": {"total_tokens": 9},
        "last_usage": None,
        "context_epoch": 1,
        "context_start_turn": 2,
        "context_start_position": 30,
        "compaction_count": 1,
        "last_rewrite_reasons": ["compaction"],
        "handed_to": "",
        "allowed_tools": ["deploy"],
        "set_aside": [],
        "set_aside_positions": [],
    }
    fields.update(changes)
    return Session.fork("f", **fields)


def test_a_fork_starts_from_the_source_state_and_numbers_turns_after_it() -> None:
    session = forked()
    (event,) = session.collect_events()
    assert isinstance(event, SessionForked)
    assert (session.turn_count, session.context_start_turn) == (3, 2)
    assert session.allowed_tools == {"deploy"}
    assert session.shared_state == {"plan": "pro"}
    assert session.start_turn("next") == 4
    assert turn_owner("f", session.turn_owners, 3) == "s"
    assert turn_owner("f", session.turn_owners, 4) == "f"


def test_a_fork_with_bad_shared_state_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        forked(shared_state={"x": object()})


def test_a_rewind_sets_the_later_turns_aside_once() -> None:
    session = with_turns(3)
    assert rewind(session, 1, **REWIND_FIELDS) == [2, 3]
    (event,) = session.collect_events()
    assert isinstance(event, SessionRewound)
    assert set_aside_turns(session.set_aside) == {2, 3}
    assert session.set_aside_positions == [[5, 21]]
    with pytest.raises(InvalidInputError, match="nothing to rewind"):
        rewind(session, 3, **REWIND_FIELDS)
    number = session.start_turn("again")
    session.complete_turn(number, None)
    assert rewind(session, 1, **REWIND_FIELDS) == [4]  # 2 and 3 were already


def test_a_rewind_is_refused_while_a_turn_runs_or_once_closed() -> None:
    session = with_turns(2)
    session.start_turn("running")
    with pytest.raises(SessionBusyError, match="interrupt"):
        rewind(session, 1, **REWIND_FIELDS)
    session.complete_turn(3, None)
    session.close()
    with pytest.raises(SessionClosedError):
        rewind(session, 1, **REWIND_FIELDS)


def test_a_snapshot_taken_before_forks_loads_with_no_lineage() -> None:
    session = with_turns(1)
    snapshot = SessionSnapshot.take(session)
    for key in ("turn_owners", "set_aside", "set_aside_positions"):
        snapshot.state.pop(key)
    loaded = snapshot.mutate(None)
    # Empty, as a Session folded from its events holds them: the empty tuple.
    assert (loaded.turn_owners, loaded.set_aside, loaded.set_aside_positions) == (
        (),
        (),
        (),
    )
