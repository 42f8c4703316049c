"""``turnlog history``, ``fork``, ``rewind``, ``audit --at`` and the lineage tree.

``fork`` and ``rewind`` write to the log without an agent: a fork is one
event naming its source (it runs the source's agent when opened), and a
rewind takes the session's lease first, so it is refused while the session
is open in a runtime (close it there, or rewind through it).
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from turnlog.cli.exits import EXIT_OK
from turnlog.cli.log_location import session_and_log
from turnlog.cli.reading import runtime_for_reading
from turnlog.domain.errors import (
    InvalidInputError,
    SessionBusyError,
    UnknownSessionError,
)
from turnlog.domain.lineage import SessionRewound, check_point_args, rewind
from turnlog.hosting.forking import record_fork
from turnlog.runtime import Runtime
from turnlog.store.fork_source import rewind_fields
from turnlog.store.lineage import scan
from turnlog.store.log import Store
from turnlog.store.ownership import SessionOwnership

PREVIEW = 60


def command_history(args: argparse.Namespace) -> int:
    session_id, url = session_and_log(args)
    with runtime_for_reading(url) as runtime:
        points = runtime.history(session_id)
    print(f"{'AFTER TURN':>10}  {'INPUT':>5}  {'POS':>6}  PREVIEW")
    for point in points:
        given = "" if point.input is None else str(point.input)
        preview = point.preview[:PREVIEW] if point.input is not None else "(the end)"
        mark = "  (rewound)" if point.rewound else ""
        print(
            f"{point.after_turn:>10}  {given:>5}  {point.position:>6}  {preview}{mark}"
        )
    return EXIT_OK


def command_fork(args: argparse.Namespace) -> int:
    session_id, url = session_and_log(args)
    check_point_args(args.before_input, args.after_turn)
    store = Store(url)
    try:
        fork_id, point = record_fork(
            store,
            session_id,
            before_input=args.before_input,
            after_turn=args.after_turn,
            session_id=args.fork_id,
            keep_allowances=args.keep_allowances,
        )
    finally:
        store.close()
    print(
        f"forked {session_id!r} after turn {point.after_turn} (log position "
        f"{point.position}) as {fork_id!r}"
    )
    return EXIT_OK


def command_rewind(args: argparse.Namespace) -> int:
    session_id, url = session_and_log(args)
    if args.before_input is None and args.after_turn is None:
        msg = "name the point: --before-input N or --after-turn N"
        raise InvalidInputError(msg)
    check_point_args(args.before_input, args.after_turn)
    store = Store(url)
    ownership = SessionOwnership(store)
    try:
        ownership.acquire(session_id)
        session = store.get_session(session_id)
        if session is None:
            msg = f"no session {session_id!r} in the log at {store.location}"
            raise UnknownSessionError(msg)
        if session.running:
            msg = (
                f"session {session_id!r} has turn {session.active_turn} running "
                "(or cut off by a crash): open it in a runtime to end it first"
            )
            raise SessionBusyError(msg)
        marks = scan(store, session_id)
        point = marks.point(before_input=args.before_input, after_turn=args.after_turn)
        rewound = rewind(
            session, point.after_turn, **rewind_fields(store, marks, point, session)
        )
        store.save(session)
    finally:
        ownership.release_all()
        store.close()
    print(
        f"rewound {session_id!r} to after turn {point.after_turn}: set aside {rewound}"
    )
    return EXIT_OK


def lineage_lines(runtime: Runtime, session_id: str) -> list[str]:
    """The session's forks and rewinds as a tree: where it came from, the
    sessions forked from it, and the turns its rewinds set aside."""
    lines: list[str] = []
    chain: list[tuple[str, dict[str, Any]]] = []
    current = runtime.checkpoints.load(session_id, context=False)
    while current is not None and current.forked_from is not None:
        chain.append((current.session_id, current.forked_from))
        current = runtime.checkpoints.load(
            current.forked_from["session_id"], context=False
        )
    for depth, (child, source) in enumerate(reversed(chain)):
        if depth == 0:
            lines.append(source["session_id"])
        lines.append(
            f"{'  ' * depth}└─ {child} forked at position {source['position']} "
            f"(sequence {source['seq']}, sha256 {source['digest'][:16]}...)"
        )
    indent = "  " * len(chain)
    below: list[str] = []
    for summary in runtime.summaries.all():
        if summary.forked_from == session_id:
            child = runtime.checkpoints.load(summary.session_id, context=False)
            where = (
                ""
                if child is None or child.forked_from is None
                else (f" at position {child.forked_from['position']}")
            )
            below.append(f"{indent}├─ forked: {summary.session_id}{where}")
    for item in runtime.transcript.all(session_id):
        if item.name == "SessionRewound":
            event = item.event()
            assert isinstance(event, SessionRewound)
            below.append(
                f"{indent}↺ rewound at position {item.position} to after turn "
                f"{event.to_turn}: turns {event.rewound_turns} set aside"
            )
    if below and not chain:
        lines.append(session_id)
    return lines + below


def print_state_at(
    runtime: Runtime, session_id: str, turn: int, *, as_json: bool
) -> int:
    """``turnlog audit SESSION --at N``: the checkpoint as turn N ended."""
    checkpoint = runtime.checkpoints.at(session_id, turn=turn)
    if checkpoint is None:
        msg = f"no session {session_id!r} in the log at {runtime.location}"
        raise UnknownSessionError(msg)
    if as_json:
        print(msgspec.json.encode(checkpoint).decode())
        return EXIT_OK
    print(
        f"{session_id} as turn {turn} ended (log position "
        f"{checkpoint.updated_position}): {checkpoint.turn_count} turns, route "
        f"{checkpoint.model_route}, usage {checkpoint.total_usage}"
    )
    print(f"shared state: {msgspec.json.encode(checkpoint.shared_state).decode()}")
    for message in checkpoint.messages():
        print(f"  {message.role}: {message.content[:PREVIEW]}")
    return EXIT_OK
