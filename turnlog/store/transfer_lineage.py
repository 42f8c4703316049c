"""Exporting and importing forks: the source's prefix travels, for checking.

A fork's history up to its fork point is its source's (turnlog.domain.
lineage), so its export carries those events of the source (and of the
source's sources), with the fork's own: the file alone verifies as one
chain. The header names the fork's head only; the sessions it carries a
prefix of are named by none.

Importing a fork never creates its source: a carried prefix is compared,
event by event, with the source the log already holds, and the import is
refused if the log has no such source or holds a different one ("import
the source first"). A source exported whole in the same file (its own
header) is imported with it. Only the fork's own events are written.
"""

from __future__ import annotations

from typing import Any

import msgspec

from turnlog.domain.chain import SEQ_FIELD
from turnlog.domain.errors import InvalidInputError
from turnlog.store.log import Store

FORKED_TOPIC = "turnlog:SessionForked"

Numbered = list[tuple[int, Any]]
"""(line number, ExportedEvent) pairs of one session, in file order."""

_state_encoder = msgspec.json.Encoder()


def source_of(numbered: Numbered) -> tuple[str, int] | None:
    """(source session, source seq) if these rows are a fork's."""
    for _, event in numbered:
        if event.topic == FORKED_TOPIC and event.originator_version == 1:
            return str(event.state["source_session_id"]), int(event.state["source_seq"])
    return None


def lineage_rows(
    session_id: str, sessions: dict[str, Numbered]
) -> tuple[Numbered, list[str]]:
    """The rows a session's chain check needs (its sources' prefix, then its
    own) and the sources it comes from, nearest first."""
    own = sessions[session_id]
    origin = source_of(own)
    if origin is None:
        return own, []
    sources: list[str] = []
    prefix: dict[tuple[Any, int], tuple[int, Any]] = {}
    limit = origin[1]
    current: str | None = origin[0]
    while current is not None:
        sources.append(current)
        rows = sessions.get(current, [])
        for number, event in rows:
            if event.state.get(SEQ_FIELD, 0) <= limit:
                prefix.setdefault(
                    (event.originator_id, event.originator_version), (number, event)
                )
        upper = source_of(rows)
        current = None if upper is None else upper[0]
    shared = sorted(prefix.values(), key=lambda pair: pair[1].state.get(SEQ_FIELD, 0))
    return [*shared, *own], sources


def check_carried(store: Store, fork_id: str, carried: str, rows: Numbered) -> None:
    """Refuses a carried prefix of ``carried`` the log does not hold as is."""
    held = {
        (aggregate, version): state
        for _, aggregate, version, _, state in store.stored_rows(
            sorted({event.originator_id for _, event in rows})
        )
    }
    for number, event in rows:
        stored = held.get((event.originator_id, event.originator_version))
        if stored is None:
            msg = (
                f"session {fork_id!r} is a fork of {carried!r}, which the log at "
                f"{store.location} does not hold: import {carried!r} first (a fork "
                "is never imported without its source); nothing was imported"
            )
            raise InvalidInputError(msg)
        if msgspec.json.decode(stored) != event.state:
            msg = (
                f"session {fork_id!r} is a fork of {carried!r}, but line {number} "
                f"differs from {carried!r} in the log at {store.location}: not "
                "the same source; nothing was imported"
            )
            raise InvalidInputError(msg)
