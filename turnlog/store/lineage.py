"""The quiet points of a session, and what a fork or a rewind records there.

A session's quiet points are where no turn runs: just before each turn
started, and the session's end when no turn runs. Each is named two ways,
as a user sees it: ``before_input=N`` (the user input that started a turn,
inputs counted 1, 2, ... in log order) and ``after_turn=N`` (after turn N
ended and before the next one started; ``after_turn=0`` is before the first
input). A steer enters a running turn: the point before it is not quiet and
is refused.

Everything here is read from the log (turnlog.store.history), so it costs a
read of the session's history: forking and rewinding pay it, nothing else
does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.ids import session_uuid
from turnlog.domain.lineage import set_aside_turns
from turnlog.domain.session import Session
from turnlog.store.history import SessionHistory, StoredRow, fork_origin

PREVIEW = 80
"""Characters of an input kept as a history point's preview."""
STARTING_KINDS = frozenset({"prompt", "follow_up", "peer", "system"})


class CanReadHistory(Protocol):
    """A log that reads stored rows and aggregates (``Store`` is one)."""

    def stored_rows(self, aggregate_ids: Sequence[uuid.UUID]) -> list[StoredRow]:
        """The stored events of these aggregates, in no particular order."""
        ...

    def get(self, aggregate_id: uuid.UUID, version: int | None = None) -> Any:
        """The aggregate (as it was at ``version``), or None."""
        ...

    def stored_before(
        self, aggregate_id: uuid.UUID, position: int, limit: int = 1
    ) -> list[StoredRow]:
        """Up to ``limit`` stored events of an aggregate before ``position``,
        newest first."""
        ...


class HistoryPoint(msgspec.Struct, frozen=True):
    """A quiet point of a session that a fork or a rewind may name.

    The point after turn ``after_turn`` ended (0: before the first input)
    and, unless it is the session's end, just before user input ``input``
    started the next turn, which ``preview`` shows the start of.
    ``position`` and ``seq`` are the log position and session seq of the
    last event kept at that point.
    """

    after_turn: int
    position: int
    seq: int
    input: int | None = None
    preview: str = ""
    rewound: bool = False
    """Whether a rewind set turn ``after_turn`` aside since."""


class _Mark(msgspec.Struct):
    session_seq: int = 0
    chain: str = ""
    number: int = 0
    kind: str = ""
    text: str = ""


_mark_decoder = msgspec.json.Decoder(_Mark)


@dataclass
class SessionMarks:
    """One scan of a session's history: its rows and its quiet points."""

    session_id: str
    rows: list[StoredRow]
    points: list[HistoryPoint] = field(default_factory=list)
    running: int | None = None
    """The turn running at the end of the history, if one is."""
    steers: dict[int, int] = field(default_factory=dict)
    """Input number: the turn it steered (not a quiet point)."""
    started_at: dict[int, int] = field(default_factory=dict)
    """Turn number: log position of its TurnStarted."""
    ended_at: dict[int, int] = field(default_factory=dict)
    """Turn number: log position of its TurnCompleted or TurnAborted."""
    chains: dict[int, str] = field(default_factory=dict)
    """Log position: the chain digest of the event there (quiet points only)."""

    def point(
        self, *, before_input: int | None = None, after_turn: int | None = None
    ) -> HistoryPoint:
        """The point named so; the latest quiet point if neither is given.

        Raises InvalidInputError naming the points there are.
        """
        if before_input is not None:
            if before_input in self.steers:
                msg = (
                    f"input {before_input} of {self.session_id!r} steered turn "
                    f"{self.steers[before_input]} while it ran: not a quiet point; "
                    "name the turn before or after it (after_turn=)"
                )
                raise InvalidInputError(msg)
            for point in self.points:
                if point.input == before_input:
                    return point
            inputs = [p.input for p in self.points if p.input is not None]
            msg = f"{self.session_id!r} has no input {before_input} (inputs: {inputs})"
            raise InvalidInputError(msg)
        if after_turn is not None:
            for point in self.points:
                if point.after_turn == after_turn:
                    return point
            if after_turn == self.running:
                msg = f"turn {after_turn} of {self.session_id!r} is still running"
                raise InvalidInputError(msg)
            turns = [p.after_turn for p in self.points]
            msg = (
                f"{self.session_id!r} has no point after turn {after_turn} "
                f"(turns: {turns})"
            )
            raise InvalidInputError(msg)
        return self.points[-1]

    def at_position(self, position: int) -> HistoryPoint:
        """The quiet point at log ``position``; InvalidInputError if none is.

        ``position`` is that of an event of the session's history at which
        no turn ran: after a turn ended and before the next began.
        """
        for point in self.points:
            if point.position >= position:
                ended = self.ended_at.get(point.after_turn)
                if point.position == position:
                    return point
                if ended is not None and ended <= position:
                    return self._point_at(point.after_turn, position)
                break
        msg = (
            f"position {position} is not a quiet point of {self.session_id!r} "
            "(a turn was running there); see rt.history()"
        )
        raise InvalidInputError(msg)

    def _point_at(self, after_turn: int, position: int) -> HistoryPoint:
        for row in self.rows:
            if row[0] == position:
                mark = mark_of(row)
                self.chains[position] = mark.chain
                return HistoryPoint(after_turn, position, mark.session_seq)
        msg = f"no event of {self.session_id!r} at position {position}"
        raise InvalidInputError(msg)


def mark_of(row: StoredRow) -> _Mark:
    """The few fields of a stored row the points need (all zero if damaged)."""
    try:
        return _mark_decoder.decode(row[4])
    except msgspec.DecodeError:  # a damaged row: verifying names it
        return _Mark()


def scan(store: CanReadHistory, session_id: str) -> SessionMarks:
    """The session's history and its quiet points, in log order."""
    rows = SessionHistory(store).rows(session_id)
    if not rows:
        msg = f"no session {session_id!r} in the log"
        raise InvalidInputError(msg)
    out = SessionMarks(session_id, rows)
    opened: set[int] = set()
    inputs = 0
    starting: int | None = None  # index of the point before the turn just opened
    previous = (0, 0, "")  # (position, seq, chain) of the row before
    for row in rows:
        mark = mark_of(row)
        topic = row[3].removeprefix("turnlog:")
        if topic in ("TurnStarted", "TurnOpened") and mark.number not in opened:
            opened.add(mark.number)
            out.points.append(HistoryPoint(mark.number - 1, previous[0], previous[1]))
            out.chains[previous[0]] = previous[2]
            out.running, starting = mark.number, len(out.points) - 1
        if topic == "TurnStarted":
            out.started_at[mark.number] = row[0]
        elif topic in ("TurnCompleted", "TurnAborted"):
            out.running = None
            out.ended_at[mark.number] = row[0]
        elif topic == "InputAccepted":
            inputs += 1
            if starting is not None and mark.kind in STARTING_KINDS:
                point = out.points[starting]
                out.points[starting] = HistoryPoint(
                    point.after_turn,
                    point.position,
                    point.seq,
                    inputs,
                    mark.text[:PREVIEW],
                )
            else:
                out.steers[inputs] = out.running or 0
            starting = None
        previous = (row[0], mark.session_seq, mark.chain)
    if out.running is None:
        out.points.append(
            HistoryPoint(max(opened, default=0), previous[0], previous[1])
        )
        out.chains[previous[0]] = previous[2]
    gone = set_aside_turns(_set_aside(store, session_id))
    out.points = [
        msgspec.structs.replace(p, rewound=p.after_turn in gone)
        if p.after_turn in gone
        else p
        for p in out.points
    ]
    return out


def _set_aside(store: CanReadHistory, session_id: str) -> list[list[int]]:
    session = store.get(session_uuid(session_id))
    return [] if not isinstance(session, Session) else list(session.set_aside)


def session_at(
    store: CanReadHistory, marks: SessionMarks, position: int
) -> tuple[str, Session]:
    """The Session aggregate as it was at log ``position`` of this history.

    For a point a fork shares with its source, the source's (whose own
    Session holds the state there): returns (its session id, the Session).
    """
    session_id = marks.session_id
    while True:
        own = session_uuid(session_id)
        version = sum(1 for row in marks.rows if row[1] == own and row[0] <= position)
        if version:
            break
        origin = fork_origin([row for row in marks.rows if row[1] == own])
        if origin is None:  # no event of the session yet: cannot happen for a point
            msg = f"no state of {marks.session_id!r} at position {position}"
            raise InvalidInputError(msg)
        session_id = origin.source_session_id
    session = store.get(own, version=version)
    if not isinstance(session, Session):
        msg = f"no Session of {session_id!r} at version {version}"
        raise InvalidInputError(msg)
    return session_id, session
