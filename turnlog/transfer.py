"""Moving sessions between logs: export as JSON lines, import verbatim.

An export holds one line per stored event of a session (its Session and
every Turn), in log order::

    {"originator_id": "...", "originator_version": 1,
     "topic": "turnlog:SessionCreated", "state": {...}}

``state`` is the stored JSON object exactly as the log holds it, so the hash
chain it carries (``session_seq`` and ``chain``) travels with it: a session
imported into another log replays the same EventMsg stream and verifies
there, whatever the backend, and an export edited on the way is refused.

An import is all or nothing: the file is checked whole (format, known
topics, aggregates of the sessions named, an intact chain per session)
before anything is written, and the events go in with one transaction.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import msgspec
from eventsourcing.persistence import StoredEvent

from turnlog.domain.errors import (
    ConcurrencyConflictError,
    InvalidInputError,
    StoreError,
    UnknownSessionError,
)
from turnlog.domain.events import TOPIC_PREFIX, event_class_for, event_name
from turnlog.domain.ids import check_session_id, session_uuid, turn_uuid
from turnlog.store import Store

# A Row and the chain check of turnlog.verify, so that an import accepts
# exactly the histories `turnlog audit --verify` accepts.
from turnlog.verify import ChainProblem, ChainRow, first_problem

TURN_PROBE_BATCH = 64
"""Turn aggregates looked up per query while collecting a session."""

_state_decoder = msgspec.json.Decoder(dict[str, Any])
_encoder = msgspec.json.Encoder()


class ExportedEvent(msgspec.Struct, forbid_unknown_fields=True):
    """One line of an export: a stored event, as the log holds it."""

    originator_id: uuid.UUID
    """The aggregate (a Session or one of its Turns)."""
    originator_version: Annotated[int, msgspec.Meta(ge=1)]
    """The event's version within its aggregate."""
    topic: str
    """The stored topic, ``turnlog:<EventName>``."""
    state: dict[str, Any]
    """The stored state: the event's fields, ``session_seq`` and ``chain``."""


_line_decoder = msgspec.json.Decoder(ExportedEvent)

Row = tuple[int, uuid.UUID, int, str, bytes]
"""(position, aggregate id, version, topic, stored state), as Store reads them."""


def session_rows(store: Store, session_id: str) -> list[Row]:
    """Every stored event of the session's aggregates, in log order.

    Raises:
        UnknownSessionError: the log holds no session ``session_id``.
    """
    check_session_id(session_id)
    rows = list(store.stored_rows([session_uuid(session_id)]))
    if not rows:
        msg = f"no session {session_id!r} in the log at {store.location}"
        raise UnknownSessionError(msg)
    # Turns are numbered 1, 2, ... with no gaps: probe a batch of numbers
    # at a time, until a batch holds a turn that is not there.
    first = 1
    while True:
        ids = [turn_uuid(session_id, n) for n in range(first, first + TURN_PROBE_BATCH)]
        found = store.stored_rows(ids)
        rows.extend(found)
        if len({row[1] for row in found}) < len(ids):
            break
        first += TURN_PROBE_BATCH
    rows.sort(key=lambda row: row[0])
    return rows


def export_session(store: Store, session_id: str) -> list[bytes]:
    """The session's stored events as JSON lines (each ending in a newline).

    Raises:
        UnknownSessionError: the log holds no session ``session_id``.
        StoreError: a stored state is not a JSON object (the log is damaged).
    """
    lines = []
    for position, aggregate, version, topic, state in session_rows(store, session_id):
        try:
            _state_decoder.decode(state)
        except msgspec.DecodeError as error:
            msg = f"log entry {position} ({topic}) holds no JSON object: {error}"
            raise StoreError(msg) from error
        record = {
            "originator_id": str(aggregate),
            "originator_version": version,
            "topic": topic,
            # Verbatim: the bytes the log holds, not a re-encoding of them.
            "state": msgspec.Raw(state),
        }
        lines.append(_encoder.encode(record) + b"\n")
    return lines


def write_lines(path: str, lines: Sequence[bytes]) -> None:
    """Writes an export to the file ``path``.

    Raises:
        InvalidInputError: the file cannot be written.
    """
    try:
        with Path(path).open("wb") as file:
            file.writelines(lines)
    except OSError as error:
        msg = f"cannot write {path}: {error.strerror or error}"
        raise InvalidInputError(msg) from error


def read_lines(path: str) -> list[bytes]:
    """The lines of the file ``path`` (``-``: standard input), for import.

    Raises:
        InvalidInputError: the file cannot be read.
    """
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as error:
        msg = f"cannot read {path}: {error.strerror or error}"
        raise InvalidInputError(msg) from error
    return data.splitlines()


def read_export(lines: Iterable[bytes | str]) -> list[ExportedEvent]:
    """The events of an export, checked; blank lines are skipped.

    Raises:
        InvalidInputError: a line is not an exported turnlog event, or the
            file holds none.
    """
    events = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = _line_decoder.decode(line)
        except msgspec.DecodeError as error:
            msg = f"line {number} is not a turnlog export event: {error}"
            raise InvalidInputError(msg) from error
        if not event.topic.startswith(TOPIC_PREFIX) or (
            event_class_for(event_name(event.topic)) is None
        ):
            msg = f"line {number} has topic {event.topic!r}, not a turnlog event"
            raise InvalidInputError(msg)
        if not isinstance(event.state.get("session_id"), str):
            msg = f"line {number} ({event.topic}) names no session"
            raise InvalidInputError(msg)
        events.append(event)
    if not events:
        msg = "the file holds no events (expected the output of `turnlog export`)"
        raise InvalidInputError(msg)
    return events


def _check_session(session_id: str, numbered: list[tuple[int, ExportedEvent]]) -> None:
    """Refuses a session whose events are foreign to it or break its chain."""
    turns = max(
        (
            e.state.get("number", 0)
            for _, e in numbered
            if e.topic.endswith(":TurnOpened")
        ),
        default=0,
    )
    own = {session_uuid(session_id)} | {
        turn_uuid(session_id, n) for n in range(1, turns + 1)
    }
    for number, event in numbered:
        if event.originator_id not in own:
            msg = (
                f"line {number} ({event_name(event.topic)}) belongs to no aggregate "
                f"of session {session_id!r}"
            )
            raise InvalidInputError(msg)
    rows = [
        ChainRow(number, e.topic, str(e.originator_id), e.originator_version, e.state)
        for number, e in numbered
    ]
    problem = first_problem(rows)
    if problem is not None:
        raise InvalidInputError(_describe_problem(session_id, problem))


def _describe_problem(session_id: str, problem: ChainProblem) -> str:
    seq = (
        "no session seq"
        if problem.session_seq is None
        else (f"session seq {problem.session_seq}")
    )
    return (
        f"session {session_id!r} does not verify: line {problem.position} "
        f"({event_name(problem.topic)}, {seq}) is {problem.kind}: {problem.detail}"
    )


def _sessions(
    events: Sequence[ExportedEvent],
) -> dict[str, list[tuple[int, ExportedEvent]]]:
    # Numbered in file order: that order is the source log's order, which
    # the chain check holds the file to.
    sessions: dict[str, list[tuple[int, ExportedEvent]]] = {}
    for number, event in enumerate(events, start=1):
        sessions.setdefault(event.state["session_id"], []).append((number, event))
    return sessions


def import_events(store: Store, lines: Iterable[bytes | str]) -> int:
    """Writes exported events into ``store`` verbatim; returns how many.

    Every session in the file is checked first; then all the events are
    inserted in one transaction, in file order, so nothing is written
    unless everything is.

    Raises:
        InvalidInputError: the file is not a turnlog export, a session in it
            does not verify, or the log already holds one of its sessions.
        StoreError: the log could not be written.
    """
    events = read_export(lines)
    sessions = _sessions(events)
    for session_id, numbered in sessions.items():
        check_session_id(session_id)
        _check_session(session_id, numbered)
        if store.stored_rows([session_uuid(session_id)]):
            msg = (
                f"session {session_id!r} is already in the log at {store.location}; "
                "nothing was imported"
            )
            raise InvalidInputError(msg)
    stored = [
        StoredEvent(
            originator_id=event.originator_id,
            originator_version=event.originator_version,
            topic=event.topic,
            # The stored JSON holds only strings, numbers, bools, null, lists
            # and objects, so decoding and encoding it again gives the
            # source's bytes back.
            state=_encoder.encode(event.state),
        )
        for event in events
    ]
    try:
        store.insert_stored(stored)
    except ConcurrencyConflictError as error:
        # The pre-check above saw no such session, so another writer got in
        # between: the events clash with ones it wrote. Nothing was written.
        msg = (
            f"the log at {store.location} already holds events of "
            f"{', '.join(map(repr, sessions))}; nothing was imported"
        )
        raise InvalidInputError(msg) from error
    return len(stored)
