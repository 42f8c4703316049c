"""The ``turnlog`` command line.

::

    turnlog [--store URL] demo [--session ID]       an offline scripted session
    turnlog [--store URL] run [--session ID] [--model ROUTE] [--tools]
                              [--approval ask|allow|deny] [--config FILE]
                                                    talk to a real model
    turnlog [--store URL] sessions                  the sessions in the log
    turnlog [--store URL] audit SESSION [--json]    a session's timeline
    turnlog [--store URL] audit SESSION --verify [--against ANCHOR]
                                                    check its hash chain
    turnlog [--store URL] audit --verify --all      check every session
    turnlog [--store URL] audit --head SESSION      its anchor, to keep elsewhere
    turnlog [--store URL] replay SESSION            its EventMsg stream (JSON lines)
    turnlog [--store URL] export SESSION [-o FILE]  its stored events (JSON lines)
    turnlog [--store URL] import FILE|-             events exported elsewhere
    turnlog [--store URL] rebuild [VIEW...] [--verify]  views rebuilt offline
    turnlog [--store URL] project [--follow]        keep the views up to date

The log is the one ``--store`` names, else the ``TURNLOG_STORE`` environment
variable, else ``.turnlog/turnlog.sqlite3`` under the working directory (see
``turnlog.store.log`` for the URL forms). Errors are one line on stderr
(``turnlog: error: ...``), never a traceback; the exit code is 2 for a
mistake in what was asked (a bad URL, an unknown session, a file that is
not an export), 1 for a log that cannot be opened or read, a run that
failed, a chain that does not verify or a view that differs from its
rebuild, and 130 for Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from eventsourcing.persistence import PersistenceError

from turnlog.cli.demo import RUN_TIMEOUT, next_steps, run_demo, turnlog_executable
from turnlog.cli.parser import STORE_ENV, build_parser, check_audit_args
from turnlog.cli.progress import ProgressLine, catch_up, rebuild_summary, views_position
from turnlog.cli.reading import open_for_reading, runtime_for_reading
from turnlog.cli.run.command import HOW_TO_CONFIGURE, RunOptions, run_interactive
from turnlog.cli.run.settings import NoModelConfiguredError, load_settings
from turnlog.cli.run.terminal import StdioTerminal
from turnlog.cli.timeline import (
    Timeline,
    damage_verdict,
    format_time,
    one_line,
    verdict,
    verdict_record,
    verify_summary,
)
from turnlog.domain.errors import (
    TurnlogError,
    UnknownSessionError,
    UsageError,
)
from turnlog.domain.ids import check_session_id
from turnlog.domain.protocol import encode_json
from turnlog.projections.anchors import (
    anchor_of,
    anchor_record,
    expected_heads,
    format_anchor,
    recorded_heads,
)
from turnlog.projections.readers import Checkpoint
from turnlog.projections.rebuild import (
    default_projections,
    rebuild,
    select_projections,
)
from turnlog.projections.runner import ProjectionRunner
from turnlog.runtime import Runtime
from turnlog.store.log import Store
from turnlog.store.opening import (
    as_store_error,
    integrity_problem,
    location_of,
    parse_store_url,
)
from turnlog.store.transfer import (
    export_session,
    import_events,
    read_lines,
    write_lines,
)
from turnlog.store.verify import VerifyReport, verify_each, verify_session

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT, as a shell reports a command stopped by Ctrl-C."""

_MESSAGE_LIMIT = 1000
"""Longest error line printed; messages are short, this only bounds garbage."""


def _store_url(args: argparse.Namespace) -> str | None:
    url: str | None = args.store
    if url is None:
        url = os.environ.get(STORE_ENV) or None
    return url


def _missing_sqlite_log(url: str | None) -> Path | None:
    """The file of the SQLite log ``url`` names, if that file does not exist.

    Opening a log creates it; the read-only commands check first so that
    looking at a log that is not there leaves nothing behind.
    """
    env = parse_store_url(url)  # raises StoreURLError, as opening would
    name = env.get("SQLITE_DBNAME")
    if name is None or name.startswith("file:"):  # PostgreSQL, or memory://
        return None
    path = Path(name)
    return None if path.exists() else path


def _require_log(url: str | None) -> None:
    """Refuses an SQLite log that does not exist (opening would create it)."""
    missing = _missing_sqlite_log(url)
    if missing is not None:
        msg = f"there is no log at {missing}"
        raise UsageError(msg)


def _session_and_log(args: argparse.Namespace) -> tuple[str, str | None]:
    """The SESSION asked for and the URL of its log.

    Both are checked before the log is opened (opening creates a missing
    SQLite log), so a bad id or a log that is not there changes nothing.
    """
    session_id = check_session_id(args.session)
    url = _store_url(args)
    missing = _missing_sqlite_log(url)
    if missing is not None:
        msg = f"no session {session_id!r}: there is no log at {missing}"
        raise UnknownSessionError(msg)
    return session_id, url


# -- demo -----------------------------------------------------------------


def _command_hint(
    args: argparse.Namespace, *words: str, program: str = "turnlog"
) -> str:
    """``turnlog [--store URL] WORDS...``, quoted for a shell."""
    command = [program]
    if args.store is not None:  # from the environment, it applies again anyway
        command += ["--store", args.store]
    return shlex.join([*command, *words])


def _command_demo(args: argparse.Namespace) -> int:
    given: str | None = args.session
    session_id = given if given is not None else f"demo-{uuid.uuid4().hex[:12]}"
    check_session_id(session_id)  # before opening: a bad id must change nothing
    with Runtime.open(_store_url(args)) as runtime:
        try:
            result = run_demo(runtime, session_id)
        except TimeoutError:
            _print_error(f"the demo run did not finish within {RUN_TIMEOUT:g} s")
            return EXIT_FAILURE
        location = runtime.location
    print()
    if result.final_output is not None:
        print(f"final answer: {result.final_output}")
    print(f"session:      {session_id} (run {result.status})")
    print(f"log:          {location}")
    if location == "memory":
        print("audit it:     not possible, a memory:// log ends with the command")
    else:
        program = turnlog_executable()
        print(
            f"audit it:     {_command_hint(args, 'audit', session_id, program=program)}"
        )
        print()
        print("\n".join(next_steps(_command_hint(args, program=program))))
    if not result.completed:
        _print_error(f"the demo run {result.status}: {result.error}")
        return EXIT_FAILURE
    return EXIT_OK


# -- run ------------------------------------------------------------------


def _command_run(args: argparse.Namespace) -> int:
    options = RunOptions(
        store=_store_url(args),
        session_id=args.session,
        route=args.model,
        tools=args.tools,
        approval=args.approval,
        workspace=Path.cwd(),
    )
    try:
        session_id, location = run_interactive(
            options, load_settings(config=args.config), StdioTerminal()
        )
    except NoModelConfiguredError:
        print(HOW_TO_CONFIGURE, file=sys.stderr)
        raise
    if location == "memory":
        print(f"session {session_id} ended with the command (a memory:// log)")
    else:
        hint = _command_hint(args, "run", "--session", session_id)
        print(f"session {session_id} is in the log at {location}; continue: {hint}")
    return EXIT_OK


# -- sessions -------------------------------------------------------------


def _status(checkpoint: Checkpoint | None) -> str:
    if checkpoint is None:
        return "unknown"
    if checkpoint.closed:
        return "closed"
    return "running" if checkpoint.running_turn is not None else "idle"


def _command_sessions(args: argparse.Namespace) -> int:
    url = _store_url(args)
    missing = _missing_sqlite_log(url)
    if missing is not None:
        print(f"no sessions: there is no log at {missing} yet (try `turnlog demo`)")
        return EXIT_OK
    rows: list[tuple[int, str, str, str, str]] = []
    with runtime_for_reading(url) as runtime:
        location = runtime.location
        for session_id in runtime.sessions():
            checkpoint = runtime.checkpoints.load(session_id, context=False)
            newest = runtime.transcript.page(session_id, max_batches=1).items
            if not newest:
                continue  # listed by the transcript view, so never empty
            last = newest[-1]
            turns = str(checkpoint.turn_count) if checkpoint is not None else "?"
            rows.append(
                (
                    last.sequence,
                    one_line(session_id, 200),
                    turns,
                    _status(checkpoint),
                    format_time(last.event().timestamp),
                )
            )
    if not rows:
        print(f"no sessions in the log at {location}")
        return EXIT_OK
    rows.sort()  # by last activity: the most recent session is listed last
    width = max(len("SESSION"), *(len(row[1]) for row in rows))
    print(f"{'SESSION':<{width}}  TURNS  STATUS   LAST ACTIVITY (UTC)")
    for _, session_id, turns, status, when in rows:
        print(f"{session_id:<{width}}  {turns:>5}  {status:<7}  {when}")
    return EXIT_OK


# -- audit ----------------------------------------------------------------


def _command_audit(args: argparse.Namespace) -> int:
    check_audit_args(args)
    if args.head:
        return _audit_head(args)
    if args.verify:
        return _audit_verify(args)
    session_id, url = _session_and_log(args)
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
        print(f"{'SEQ':>6}  {'TIME (UTC)':<24}  {'EVENT':<{width}}  SUMMARY")
        for item in items:
            print(timeline.line(item, width))
    return EXIT_OK


def _audit_head(args: argparse.Namespace) -> int:
    session_id, url = _session_and_log(args)
    with contextlib.closing(open_for_reading(url)) as store:
        report = verify_session(store, session_id, expected_heads(store, session_id))
    if report.head is None:  # an anchor of a broken chain would vouch for it
        _print_error(f"no anchor for a chain that does not verify: {verdict(report)}")
        return EXIT_FAILURE
    print((anchor_record if args.json else format_anchor)(session_id, report.head))
    return EXIT_OK


def _audit_verify(args: argparse.Namespace) -> int:
    if args.all:
        url = _store_url(args)
        _require_log(url)
    else:
        session_id, url = _session_and_log(args)
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


# -- replay, export, import -------------------------------------------------


def _command_replay(args: argparse.Namespace) -> int:
    session_id, url = _session_and_log(args)
    with runtime_for_reading(url) as runtime:
        events = runtime.replay_events(session_id)
        if not events:  # every session starts with SessionConfigured
            msg = f"no session {session_id!r} in the log at {runtime.location}"
            raise UnknownSessionError(msg)
    sys.stdout.writelines(encode_json(event).decode() + "\n" for event in events)
    return EXIT_OK


def _command_export(args: argparse.Namespace) -> int:
    session_id, url = _session_and_log(args)
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


def _command_import(args: argparse.Namespace) -> int:
    lines = read_lines(args.file)  # a file that cannot be read opens no log
    store = Store(_store_url(args))
    try:
        count = import_events(store, lines)
        location = store.location
    finally:
        store.close()
    print(f"imported {count} events into the log at {location}")
    return EXIT_OK


# -- rebuild ----------------------------------------------------------------


def _command_rebuild(args: argparse.Namespace) -> int:
    select_projections(args.views)  # an unknown view is refused before opening
    url = _store_url(args)
    _require_log(url)
    bar = ProgressLine()
    # Verifying compares and swaps nothing: a log that may not be written
    # is verified in memory. A rebuild must write, and says so if it may not.
    store = open_for_reading(url) if args.verify else Store(url)
    try:
        reports = rebuild(
            store, args.views, verify=args.verify, progress=bar.show, batch=args.batch
        )
    except KeyboardInterrupt:
        bar.end()
        # Each batch committed with its tracking position: nothing is lost.
        again = [*args.views, "--verify"] if args.verify else args.views
        hint = _command_hint(args, "rebuild", *again)
        print(
            f"turnlog: rebuild interrupted; it resumes where it stopped: {hint}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        bar.end()
        store.close()
    print("\n".join(rebuild_summary(reports, verified=args.verify)))
    return EXIT_FAILURE if any(report.differences for report in reports) else EXIT_OK


# -- project ----------------------------------------------------------------


def _command_project(args: argparse.Namespace) -> int:
    url = _store_url(args)
    _require_log(url)
    store = Store(url)
    try:
        runner = ProjectionRunner(store, default_projections())
        _project(runner, follow=args.follow, interval=args.interval)
    finally:
        store.close()
    return EXIT_OK


def _project(runner: ProjectionRunner, *, follow: bool, interval: float) -> None:
    bar = ProgressLine()
    try:
        position = catch_up(runner, bar.show)
        bar.end()
        names = ", ".join(p.name for p in runner.projections)
        print(f"views ({names}) at log position {position}", flush=True)
        while follow:
            time.sleep(interval)
            now = runner.catch_up()
            if now != position:
                position = now
                print(f"views at log position {position}", flush=True)
    except KeyboardInterrupt:
        bar.end()
        if not follow:
            raise
        # Ctrl-C is how a follower is stopped: a batch cut short was rolled
        # back whole, so the views stand at a position they fully hold.
        print(
            f"stopped following {runner.store.location}: "
            f"views at log position {views_position(runner)}"
        )


# -- entry point ----------------------------------------------------------

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": _command_demo,
    "run": _command_run,
    "sessions": _command_sessions,
    "audit": _command_audit,
    "replay": _command_replay,
    "export": _command_export,
    "import": _command_import,
    "rebuild": _command_rebuild,
    "project": _command_project,
}


def _print_error(message: str) -> None:
    print(f"turnlog: error: {one_line(message, _MESSAGE_LIMIT)}", file=sys.stderr)


def _describe(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _quiet_stdout() -> None:
    # The reader of our output went away (`turnlog audit s | head`). Point
    # stdout at /dev/null so the interpreter's last flush does not fail too.
    with contextlib.suppress(OSError, ValueError):
        stdout = sys.stdout.fileno()  # fails (harmlessly) if stdout is no file
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout)
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Runs the ``turnlog`` command line; returns the exit code.

    Args:
        argv: the arguments after the program name (default: ``sys.argv``).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a usage error
        code = exit_.code
        if isinstance(code, int):
            return code
        return EXIT_OK if code is None else EXIT_FAILURE
    try:
        return _COMMANDS[args.command](args)
    except UsageError as error:
        _print_error(_describe(error))
        return EXIT_USAGE
    except TurnlogError as error:
        _print_error(_describe(error))
        return EXIT_FAILURE
    except (PersistenceError, sqlite3.Error) as error:
        # A read deep in the views or the library, past the store's own
        # wrapping: still one line naming the log (and any damage).
        _print_error(_describe(as_store_error(error, location_of(_store_url(args)))))
        return EXIT_FAILURE
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_FAILURE
    except OSError as error:  # the network or the disk, outside the log
        _print_error(_describe(error))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _print_error("interrupted")
        return EXIT_INTERRUPTED
