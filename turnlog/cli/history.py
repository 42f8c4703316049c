"""``turnlog replay``, ``export`` and ``import``: a session's history out and in."""

from __future__ import annotations

import argparse
import sys

from turnlog.cli.exits import EXIT_OK
from turnlog.cli.log_location import session_and_log, store_url
from turnlog.cli.reading import open_for_reading, runtime_for_reading
from turnlog.domain.errors import UnknownSessionError
from turnlog.domain.protocol import encode_json
from turnlog.store.log import Store
from turnlog.store.transfer import (
    check_export,
    export_session,
    import_events,
    read_lines,
    write_lines,
)


def command_replay(args: argparse.Namespace) -> int:
    session_id, url = session_and_log(args)
    with runtime_for_reading(url) as runtime:
        events = runtime.replay_events(session_id)
        if not events:  # every session starts with SessionCreatedMsg
            msg = f"no session {session_id!r} in the log at {runtime.location}"
            raise UnknownSessionError(msg)
    sys.stdout.writelines(encode_json(event).decode() + "\n" for event in events)
    return EXIT_OK


def command_export(args: argparse.Namespace) -> int:
    session_id, url = session_and_log(args)
    store = open_for_reading(url)
    try:
        lines = export_session(store, session_id)
    finally:
        store.close()
    if args.output is None:
        sys.stdout.writelines(line.decode() for line in lines)
        return EXIT_OK
    write_lines(args.output, lines)
    events = len(lines) - 1  # after the header
    print(f"exported {events} events of {session_id!r} to {args.output}")
    return EXIT_OK


def command_import(args: argparse.Namespace) -> int:
    # A file that cannot be read, or does not verify, opens (creates) no log.
    checked = check_export(read_lines(args.file))
    store = Store(store_url(args))
    try:
        count = import_events(store, checked)
        location = store.location
    finally:
        store.close()
    print(f"imported {count} events into the log at {location}")
    return EXIT_OK
