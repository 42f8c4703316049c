"""``turnlog backup``: an online, consistent copy of a live SQLite log.

The copy is made with SQLite's backup API in one step, from one read
snapshot: it holds exactly the commits made before it started, whatever
the sessions writing beside it do (in WAL mode a reader blocks no
writer). It is written beside its destination under a temporary name,
checked (``PRAGMA integrity_check``, then every session's hash chain,
as ``turnlog audit --verify --all`` does), flushed to disk, and only
then renamed into place: a destination that exists is a backup that
verified. A PostgreSQL log is backed up with ``pg_dump`` (see the
README's "Stores" section); this refuses it with that advice.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from turnlog.cli.exits import EXIT_OK
from turnlog.cli.log_location import store_url
from turnlog.domain.errors import InvalidInputError, StoreError, UsageError
from turnlog.projections.anchors import recorded_heads
from turnlog.store.log import Store
from turnlog.store.opening import parse_store_url
from turnlog.store.verify import verify_each

PG_DUMP_ADVICE = (
    "a PostgreSQL log is backed up with pg_dump: pg_dump --schema=SCHEMA "
    "--file=turnlog.sql URL (see the README's Stores section)"
)


@dataclass(frozen=True)
class BackupReport:
    """What a backup copied and checked."""

    path: Path
    """Where the copy is."""
    sessions: int
    """Sessions whose chains verified in the copy."""
    events: int
    """Events checked."""
    size: int
    """Bytes of the copy."""


def sqlite_file(url: str | None) -> Path:
    """The file of the SQLite log ``url`` names (UsageError for any other)."""
    env = parse_store_url(url)
    name = env.get("SQLITE_DBNAME")
    if name is None:
        raise UsageError(PG_DUMP_ADVICE)
    if name.startswith("file:"):
        msg = "a memory:// log has nothing to back up"
        raise UsageError(msg)
    path = Path(name)
    if not path.exists():
        msg = f"there is no log at {path}"
        raise UsageError(msg)
    return path


def backup_log(url: str | None, destination: str | os.PathLike[str]) -> BackupReport:
    """Copies the live SQLite log ``url`` to ``destination`` and verifies it.

    Raises:
        UsageError: ``url`` is not an SQLite file log, or ``destination``
            exists (a backup never overwrites anything).
        InvalidInputError: the destination cannot be written.
        StoreError: the copy does not verify (it is removed; nothing is left
            at ``destination``).
    """
    source = sqlite_file(url)
    target = Path(destination)
    if target.exists():
        msg = f"{target} exists: a backup goes to a new file"
        raise UsageError(msg)
    if target.resolve() == source.resolve():
        msg = "a backup cannot be the log itself"
        raise UsageError(msg)
    partial = target.with_name(f".{target.name}.partial")
    try:
        _copy(source, partial)
        report = _verify(partial)
        _flush(partial)
        partial.replace(target)
        _flush(target.parent)
    except OSError as error:
        msg = f"cannot write {target}: {error.strerror or error}"
        raise InvalidInputError(msg) from error
    finally:
        for leftover in (partial, partial.with_name(partial.name + "-wal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
        with contextlib.suppress(OSError):
            partial.with_name(partial.name + "-shm").unlink()
    return BackupReport(target, report[0], report[1], target.stat().st_size)


def _copy(source: Path, partial: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(partial)
        try:
            src.backup(dst)  # every page, from one read snapshot
            # One file, no WAL beside it, so a rename moves the whole copy.
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            dst.close()
    finally:
        src.close()


def _verify(partial: Path) -> tuple[int, int]:
    check = sqlite3.connect(f"{partial.resolve().as_uri()}?mode=ro", uri=True)
    try:
        found = check.execute("PRAGMA integrity_check(5)").fetchall()
    finally:
        check.close()
    if [row[0] for row in found] != ["ok"]:
        msg = f"the backup does not verify: {'; '.join(r[0] for r in found)}"
        raise StoreError(msg)
    store = Store(f"sqlite:///{partial.resolve()}", read_only=True)
    sessions = events = 0
    try:
        for report in verify_each(store, recorded_heads(store)):
            if not report.ok:
                msg = f"the backup does not verify: session {report.session_id!r}"
                raise StoreError(msg)
            sessions += 1
            events += report.events
    finally:
        store.close()
    return sessions, events


def _flush(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def command_backup(args: argparse.Namespace) -> int:
    """``turnlog backup DEST``: copies the log, verifies the copy, says so."""
    report = backup_log(store_url(args), args.destination)
    print(
        f"backed up the log to {report.path} ({report.size:,} bytes): "
        f"{report.sessions} sessions, {report.events} events verified"
    )
    return EXIT_OK
