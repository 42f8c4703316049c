"""``turnlog audit``: a session's timeline, its anchor, and chain verification."""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable

from turnlog.cli.archive import audit_archived
from turnlog.cli.exits import EXIT_FAILURE, EXIT_OK, print_error
from turnlog.cli.log_location import require_log, session_and_log, store_url
from turnlog.cli.parser import check_audit_args
from turnlog.cli.reading import open_for_reading, runtime_for_reading
from turnlog.cli.timeline import (
    Timeline,
    damage_verdict,
    verdict,
    verdict_record,
    verify_summary,
)
from turnlog.domain.errors import UnknownSessionError
from turnlog.projections.anchors import (
    anchor_of,
    anchor_record,
    expected_heads,
    format_anchor,
    recorded_heads,
)
from turnlog.store.opening import integrity_problem, location_of
from turnlog.store.verify import VerifyReport, verify_each, verify_session


def command_audit(args: argparse.Namespace) -> int:
    check_audit_args(args)
    if not args.all and not args.head:
        archived = audit_archived(args)
        if archived is not None:
            return archived
    if args.head:
        return _audit_head(args)
    if args.verify:
        return _audit_verify(args)
    session_id, url = session_and_log(args)
    with runtime_for_reading(url) as runtime:
        items = runtime.transcript.all(session_id)
        if not items:
            msg = f"no session {session_id!r} in the log at {runtime.location}"
            raise UnknownSessionError(msg)
        timeline = Timeline()
        if args.json:
            for item in items:
                print(timeline.record(item))
            return EXIT_OK
        width = max(len("EVENT"), *(len(item.name) for item in items))
        # POS: the event's position in the whole log (not its sequence in
        # the session, which --json gives as "sequence").
        print(f"{'POS':>6}  {'TIME (UTC)':<24}  {'EVENT':<{width}}  SUMMARY")
        for item in items:
            print(timeline.line(item, width))
    return EXIT_OK


def _audit_head(args: argparse.Namespace) -> int:
    session_id, url = session_and_log(args)
    with contextlib.closing(open_for_reading(url)) as store:
        report = verify_session(store, session_id, expected_heads(store, session_id))
    if report.head is None:  # an anchor of a broken chain would vouch for it
        print_error(f"no anchor for a chain that does not verify: {verdict(report)}")
        return EXIT_FAILURE
    print((anchor_record if args.json else format_anchor)(session_id, report.head))
    return EXIT_OK


def _audit_verify(args: argparse.Namespace) -> int:
    if args.all:
        url = store_url(args)
        require_log(url)
    else:
        session_id, url = session_and_log(args)
    anchor = anchor_of(args.against, args.session)
    show: Callable[[VerifyReport], str] = verdict_record if args.json else verdict
    started = time.perf_counter()
    sessions = failed = events = 0
    damage = integrity_problem(url)
    if damage is not None:  # the file itself: no chain in it can be trusted
        print(damage_verdict(location_of(url), damage, as_json=args.json))
        return EXIT_FAILURE
    store = open_for_reading(url)
    try:
        if not args.all:
            expected = expected_heads(store, session_id, anchor)
            report = verify_session(store, session_id, expected)
            print(show(report))
            return EXIT_OK if report.ok else EXIT_FAILURE
        for report in verify_each(store, recorded_heads(store)):
            print(show(report), flush=True)  # a verdict as soon as it is known
            sessions += 1
            failed += not report.ok
            events += report.events
        location = store.location
    finally:
        store.close()
    seconds = time.perf_counter() - started
    if not args.json:
        print(
            verify_summary(sessions, failed, events, seconds)
            if sessions
            else f"no sessions in the log at {location}"
        )
    return EXIT_FAILURE if failed else EXIT_OK
