"""``turnlog archive``, and ``audit`` of a session that was archived.

``turnlog archive --before DATE -o FILE`` (or ``--session ID``, repeated)
moves finished sessions (no turn running or waiting for an approval,
last active before DATE) out of the live
log into one archive file that verifies on its own (see
``turnlog.store.archive``). Afterwards ``turnlog audit SESSION`` says
where the session went, and ``turnlog audit SESSION --verify --against
FILE`` checks its chain in the archive against the head the log recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from turnlog.cli.exits import EXIT_FAILURE, EXIT_OK
from turnlog.cli.log_location import missing_log, require_log, store_url
from turnlog.cli.reading import open_for_reading, runtime_for_reading
from turnlog.domain.errors import InvalidInputError, TurnlogError, UsageError
from turnlog.domain.ids import check_session_id, session_uuid
from turnlog.projections.sessions import SessionState
from turnlog.store.archive import (
    ArchivedSession,
    archive_sessions,
    archived_session,
    leased_sessions,
)
from turnlog.store.log import Store
from turnlog.store.transfer import export_heads, read_lines

_EXPORT_START = b'{"turnlog_export"'
_UNFINISHED = frozenset({SessionState.RUNNING, SessionState.WAITING_FOR_APPROVAL})
"""A turn runs (or waits for an approval): the session is not finished."""


def parse_date(text: str) -> datetime:
    """An ISO date or date-time (UTC unless it says otherwise)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        msg = f"--before wants an ISO date (2026-01-31) or date-time, not {text!r}"
        raise UsageError(msg) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def command_archive(args: argparse.Namespace) -> int:
    """Archives the sessions ``args`` select to ``args.output``."""
    if (args.before is None) == (not args.session):
        msg = "say which sessions: --before DATE or --session ID (not both)"
        raise UsageError(msg)
    before = None if args.before is None else parse_date(args.before)
    named = [check_session_id(s) for s in args.session or ()]
    if Path(args.output).exists():
        msg = f"{args.output} exists: an archive goes to a new file"
        raise UsageError(msg)
    url = store_url(args)
    require_log(url)
    with runtime_for_reading(url) as runtime:
        summaries = {s.session_id: s for s in runtime.summaries.all()}
    if before is not None:
        chosen = [
            sid
            for sid, s in summaries.items()
            if s.state not in _UNFINISHED
            and s.last_activity is not None
            and s.last_activity < before
        ]
    else:
        for sid in named:
            summary = summaries.get(sid)
            if summary is None:
                msg = f"no session {sid!r} in the log"
                raise UsageError(msg)
            if summary.state in _UNFINISHED:
                msg = f"session {sid!r} is {summary.state}: only finished sessions go"
                raise UsageError(msg)
        chosen = named
    with contextlib.closing(Store(url)) as store:
        held = leased_sessions(store, chosen)
        if held and named:
            msg = f"session {sorted(held)[0]!r} is open in a runtime: close it first"
            raise UsageError(msg)
        if held:  # open somewhere: it may go on, so it stays
            names = ", ".join(sorted(held))
            print(f"skipped {len(held)} sessions open in a runtime: {names}")
        chosen = [sid for sid in chosen if sid not in held]
        if not chosen:
            print("no finished sessions to archive")
            return EXIT_OK
        records = archive_sessions(store, chosen, args.output)
    events = sum(r.events for r in records)
    print(
        f"archived {len(records)} sessions ({events} events) to "
        f"{records[0].archive}; they are gone from the live log"
    )
    return EXIT_OK


def audit_archived(args: argparse.Namespace) -> int | None:
    """``audit SESSION`` of a session archived away (None: it was not)."""
    session_id = check_session_id(args.session)
    against = args.against
    is_archive = (
        against is not None
        and Path(against).is_file()
        and Path(against).read_bytes()[: len(_EXPORT_START)] == _EXPORT_START
    )
    url = store_url(args)
    record = None
    if missing_log(url) is None:
        # A log that cannot be read is left to audit itself, which says why.
        with contextlib.suppress(TurnlogError, sqlite3.Error):
            record = _record(url, session_id)
    if is_archive:
        return _verify_archive(session_id, against, record)
    if record is None:
        return None
    print(
        f"{session_id}: archived to {record.archive} on "
        f"{datetime.fromtimestamp(record.archived_at, UTC):%Y-%m-%d %H:%M:%S} UTC "
        f"({record.events} events, head sequence {record.head_seq} "
        f"sha256={record.head_sha256}); check it with: turnlog audit "
        f"{session_id} --verify --against {record.archive}"
    )
    return EXIT_OK


def _record(url: str | None, session_id: str) -> ArchivedSession | None:
    """The log's record of the session's archive, if the log holds none of it."""
    with contextlib.closing(open_for_reading(url)) as store:
        if store.stored_rows([session_uuid(session_id)]):
            return None
        return archived_session(store, session_id)


def _verify_archive(session_id: str, path: str, record: ArchivedSession | None) -> int:
    try:
        checked = export_heads(read_lines(path))
    except InvalidInputError as error:
        print(f"{session_id}: FAILED in {path}: {error}")
        return EXIT_FAILURE
    if session_id not in checked:
        print(f"{session_id}: FAILED: {path} holds no session {session_id!r}")
        return EXIT_FAILURE
    events, head = checked[session_id]
    if record is not None and (head.seq, head.sha256) != (
        record.head_seq,
        record.head_sha256,
    ):
        print(
            f"{session_id}: FAILED: {path} ends at sequence {head.seq} "
            f"sha256={head.sha256}, but the log recorded sequence "
            f"{record.head_seq} sha256={record.head_sha256} when it archived it"
        )
        return EXIT_FAILURE
    also = "" if record is None else ", the head the log recorded"
    print(f"{session_id}: ok, {events} events checked in {path}{also}")
    return EXIT_OK
