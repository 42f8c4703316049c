"""Rewinding a session in place: the SessionActor's side of ``session.rewind``.

The actor is the session's single writer, so the rewind is decided here:
refused while a turn runs (interrupt it first), recorded as one
SessionRewound on the Session, and followed by the model context read
again from the log without the turns set aside. A turn waiting for an
approval is a running turn: interrupting it closes its approvals (the turn
aborts), so no approval of a rewound turn is left pending.
"""

from __future__ import annotations

from typing import Any

from turnlog.actors.revive import load_context
from turnlog.actors.session_state import SessionState
from turnlog.domain.errors import InvalidInputError, SessionBusyError
from turnlog.domain.lineage import rewind
from turnlog.store.fork_source import rewind_fields
from turnlog.store.lineage import scan


def rewind_session(
    state: SessionState, before_input: int | None, after_turn: int | None
) -> list[int]:
    """Rewinds the session ``state`` holds to the point named; the turns set aside."""
    state.check_open()
    session = state.session
    if session.running:
        msg = (
            f"session {session.session_id!r} is running turn {session.active_turn}; "
            "interrupt it before rewinding"
        )
        raise SessionBusyError(msg)
    if before_input is None and after_turn is None:
        msg = "name the point to rewind to: before_input= or after_turn="
        raise InvalidInputError(msg)
    marks = scan(state.store, session.session_id)
    point = marks.point(before_input=before_input, after_turn=after_turn)
    fields = rewind_fields(state.store, marks, point, session)
    rewound: list[int] = []

    def decide() -> list[Any]:
        rewound.extend(rewind(session, point.after_turn, **fields))
        return [session]

    state.record(decide)
    state.context = load_context(state.store, session)
    state.conversation = None
    return rewound
