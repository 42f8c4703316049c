"""The ``turnlog`` command line.

::

    turnlog [--store URL] demo [--session ID] [--agents]
                                                    an offline scripted session
    turnlog [--store URL] run [--session ID] [--model ROUTE] [--tools]
                              [--approval ask|allow|deny] [--config FILE]
                              [--no-mcp]
                                                    talk to a real model
    turnlog [--store URL] sessions                  the sessions in the log
    turnlog [--store URL] audit SESSION [--json]    a session's timeline
    turnlog [--store URL] audit SESSION --verify [--against ANCHOR]
                                                    check its hash chain
    turnlog [--store URL] audit --verify --all      check every session
    turnlog [--store URL] audit --head SESSION      its anchor, to keep elsewhere
    turnlog [--store URL] replay SESSION            its EventMsg stream (JSON lines)
    turnlog [--store URL] traces SESSION [-o FILE] [--endpoint URL]
                                                    its trace, as OTLP/JSON
    turnlog [--store URL] export SESSION [-o FILE]  its stored events (JSON lines)
    turnlog [--store URL] import FILE|-             events exported elsewhere
    turnlog [--store URL] backup DEST               a verified copy of a live SQLite log
    turnlog [--store URL] archive --before DATE -o FILE  finished sessions moved out
    turnlog [--store URL] rebuild [VIEW...] [--verify]  views rebuilt offline
    turnlog [--store URL] project [--follow]        keep the views up to date
    turnlog [--store URL] serve [--demo] [--agent MODULE:ATTR] [--port N]
                                                    the HTTP service (SSE stream)

The log is the one ``--store`` names, else the ``TURNLOG_STORE`` environment
variable, else ``.turnlog/turnlog.sqlite3`` under the working directory (see
``turnlog.store.log`` for the URL forms). Errors are one line on stderr
(``turnlog: error: ...``), never a traceback; the exit code is 2 for a
mistake in what was asked (a bad URL, an unknown session, a file that is
not an export), 1 for a log that cannot be opened or read, a run that
failed, a chain that does not verify or a view that differs from its
rebuild, and 130 for Ctrl-C. What turnlog's background threads log
(retries, view runner trouble) is not shown unless ``--verbose`` (``-v``)
is given, and then one line a record (see ``turnlog.cli.logging_setup``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sqlite3
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from eventsourcing.persistence import PersistenceError

from turnlog.cli.archive import command_archive
from turnlog.cli.audit import command_audit
from turnlog.cli.backup import command_backup
from turnlog.cli.demo import RUN_TIMEOUT, next_steps, run_demo, turnlog_executable
from turnlog.cli.demo_agents import run_agents_demo
from turnlog.cli.exits import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    describe,
    print_error,
)
from turnlog.cli.history import command_export, command_import, command_replay
from turnlog.cli.lineage import command_fork, command_history, command_rewind
from turnlog.cli.log_location import missing_log, require_log, store_url
from turnlog.cli.logging_setup import CommandLogging
from turnlog.cli.parser import build_parser
from turnlog.cli.progress import ProgressLine, catch_up, rebuild_summary, views_position
from turnlog.cli.reading import open_for_reading, runtime_for_reading
from turnlog.cli.run.command import HOW_TO_CONFIGURE, RunOptions, run_interactive
from turnlog.cli.run.settings import NoModelConfiguredError, load_settings
from turnlog.cli.run.terminal import StdioTerminal
from turnlog.cli.serve import command_serve
from turnlog.cli.timeline import (
    format_time,
    one_line,
)
from turnlog.cli.traces import command_traces
from turnlog.domain.errors import (
    TurnlogError,
    UsageError,
)
from turnlog.domain.ids import check_session_id
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
    is_sqlite_file,
    location_of,
    parse_store_url,
)

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
    run = run_agents_demo if args.agents else run_demo
    with Runtime.open(store_url(args)) as runtime:
        try:
            result = run(runtime, session_id)
        except TimeoutError:
            print_error(f"the demo run did not finish within {RUN_TIMEOUT:g} s")
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
        print_error(f"the demo run {result.status}: {result.error}")
        return EXIT_FAILURE
    return EXIT_OK


# -- run ------------------------------------------------------------------


def _command_run(args: argparse.Namespace) -> int:
    options = RunOptions(
        store=store_url(args),
        session_id=args.session,
        route=args.model,
        tools=args.tools,
        approval=args.approval,
        workspace=Path.cwd(),
        mcp=not args.no_mcp,
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
        hint = _continue_command(args, session_id)
        print(f"session {session_id} is in the log at {location}; continue: {hint}")
    return EXIT_OK


def _continue_command(args: argparse.Namespace, session_id: str) -> str:
    """The ``turnlog run`` command that continues ``session_id`` as it ran.

    Pasted into a shell, anywhere, it runs the same executable on the same
    log with the same route file, tools and approval policy (the session
    keeps its route in the log). Paths are made absolute: the default log
    and a relative --config are relative to the working directory. A store
    URL from TURNLOG_STORE that is not a file is left to the environment,
    so a password in it is not printed.
    """
    command = [turnlog_executable()]
    store = _store_argument(args)
    if store is not None:
        command += ["--store", store]
    command += ["run", "--session", session_id]
    if args.config is not None:
        command += ["--config", str(args.config.expanduser().resolve())]
    if args.tools:
        command.append("--tools")
    if args.no_mcp:
        command.append("--no-mcp")
    if args.approval != "ask":
        command += ["--approval", args.approval]
    return shlex.join(command)


def _store_argument(args: argparse.Namespace) -> str | None:
    """``--store`` as a later command must give it, or None to leave it out."""
    url = store_url(args)
    env = parse_store_url(url)
    if is_sqlite_file(env):
        return "sqlite:///" + str(Path(env["SQLITE_DBNAME"]).resolve())
    typed: str | None = args.store  # the user's own (theirs to see), or None
    return typed


# -- sessions -------------------------------------------------------------


_PROMPT_COLUMN_LIMIT = 60
"""Characters of a session's first prompt ``turnlog sessions`` shows."""


def _command_sessions(args: argparse.Namespace) -> int:
    url = store_url(args)
    missing = missing_log(url)
    if missing is not None:
        print(f"no sessions: there is no log at {missing} yet (try `turnlog demo`)")
        return EXIT_OK
    with runtime_for_reading(url) as runtime:
        location = runtime.location
        summaries = runtime.summaries.all()  # the most recently active last
    if not summaries:
        print(f"no sessions in the log at {location}")
        return EXIT_OK
    rows = [
        (
            one_line(summary.session_id, 200),
            str(summary.turns),
            summary.state.replace("_", " "),
            format_time(summary.last_activity) if summary.last_activity else "-",
            one_line(summary.first_prompt, _PROMPT_COLUMN_LIMIT) or "-",
        )
        for summary in summaries
    ]
    header = ("SESSION", "TURNS", "STATE", "LAST ACTIVITY (UTC)", "FIRST PROMPT")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    for row in [header, *rows]:
        name, turns, state, when, prompt = row
        print(
            f"{name:<{widths[0]}}  {turns:>{widths[1]}}  {state:<{widths[2]}}  "
            f"{when:<{widths[3]}}  {prompt}".rstrip()
        )
    return EXIT_OK


# -- rebuild ----------------------------------------------------------------


def _command_rebuild(args: argparse.Namespace) -> int:
    select_projections(args.views)  # an unknown view is refused before opening
    url = store_url(args)
    require_log(url)
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

STANDBY_NOTICE = 1.0
"""Seconds ``project --follow`` waits to lead before saying it stands by."""
LEADING_CHECK = 1.0
"""Seconds between checks that this follower still leads, when nothing moves."""
STANDBY_LINE = "another process keeps the views current: standing by to take over"


def _command_project(args: argparse.Namespace) -> int:
    url = store_url(args)
    require_log(url)
    store = Store(url)
    try:
        runner = ProjectionRunner(store, default_projections())
        _project(runner, follow=args.follow, interval=args.interval)
    finally:
        store.close()
    return EXIT_OK


def _project(runner: ProjectionRunner, *, follow: bool, interval: float) -> None:
    bar = ProgressLine()
    names = ", ".join(p.name for p in runner.projections)
    if not follow:
        position = catch_up(runner, bar.show)
        bar.end()
        print(f"views ({names}) at log position {position}", flush=True)
        return
    # Following is the view runner's elected leader: on PostgreSQL one
    # process at a time folds (an advisory lock), the others stand by and
    # one takes over the moment the leader's connection ends.
    runner.start(gather=interval)
    try:
        while True:
            if not runner.wait_leading(STANDBY_NOTICE):
                print(STANDBY_LINE, flush=True)
                while not runner.wait_leading(LEADING_CHECK):
                    pass
            position = catch_up(runner, bar.show)
            bar.end()
            print(f"views ({names}) at log position {position}", flush=True)
            while runner.leading:
                now = runner.wait_folded(position, LEADING_CHECK)
                if now != position:
                    position = now
                    print(f"views at log position {position}", flush=True)
    except KeyboardInterrupt:
        bar.end()
        runner.stop()
        # Ctrl-C is how a follower is stopped: a batch cut short was rolled
        # back whole, so the views stand at a position they fully hold.
        print(
            f"stopped following {runner.store.location}: "
            f"views at log position {views_position(runner)}"
        )
    finally:
        runner.stop()


# -- entry point ----------------------------------------------------------

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": _command_demo,
    "run": _command_run,
    "sessions": _command_sessions,
    "audit": command_audit,
    "history": command_history,
    "fork": command_fork,
    "rewind": command_rewind,
    "replay": command_replay,
    "traces": command_traces,
    "export": command_export,
    "import": command_import,
    "backup": command_backup,
    "archive": command_archive,
    "rebuild": _command_rebuild,
    "project": _command_project,
    "serve": command_serve,
}


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
    logs = CommandLogging(verbose=args.verbose, warnings=args.command == "serve")
    logs.install()
    try:
        return _run_command(args)
    finally:
        # Run as the command (argv from sys.argv), the handler stays for
        # whatever the interpreter's exit still logs; called in-process,
        # the caller's logging is left as it was.
        if argv is not None:
            logs.uninstall()


def _run_command(args: argparse.Namespace) -> int:
    """Runs the command ``args`` names; errors become one line and an exit code."""
    try:
        return _COMMANDS[args.command](args)
    except UsageError as error:
        print_error(describe(error))
        return EXIT_USAGE
    except TurnlogError as error:
        print_error(describe(error))
        return EXIT_FAILURE
    except (PersistenceError, sqlite3.Error) as error:
        # A read deep in the views or the library, past the store's own
        # wrapping: still one line naming the log (and any damage).
        print_error(describe(as_store_error(error, location_of(store_url(args)))))
        return EXIT_FAILURE
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_FAILURE
    except OSError as error:  # the network or the disk, outside the log
        print_error(describe(error))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print_error("interrupted")
        return EXIT_INTERRUPTED
