"""Retention: finished sessions move from the live log to an archive file.

``archive_sessions`` writes the sessions' stored events to an archive (an
export holding them all, readable by ``turnlog import``), checks the file
as an import would, and only then, in one transaction, removes from the
live log exactly the events it archived, their view documents and their
leases, and records in ``turnlog_archived`` where each session went and
the head of its chain. The transaction holds off saves and makes sure
nothing was added to a session after it was read: if anything was, or a
session is held by a live lease, nothing is removed at all. A crash
before the commit leaves the log as it was (the archive file is then a
spare copy); after it, every removed event is in an archive that
verified. The record is a table, not a view: views are rebuilt from the
log, which no longer holds these events.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnlog.domain.errors import InvalidInputError, StoreError, UsageError
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.store.fencing import LEASE_TABLE
from turnlog.store.history import StoredRow
from turnlog.store.log import Store
from turnlog.store.ownership import LEASE_SECONDS
from turnlog.store.transfer import (
    ExportedHead,
    export_heads,
    export_sessions,
    session_rows,
)

ARCHIVE_TABLE = "turnlog_archived"


@dataclass(frozen=True)
class ArchivedSession:
    """Where an archived session went, and the head of its chain there."""

    session_id: str
    archive: str
    """The archive file, as the archiving process named it (absolute)."""
    head_seq: int
    head_sha256: str
    events: int
    archived_at: float
    """``time.time()`` of the archiving."""


def _table(store: Store) -> str:
    return store.backend.qualify(ARCHIVE_TABLE)


def create_archive_table(store: Store) -> None:
    """Makes the table of archived sessions, if it is not there."""
    with store.transaction() as cursor:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {_table(store)} ("
            "session_id TEXT PRIMARY KEY, archive TEXT NOT NULL, "
            "head_seq BIGINT NOT NULL, head_sha256 TEXT NOT NULL, "
            "events BIGINT NOT NULL, archived_at DOUBLE PRECISION NOT NULL)"
        )


def archived_session(store: Store, session_id: str) -> ArchivedSession | None:
    """Where ``session_id`` was archived to (None: it never was)."""
    statement = store.sql(
        "SELECT session_id, archive, head_seq, head_sha256, events, archived_at "
        f"FROM {_table(store)} WHERE session_id = ?"
    )
    try:
        with store.reading() as cursor:
            cursor.execute(statement, (session_id,))
            rows = cursor.fetchall()
    except StoreError:  # no such table: nothing was ever archived here
        return None
    if not rows:
        return None
    row = rows[0]
    return ArchivedSession(
        str(row["session_id"]),
        str(row["archive"]),
        int(row["head_seq"]),
        str(row["head_sha256"]),
        int(row["events"]),
        float(row["archived_at"]),
    )


def leased_sessions(store: Store, session_ids: Sequence[str]) -> set[str]:
    """Those of ``session_ids`` a runtime holds open now (a live lease)."""
    if not session_ids:
        return set()
    condition, params = store.backend.where_in("session_id", list(session_ids))
    leases = store.backend.qualify(LEASE_TABLE)
    with store.reading() as cursor:
        cursor.execute(
            f"SELECT session_id FROM {leases} WHERE {condition} AND renewed > "
            f"{store.sql('?')}",
            [*params, time.time() - LEASE_SECONDS],
        )
        return {str(row["session_id"]) for row in cursor.fetchall()}


def archive_sessions(
    store: Store, session_ids: Sequence[str], destination: str | os.PathLike[str]
) -> list[ArchivedSession]:
    """Moves ``session_ids`` from the live log to the archive ``destination``.

    Raises:
        UsageError: ``destination`` exists, or no session is named.
        UnknownSessionError: the log holds no such session.
        StoreError: a session changed while it was archived, or is held by
            a live lease; nothing was removed from the log.
    """
    if not session_ids:
        msg = "no sessions to archive"
        raise UsageError(msg)
    target = Path(destination).absolute()
    if target.exists():
        msg = f"{target} exists: an archive goes to a new file"
        raise UsageError(msg)
    rows = {sid: session_rows(store, sid) for sid in session_ids}
    lines = export_sessions(store, session_ids)
    checked = _write_verified(target, lines)
    create_archive_table(store)
    now = time.time()
    records = [
        ArchivedSession(
            sid,
            str(target),
            checked[sid][1].seq,
            checked[sid][1].sha256,
            checked[sid][0],
            now,
        )
        for sid in session_ids
    ]
    _remove(store, rows, records, now)
    return records


def _write_verified(
    target: Path, lines: list[bytes]
) -> dict[str, tuple[int, ExportedHead]]:
    """Writes the archive under a temporary name, reads it back and checks it,
    flushes it and renames it into place."""
    partial = target.with_name(f".{target.name}.partial")
    try:
        with partial.open("wb") as file:
            file.writelines(lines)
            file.flush()
            os.fsync(file.fileno())
        checked = export_heads(partial.read_bytes().splitlines())
        partial.replace(target)
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as error:
        msg = f"cannot write {target}: {error.strerror or error}"
        raise InvalidInputError(msg) from error
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
    return checked


def _remove(
    store: Store,
    rows: dict[str, list[StoredRow]],
    records: list[ArchivedSession],
    now: float,
) -> None:
    """Removes the archived events, views and leases, and records where the
    sessions went: all in one transaction, or nothing."""
    backend = store.backend
    events, position = store.events_table, backend.position_column
    docs, leases = backend.tables.docs, backend.qualify(LEASE_TABLE)
    with store.transaction() as cursor:
        backend.lock_out_saves(cursor)  # PostgreSQL; SQLite's write lock does it
        for record in records:
            sid = record.session_id
            archived = [row[0] for row in rows[sid]]
            for start in range(0, len(archived), 500):
                condition, params = backend.where_in(
                    position, archived[start : start + 500]
                )
                cursor.execute(f"DELETE FROM {events} WHERE {condition}", params)
            # Its aggregates (the session, its turns) and the next turn's: an
            # event of any of them now was not archived.
            aggregates = len({row[1] for row in rows[sid]})
            ids = [session_uuid(sid)]
            ids += [turn_uuid(sid, n) for n in range(1, aggregates + 1)]
            condition, params = backend.where_in(
                "originator_id", [backend.aggregate_key(a) for a in ids]
            )
            cursor.execute(
                f"SELECT count(*) AS n FROM {events} WHERE {condition}", params
            )
            if _first(cursor.fetchall()):
                msg = (
                    f"session {sid!r} changed while it was archived; nothing was "
                    f"removed from the log ({record.archive} is a spare copy)"
                )
                raise StoreError(msg)
            cursor.execute(
                store.sql(
                    f"SELECT count(*) AS n FROM {leases} "
                    "WHERE session_id = ? AND renewed > ?"
                ),
                (sid, now - LEASE_SECONDS),
            )
            if _first(cursor.fetchall()):
                msg = (
                    f"session {sid!r} is open in a runtime (it holds a live lease); "
                    "nothing was removed from the log"
                )
                raise StoreError(msg)
            cursor.execute(
                store.sql(f"DELETE FROM {leases} WHERE session_id = ?"), (sid,)
            )
            cursor.execute(store.sql(f"DELETE FROM {docs} WHERE part = ?"), (sid,))
            # A session archived before, imported again and archived anew:
            # the record names the newest archive.
            cursor.execute(
                store.sql(f"DELETE FROM {_table(store)} WHERE session_id = ?"), (sid,)
            )
            cursor.execute(
                store.sql(
                    f"INSERT INTO {_table(store)} (session_id, archive, head_seq, "
                    "head_sha256, events, archived_at) VALUES (?, ?, ?, ?, ?, ?)"
                ),
                (
                    sid,
                    record.archive,
                    record.head_seq,
                    record.head_sha256,
                    record.events,
                    record.archived_at,
                ),
            )


def _first(rows: list[Any]) -> int:
    return int(rows[0]["n"])
