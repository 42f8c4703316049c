"""Moving sessions between logs: export as JSON lines, import verbatim.

An export starts with a header naming the head of each session's chain
(the seq and chain of its newest event), then holds one line per stored
event of the session (its Session and every Turn), in log order::

    {"turnlog_export": 1, "heads": {"s1": {"seq": 25, "sha256": "..."}}}
    {"originator_id": "...", "originator_version": 1,
     "topic": "turnlog:SessionCreated", "state": {...}}

``state`` is the stored JSON object exactly as the log holds it, so the hash
chain it carries (``session_seq`` and ``chain``) travels with it: a session
imported into another log replays the same EventMsg stream and verifies
there, whatever the backend, and an export edited on the way is refused.
A file cut short keeps an intact chain, so the header's head is what shows
it: events that do not reach it are refused (files concatenated from
several exports keep each one's header).

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

from turnlog.domain.chain import CHAIN_FIELD, SEQ_FIELD
from turnlog.domain.errors import (
    ConcurrencyConflictError,
    InvalidInputError,
    StoreError,
    UnknownSessionError,
)
from turnlog.domain.events import TOPIC_PREFIX, event_class_for, event_name
from turnlog.domain.ids import check_session_id, session_uuid, turn_uuid
from turnlog.store.history import SessionHistory, StoredRow
from turnlog.store.log import Store
from turnlog.store.transfer_lineage import check_carried, lineage_rows

# A Row and the chain check of turnlog.store.verify, so that an import accepts
# exactly the histories `turnlog audit --verify` accepts.
from turnlog.store.verify import (
    ChainProblem,
    ChainRow,
    ExpectedHead,
    first_problem,
    head_problem,
)

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

EXPORT_FORMAT = 1
"""Version of the export layout, in its header."""

FROM_HEADER = "the export header"


class ExportedHead(msgspec.Struct, forbid_unknown_fields=True):
    """Where a session's chain ends: its newest event's seq and chain."""

    seq: Annotated[int, msgspec.Meta(ge=1)]
    sha256: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]


class ExportHeader(msgspec.Struct, forbid_unknown_fields=True):
    """The first line of an export: the format and each session's head."""

    turnlog_export: int
    heads: dict[str, ExportedHead]


_header_decoder = msgspec.json.Decoder(ExportHeader)
_HEADER_START = b'{"turnlog_export"'

Row = StoredRow
"""(position, aggregate id, version, topic, stored state), as Store reads them."""


def session_rows(store: Store, session_id: str) -> list[Row]:
    """Every stored event of the session's aggregates, in log order.

    Raises:
        UnknownSessionError: the log holds no session ``session_id``.
    """
    check_session_id(session_id)
    rows = SessionHistory(store).rows(session_id)
    if not rows:
        msg = f"no session {session_id!r} in the log at {store.location}"
        raise UnknownSessionError(msg)
    return rows


def export_session(store: Store, session_id: str) -> list[bytes]:
    """The session's stored events as JSON lines (each ending in a newline).

    Raises:
        UnknownSessionError: the log holds no session ``session_id``.
        StoreError: a stored state is not a JSON object (the log is damaged).
    """
    lines = []
    head: ExportedHead | None = None
    for position, aggregate, version, topic, state in session_rows(store, session_id):
        try:
            decoded = _state_decoder.decode(state)
        except msgspec.DecodeError as error:
            msg = f"log entry {position} ({topic}) holds no JSON object: {error}"
            raise StoreError(msg) from error
        seq, chain = decoded.get(SEQ_FIELD, 0), decoded.get(CHAIN_FIELD)
        if isinstance(chain, str) and seq > (0 if head is None else head.seq):
            head = ExportedHead(seq, chain)
        record = {
            "originator_id": str(aggregate),
            "originator_version": version,
            "topic": topic,
            # Verbatim: the bytes the log holds, not a re-encoding of them.
            "state": msgspec.Raw(state),
        }
        lines.append(_encoder.encode(record) + b"\n")
    heads = {} if head is None else {session_id: head}
    header = ExportHeader(EXPORT_FORMAT, heads)
    return [_encoder.encode(header) + b"\n", *lines]


def export_sessions(store: Store, session_ids: Sequence[str]) -> list[bytes]:
    """One export of several sessions: a header naming every head, then
    each session's events (as :func:`export_session` gives them)."""
    heads: dict[str, ExportedHead] = {}
    events: list[bytes] = []
    for session_id in session_ids:
        header, *lines = export_session(store, session_id)
        heads.update(_header_decoder.decode(header).heads)
        events.extend(lines)
    return [_encoder.encode(ExportHeader(EXPORT_FORMAT, heads)) + b"\n", *events]


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


class ExportFile(msgspec.Struct):
    """What an export holds: its events and the heads its headers name."""

    events: list[tuple[int, ExportedEvent]]
    """(line number, event), in file order."""
    heads: dict[str, tuple[int, ExportedHead]]
    """Session id: (line number of its header, its head)."""


def _read_header(
    number: int, line: bytes | str, heads: dict[str, tuple[int, ExportedHead]]
) -> None:
    try:
        header = _header_decoder.decode(line)
    except msgspec.DecodeError as error:
        msg = f"line {number} is not a turnlog export header: {error}"
        raise InvalidInputError(msg) from error
    if header.turnlog_export != EXPORT_FORMAT:
        msg = (
            f"line {number} is an export of format {header.turnlog_export}; "
            f"this turnlog reads format {EXPORT_FORMAT}"
        )
        raise InvalidInputError(msg)
    for session_id, head in header.heads.items():
        known = heads.setdefault(session_id, (number, head))
        if known[1] != head:
            msg = (
                f"lines {known[0]} and {number} name different heads of "
                f"session {session_id!r}"
            )
            raise InvalidInputError(msg)


def read_export(lines: Iterable[bytes | str]) -> ExportFile:
    """The headers and events of an export, checked; blank lines are skipped.

    Raises:
        InvalidInputError: a line is not an export header or an exported
            turnlog event, or the file holds no event.
    """
    export = ExportFile([], {})
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        raw = line.encode() if isinstance(line, str) else line
        if raw.lstrip().startswith(_HEADER_START):
            _read_header(number, line, export.heads)
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
        export.events.append((number, event))
    if not export.events:
        msg = "the file holds no events (expected the output of `turnlog export`)"
        raise InvalidInputError(msg)
    return export


def _check_session(
    session_id: str,
    numbered: list[tuple[int, ExportedEvent]],
    head: ExportedHead,
    shared: frozenset[uuid.UUID] = frozenset(),
) -> None:
    """Refuses a session whose events are foreign to it, break its chain,
    or do not end at the ``head`` its header names. ``shared``: the
    aggregates of a fork's sources whose prefix ``numbered`` begins with."""
    turns = max(
        (
            e.state.get("number", 0)
            for _, e in numbered
            if e.topic.endswith(":TurnOpened")
        ),
        default=0,
    )
    own = (
        {session_uuid(session_id)}
        | shared
        | {turn_uuid(session_id, n) for n in range(1, turns + 1)}
    )
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
    problem = first_problem(rows) or head_problem(
        rows, ExpectedHead(head.seq, head.sha256, FROM_HEADER)
    )
    if problem is not None:
        raise InvalidInputError(_describe_problem(session_id, problem))
    last = rows[-1]  # sorted by seq, and intact: the seq is its number
    if last.state[SEQ_FIELD] != head.seq:
        msg = (
            f"session {session_id!r} does not verify: line {last.position} "
            f"({event_name(last.topic)}, sequence {last.state[SEQ_FIELD]}) "
            f"comes after the head its export header names (sequence {head.seq})"
        )
        raise InvalidInputError(msg)


def _describe_problem(session_id: str, problem: ChainProblem) -> str:
    seq = (
        "no sequence" if problem.sequence is None else (f"sequence {problem.sequence}")
    )
    name = event_name(problem.topic)
    if problem.kind == "truncated":
        return (
            f"session {session_id!r} is cut short after line {problem.position} "
            f"({name}, {seq}): {problem.detail}"
        )
    return (
        f"session {session_id!r} does not verify: line {problem.position} "
        f"({name}, {seq}) is {problem.kind}: {problem.detail}"
    )


def _sessions(
    events: Sequence[tuple[int, ExportedEvent]],
) -> dict[str, list[tuple[int, ExportedEvent]]]:
    # In file order: that order is the source log's order, which the chain
    # check holds the file to.
    sessions: dict[str, list[tuple[int, ExportedEvent]]] = {}
    for number, event in events:
        sessions.setdefault(event.state["session_id"], []).append((number, event))
    return sessions


def _head_of(export: ExportFile, session_id: str) -> ExportedHead:
    named = export.heads.get(session_id)
    if named is None:
        msg = (
            f"no export header names the head of session {session_id!r}: the "
            "file is not a whole `turnlog export` (its first line is missing)"
        )
        raise InvalidInputError(msg)
    return named[1]


class CheckedExport(msgspec.Struct, frozen=True):
    """An export file that verified on its own (see :func:`check_export`)."""

    export: ExportFile
    sessions: dict[str, Any]
    """The events of every session in the file, by session, in file order."""
    carried: frozenset[str]
    """Sessions no header names: the prefixes forks carry of their sources."""
    lineage: dict[str, Any]
    """Each exported session's rows (a fork's begin with its sources'
    prefixes) and the sources it was forked from."""

    def heads(self) -> dict[str, tuple[int, ExportedHead]]:
        """(events in the file, head) of each session a header names."""
        return {
            sid: (len(rows), _head_of(self.export, sid))
            for sid, rows in self.sessions.items()
            if sid not in self.carried
        }


def check_export(lines: Iterable[bytes | str]) -> CheckedExport:
    """Checks an export file on its own, before any log is opened.

    Every session in it must verify and end at the head its header names;
    a fork's chain is checked over the prefix of its source it carries.

    Raises:
        InvalidInputError: the file is not a turnlog export, or a session in
            it does not verify or falls short of its header's head.
    """
    export = read_export(lines)
    sessions = _sessions(export.events)
    for session_id, (number, _) in export.heads.items():
        if session_id not in sessions:
            msg = (
                f"the export header on line {number} names session {session_id!r}, "
                "but the file holds none of its events"
            )
            raise InvalidInputError(msg)
    carried = frozenset(sid for sid in sessions if sid not in export.heads)
    lineage: dict[str, Any] = {}
    for session_id, numbered in sessions.items():
        if session_id in carried:
            continue
        check_session_id(session_id)
        rows, sources = lineage_rows(session_id, sessions)
        shared = frozenset(
            e.originator_id for _, e in rows[: len(rows) - len(numbered)]
        )
        _check_session(session_id, rows, _head_of(export, session_id), shared)
        lineage[session_id] = (rows, sources)
    return CheckedExport(export, dict(sessions), carried, lineage)


def export_heads(lines: Iterable[bytes | str]) -> dict[str, tuple[int, ExportedHead]]:
    """Checks an export on its own, as an import would: (events, head) of
    each session it exports.

    Raises:
        InvalidInputError: the file is not an intact turnlog export.
    """
    return check_export(lines).heads()


def import_events(store: Store, lines: Iterable[bytes | str] | CheckedExport) -> int:
    """Writes exported events into ``store`` verbatim; returns how many.

    Every session in the file is checked first (:func:`check_export`, unless
    ``lines`` is its result already), and that the log holds none of them
    and each fork's source as the fork's export carries it; then all the
    events are inserted in one transaction, in file order, so nothing is
    written unless everything is.

    Raises:
        InvalidInputError: the file is not a turnlog export, a session in it
            does not verify or falls short of its header's head, a fork's
            source is not in the log as the file carries it, or the log
            already holds one of its sessions.
        StoreError: the log could not be written.
    """
    checked = lines if isinstance(lines, CheckedExport) else check_export(lines)
    export, sessions, carried = checked.export, checked.sessions, checked.carried
    needed: set[str] = set()
    for session_id, (rows, sources) in checked.lineage.items():
        needed.update(sources)
        for source in sources:
            if source in carried:
                prefix = [
                    pair for pair in rows if pair[1].state["session_id"] == source
                ]
                check_carried(store, session_id, source, prefix)
        if store.stored_rows([session_uuid(session_id)]):
            msg = (
                f"session {session_id!r} is already in the log at {store.location}; "
                "nothing was imported"
            )
            raise InvalidInputError(msg)
    for session_id in carried - needed:
        _head_of(export, session_id)  # refused: no header, and no fork's source
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
        for _, event in export.events
        if event.state["session_id"] not in carried
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
