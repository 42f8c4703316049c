"""A session's history as the log holds it: the one reader of it.

A session is stored as several aggregates: its Session and one Turn per
turn, numbered 1, 2, ... (``turn_uuid``). Reading its history means
reading the Session's events, learning from them how many turns it
started, and reading those turns; and, because a forged or damaged log
may hold a turn its Session does not name, probing past the last one
until a number is missing. Exporting, verifying, following and reopening
a session all read it this way, through :class:`SessionHistory`.

Rows are read straight from the events table (no decoding, so an auditor
sees the stored bytes); :meth:`SessionHistory.events` decodes them with
the log's own guarded mapper, as the store would.

A fork's history is its source's up to the fork point, then its own
(turnlog.domain.lineage): its first event names the source and the log
position of the last event it shares, and those rows are read from the
source (recursively, for a fork of a fork), never copied. A session that
never forked costs nothing more: its first row is read anyway.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec
from eventsourcing.persistence import StoredEvent

from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.domain.lineage import TurnOwners, turn_owner
from turnlog.store.application import LOG_MAPPER

StoredRow = tuple[int, uuid.UUID, int, str, bytes]
"""(position, aggregate id, version, topic, stored state) of one stored event."""

TURN_READ_BATCH = 500
"""Turns read per query."""
TURN_STARTED_TOPIC = "turnlog:TurnStarted"
SESSION_FORKED_TOPIC = "turnlog:SessionForked"


class _StartedTurn(msgspec.Struct):
    number: int = 0


class ForkOrigin(msgspec.Struct, frozen=True):
    """Where a fork's history comes from, as its first event says."""

    source_session_id: str
    source_position: int
    source_seq: int = 0
    source_digest: str = ""
    turn_count: int = 0
    turn_owners: TurnOwners = msgspec.field(default_factory=list)
    set_aside_positions: list[list[int]] = msgspec.field(default_factory=list)


_started_decoder = msgspec.json.Decoder(_StartedTurn)
_origin_decoder = msgspec.json.Decoder(ForkOrigin)


class CanReadStoredRows(Protocol):
    """A log that reads the stored events of aggregates (``Store`` is one)."""

    def stored_rows(self, aggregate_ids: Sequence[uuid.UUID]) -> list[StoredRow]:
        """The stored events of these aggregates, in no particular order."""
        ...


class SessionHistory:
    """Reads sessions' histories from a log.

    Args:
        log: Where the stored events are.
    """

    def __init__(self, log: CanReadStoredRows) -> None:
        self._log = log

    def rows(self, session_id: str) -> list[StoredRow]:
        """Every stored event of the session's aggregates, in log order.

        Empty when the log holds nothing of the session.
        """
        rows = self._log.stored_rows([session_uuid(session_id)])
        origin = fork_origin(rows)
        first = 1 if origin is None else origin.turn_count + 1
        named = max((_started_number(row) for row in rows), default=0)
        # Every turn the Session names, then one past the last found: a turn
        # it does not name (a forged log) must not go unseen.
        rows.extend(
            row for _, row in self._turn_rows(session_id, first, named, probe_past=True)
        )
        if origin is not None:
            rows.extend(
                row
                for row in self.rows(origin.source_session_id)
                if row[0] <= origin.source_position
            )
        rows.sort(key=lambda row: row[0])
        return rows

    def events(self, session_id: str) -> list[Any]:
        """The domain events of :meth:`rows`, decoded, in log order."""
        return [decode_row(row) for row in self.rows(session_id)]

    def turn_events(
        self,
        session_id: str,
        first: int,
        last: int,
        *,
        owners: Sequence[Sequence[Any]] = (),
        skip: frozenset[int] = frozenset(),
    ) -> list[Any]:
        """The domain events of turns ``first`` to ``last``, turn by turn.

        Each turn's events in the order of their versions, the turns in
        the order of their numbers. A fork's first turns are its sources'
        (``owners``, its Session's ``turn_owners``); turns in ``skip`` (set
        aside by a rewind) are left out.
        """
        found = self._turn_rows(
            session_id, first, last, probe_past=False, owners=owners, skip=skip
        )
        found.sort(key=lambda numbered: (numbered[0], numbered[1][2]))
        return [decode_row(row) for _, row in found]

    def _turn_rows(
        self,
        session_id: str,
        first: int,
        last: int,
        *,
        probe_past: bool,
        owners: Sequence[Sequence[Any]] = (),
        skip: frozenset[int] = frozenset(),
    ) -> list[tuple[int, StoredRow]]:
        """(turn number, row) of turns ``first`` to ``last``, in any order.

        With ``probe_past``, also each turn after ``last`` as long as the
        one before it was found.
        """
        out: list[tuple[int, StoredRow]] = []
        numbers = [n for n in range(first, last + 1 + int(probe_past)) if n not in skip]
        while numbers:
            found: set[int] = set()
            for start in range(0, len(numbers), TURN_READ_BATCH):
                chunk = numbers[start : start + TURN_READ_BATCH]
                by_id = {
                    turn_uuid(turn_owner(session_id, owners, n), n): n for n in chunk
                }
                for row in self._log.stored_rows(list(by_id)):
                    number = by_id[row[1]]
                    found.add(number)
                    out.append((number, row))
            newest = numbers[-1]
            numbers = [newest + 1] if probe_past and newest in found else []
        return out


def decode_row(row: StoredRow) -> Any:
    """The domain event a stored row holds (upcast, refused if too new)."""
    _, originator_id, version, topic, state = row
    return LOG_MAPPER.to_domain_event(
        StoredEvent(
            originator_id=originator_id,
            originator_version=version,
            topic=topic,
            state=state,
        )
    )


def fork_origin(session_rows: Sequence[StoredRow]) -> ForkOrigin | None:
    """Where a fork came from, if ``session_rows`` (its Session's) are a fork's."""
    for row in session_rows:
        if row[2] == 1:
            if row[3] != SESSION_FORKED_TOPIC:
                return None
            try:
                return _origin_decoder.decode(row[4])
            except msgspec.DecodeError:  # a damaged row: verifying names it
                return None
    return None


def _started_number(row: StoredRow) -> int:
    """The turn number a ``TurnStarted`` row names (0 for any other row)."""
    if row[3] != TURN_STARTED_TOPIC:
        return 0
    try:
        return _started_decoder.decode(row[4]).number
    except msgspec.DecodeError:  # a damaged row: verifying names it
        return 0
