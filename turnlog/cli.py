"""The ``turnlog`` command line.

::

    turnlog [--store URL] demo [--session ID]      an offline scripted session
    turnlog [--store URL] sessions                 the sessions in the log
    turnlog [--store URL] audit SESSION [--json]   a session's timeline

The log is the one ``--store`` names, else the ``TURNLOG_STORE`` environment
variable, else ``.turnlog/turnlog.sqlite3`` under the working directory (see
``turnlog.store`` for the URL forms). Errors are one line on stderr
(``turnlog: error: ...``), never a traceback; the exit code is 2 for a
mistake in what was asked (a bad URL, an unknown session), 1 for a log that
cannot be opened or read, or a run that failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from turnlog import __version__
from turnlog.audit_format import Timeline, format_time, one_line
from turnlog.demo import RUN_TIMEOUT, run_demo
from turnlog.domain.errors import TurnlogError, UnknownSessionError, UsageError
from turnlog.domain.ids import check_session_id
from turnlog.readers import Checkpoint
from turnlog.runtime import Runtime
from turnlog.store import parse_store_url

STORE_ENV = "TURNLOG_STORE"
"""Environment variable naming the log when ``--store`` is not given."""

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT, as a shell reports a command stopped by Ctrl-C."""

_MESSAGE_LIMIT = 1000
"""Longest error line printed; messages are short, this only bounds garbage."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``turnlog`` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="turnlog",
        description="An agent runtime for LLM sessions on an event-sourced log.",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help=(
            "the log: sqlite:///relative/path, sqlite:////absolute/path, "
            f"memory:// or postgresql://...; default: ${STORE_ENV}, else "
            ".turnlog/turnlog.sqlite3 under the working directory"
        ),
    )
    parser.add_argument("--version", action="version", version=f"turnlog {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    demo = commands.add_parser(
        "demo",
        help="run an offline scripted session (start here)",
        description=(
            "Runs a scripted agent (no network, no API key) that answers one "
            "question with one tool call, and records it in the log."
        ),
    )
    demo.add_argument(
        "--session",
        metavar="ID",
        help="the session to run in (default: a new demo-... session)",
    )

    commands.add_parser(
        "sessions",
        help="list the sessions in the log",
        description=(
            "One line per session: id, turns, status (running, idle or closed) "
            "and the time of its last event. A turn cut off by a crash shows "
            "as running until the session is opened again."
        ),
    )

    audit = commands.add_parser(
        "audit",
        help="show a session's timeline from the log",
        description="One line per stored event of the session, oldest first.",
    )
    audit.add_argument("session", metavar="SESSION", help="the session id")
    audit.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per event (sequence, time, event, data)",
    )
    return parser


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


# -- demo -----------------------------------------------------------------


def _audit_hint(args: argparse.Namespace, session_id: str) -> str:
    command = ["turnlog"]
    if args.store is not None:  # from the environment, it applies again anyway
        command += ["--store", args.store]
    command += ["audit", session_id]
    return shlex.join(command)


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
        print(f"audit it:     {_audit_hint(args, session_id)}")
    if not result.completed:
        _print_error(f"the demo run {result.status}: {result.error}")
        return EXIT_FAILURE
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
    with Runtime.open(url) as runtime:
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
    for _, session_id, turns, status, time in rows:
        print(f"{session_id:<{width}}  {turns:>5}  {status:<7}  {time}")
    return EXIT_OK


# -- audit ----------------------------------------------------------------


def _command_audit(args: argparse.Namespace) -> int:
    session_id = check_session_id(args.session)
    url = _store_url(args)
    missing = _missing_sqlite_log(url)
    if missing is not None:
        msg = f"no session {session_id!r}: there is no log at {missing}"
        raise UnknownSessionError(msg)
    with Runtime.open(url) as runtime:
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


# -- entry point ----------------------------------------------------------

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": _command_demo,
    "sessions": _command_sessions,
    "audit": _command_audit,
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
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _print_error("interrupted")
        return EXIT_INTERRUPTED
