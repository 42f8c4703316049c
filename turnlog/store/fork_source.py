"""What a fork or a rewind records about its point, read from the log.

Forking after a turn (or at the latest point) reads a handful of rows,
however long the source: the first rows of the turn after the point, the
newest rows of the Session and of the turn before it, and the Session as
it was there (from its nearest snapshot). Naming the point by input, by
position or inside what a fork shares with its source needs the whole
history (turnlog.store.lineage.scan). Neither copies a message or a tool
output: the few small fields of the Session are all a fork carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.domain.lineage import set_aside_turns, turn_owner
from turnlog.domain.session import Session
from turnlog.store.lineage import (
    CanReadHistory,
    HistoryPoint,
    SessionMarks,
    mark_of,
    session_at,
)

_END = 2**62
"""A log position past every event."""


@dataclass(frozen=True)
class ForkSource:
    """A source session at a quiet point: where it is and what it was."""

    session_id: str
    point: HistoryPoint
    digest: str
    """The source chain's digest at the point."""
    owner: str
    """Whose Session holds the state at the point (a fork shares its source's)."""
    at: Session
    """That Session as it was at the point."""


def quick_source(
    store: CanReadHistory, session_id: str, after_turn: int | None
) -> ForkSource | None:
    """The point after turn ``after_turn`` (None: the latest quiet point),
    read from a few rows; None where the whole history must be read."""
    session = store.get(session_uuid(session_id))
    if not isinstance(session, Session):
        return None
    owners = session.turn_owners
    base = owners[-1][1] if owners else 0
    latest = session.turn_count - 1 if session.running else session.turn_count
    turn = latest if after_turn is None else after_turn
    if turn > latest or turn < base:
        return None
    own = session_uuid(session_id)
    bound = _END
    if turn < session.turn_count:  # the point is before this session's turn + 1
        opened = store.stored_rows([turn_uuid(session_id, turn + 1)])
        if not opened:
            return None
        bound = min(row[0] for row in opened)
        started = store.stored_before(own, bound, 1)
        if (
            started
            and started[0][3] == "turnlog:TurnStarted"
            and mark_of(started[0]).number == turn + 1
        ):
            bound = started[0][0]
    session_rows = store.stored_before(own, bound, 1)
    if not session_rows:
        return None
    candidates = list(session_rows)
    if turn >= 1:
        last_turn = turn_uuid(turn_owner(session_id, owners, turn), turn)
        candidates += store.stored_before(last_turn, bound, 1)
    row = max(candidates, key=lambda candidate: candidate[0])
    mark = mark_of(row)
    version = session_rows[0][2]
    at = session if version == session.version else store.get(own, version=version)
    if not isinstance(at, Session):
        return None
    point = HistoryPoint(turn, row[0], mark.session_seq)
    return ForkSource(session_id, point, mark.chain, session_id, at)


def scanned_source(
    store: CanReadHistory, marks: SessionMarks, point: HistoryPoint
) -> ForkSource:
    """The source at ``point`` of a history read whole."""
    owner, at = session_at(store, marks, point.position)
    return ForkSource(marks.session_id, point, marks.chains[point.position], owner, at)


def context_start_position(store: CanReadHistory, session: Session) -> int:
    """The log position the session's model context starts at (0: the start):
    the first event of the turn that last compacted it."""
    number = session.context_start_turn
    if number <= 1:
        return 0
    owner = turn_owner(session.session_id, session.turn_owners, number)
    rows = store.stored_rows([turn_uuid(owner, number)])
    return min((row[0] for row in rows), default=0)


def fork_fields(
    store: CanReadHistory, source: ForkSource, *, keep_allowances: bool
) -> dict[str, Any]:
    """The fields of the SessionForked that forks ``source`` at its point.

    Small fields only: the source's Session at the point (shared state,
    usage, route, context bookkeeping) and where its history is.
    """
    at, point = source.at, source.point
    owners = [list(entry) for entry in at.turn_owners]
    bound = owners[-1][1] if owners else 0
    if at.turn_count > bound:
        owners.append([source.owner, at.turn_count])
    return {
        "agent_name": at.agent_name,
        "agent_digest": at.agent_digest,
        "shared_state": dict(at.shared_state),
        "model_route": at.model_route,
        "source_session_id": source.session_id,
        "source_seq": point.seq,
        "source_position": point.position,
        "source_digest": source.digest,
        "turn_owners": owners,
        "turn_count": at.turn_count,
        "usage_totals": dict(at.usage_totals),
        "last_usage": None if at.last_usage is None else dict(at.last_usage),
        "context_epoch": at.context_epoch,
        "context_start_turn": at.context_start_turn,
        "context_start_position": context_start_position(store, at),
        "compaction_count": at.compaction_count,
        "last_rewrite_reasons": list(at.last_rewrite_reasons),
        "handed_to": at.handed_to,
        "allowed_tools": sorted(at.allowed_tools) if keep_allowances else [],
        "set_aside": [list(span) for span in at.set_aside],
        "set_aside_positions": [list(span) for span in at.set_aside_positions],
        "first_prompt": first_input(store, at),
    }


def first_input(store: CanReadHistory, session: Session) -> str:
    """The text of the first input of the session's history ("" if none)."""
    if session.turn_count < 1:
        return ""
    owner = turn_owner(session.session_id, session.turn_owners, 1)
    for row in sorted(store.stored_rows([turn_uuid(owner, 1)])):
        if row[3] == "turnlog:InputAccepted":
            return mark_of(row).text
    return ""


def rewind_fields(
    store: CanReadHistory, marks: SessionMarks, point: HistoryPoint, current: Session
) -> dict[str, Any]:
    """The fields of the SessionRewound that takes ``current`` back to ``point``."""
    if point.after_turn in set_aside_turns(current.set_aside):
        msg = f"turn {point.after_turn} of {marks.session_id!r} was rewound already"
        raise InvalidInputError(msg)
    _, at = session_at(store, marks, point.position)
    return {
        "point_seq": point.seq,
        "point_position": point.position,
        "shared_state": dict(at.shared_state),
        "context_start_turn": at.context_start_turn,
        "context_start_position": context_start_position(store, at),
        "last_position": marks.rows[-1][0],
    }
