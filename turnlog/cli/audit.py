"""``turnlog audit``: a session's timeline, its anchor, and chain verification."""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable

from turnlog.cli.archive import audit_archived
from turnlog.cli.exits import EXIT_FAILURE, EXIT_OK, print_error
from turnlog.cli.lineage import lineage_lines, print_state_at
from turnlog.cli.log_location import require_log, session_and_log, store_url
from turnlog.cli.parser import check_audit_args
from turnlog.cli.reading import open_for_reading, runtime_for_reading
from turnlog.cli.timeline import (
    Timeline,
    damage_verdict,
    one_line,
    verdict,
    verdict_record,
    verify_summary,
)
from turnlog.domain.errors import UnknownSessionError
from turnlog.hosting.children import ChildSession, descendants, outcome_of
from turnlog.projections.anchors import (
    anchor_of,
    anchor_record,
    expected_heads,
    format_anchor,
    recorded_heads,
)
from turnlog.store.log import Store
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
        if args.at is not None:
            return print_state_at(runtime, session_id, args.at, as_json=args.json)
        items = runtime.transcript.all(session_id)
        if not items:
            msg = f"no session {session_id!r} in the log at {runtime.location}"
            raise UnknownSessionError(msg)
        timeline = Timeline()
        tree = descendants(runtime.store, session_id)
        if args.json:
            for item in items:
                print(timeline.record(item))
            for depth, child in tree:  # after the events: one record per child
                print(_child_record(runtime.store, depth, child))
            return EXIT_OK
        width = max(len("EVENT"), *(len(item.name) for item in items))
        # POS: the event's position in the whole log (not its sequence in
        # the session, which --json gives as "sequence").
        print(f"{'POS':>6}  {'TIME (UTC)':<24}  {'EVENT':<{width}}  SUMMARY")
        for item in items:
            print(timeline.line(item, width))
        if tree:
            print(f"\nCHILD SESSIONS of {session_id} (agents its tool calls ran)")
        for depth, child in tree:
            outcome = one_line(outcome_of(runtime.store, child.session_id))
            print(
                f"{'  ' * depth}{child.session_id}  agent {child.agent}, "
                f"call {child.parent_call}: {outcome}"
            )
        lineage = lineage_lines(runtime, session_id)
        if lineage:  # after the timeline: its first line stays the header
            print()
            print("\n".join(lineage))
    return EXIT_OK


def _child_record(store: Store, depth: int, child: ChildSession) -> str:
    """A child session as one JSON line of ``audit --json`` (after the events)."""
    return json.dumps(
        {
            "child_session": child.session_id,
            "agent": child.agent,
            "parent_session": child.parent_session,
            "parent_call": child.parent_call,
            "depth": depth,
            "outcome": outcome_of(store, child.session_id),
        }
    )


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
            # The session and every child session under it: one tree.
            expected = expected_heads(store, session_id, anchor)
            report = verify_session(store, session_id, expected)
            print(show(report))
            ok = report.ok
            for _, child in descendants(store, session_id):
                if store.get_session(child.session_id) is None:
                    continue  # its call never got to create it
                expected = expected_heads(store, child.session_id)
                child_report = verify_session(store, child.session_id, expected)
                print(show(child_report))
                ok = ok and child_report.ok
            return EXIT_OK if ok else EXIT_FAILURE
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
