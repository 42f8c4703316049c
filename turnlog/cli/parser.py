"""The ``turnlog`` command line's arguments (see turnlog.cli.main for the commands)."""

from __future__ import annotations

import argparse
import contextlib
import math
from pathlib import Path

from turnlog import __version__
from turnlog.cli.lineage_parsers import add_lineage_parsers
from turnlog.collector import SERVICE_YOUNG_GENERATION
from turnlog.domain.errors import UsageError
from turnlog.projections.rebuild import REBUILD_BATCH

STORE_ENV = "TURNLOG_STORE"
"""Environment variable naming the log when ``--store`` is not given."""

FOLLOW_INTERVAL = 0.5
"""Seconds ``turnlog project --follow`` gathers new events before folding them."""


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        msg = f"{text!r} is not a whole number above 0"
        raise argparse.ArgumentTypeError(msg)
    return int(text)


def _positive_float(text: str) -> float:
    with contextlib.suppress(ValueError):
        if 0 < (value := float(text)) < math.inf:  # refuses nan too
            return value
    msg = f"{text!r} is not a number of seconds above 0"
    raise argparse.ArgumentTypeError(msg)


def check_audit_args(args: argparse.Namespace) -> None:
    """Refuses a combination of ``turnlog audit`` options that means nothing.

    Raises:
        UsageError: naming the combination that works.
    """
    if args.head and (args.verify or args.all):
        msg = "--head prints one session's anchor: turnlog audit --head SESSION"
        raise UsageError(msg)
    if args.against is not None and (not args.verify or args.all):
        msg = "--against works with --verify SESSION"
        raise UsageError(msg)
    if args.all and not args.verify:
        msg = "--all works with --verify: turnlog audit --verify --all"
        raise UsageError(msg)
    if args.at is not None and (args.verify or args.head or args.all):
        msg = "--at N shows one session's state: turnlog audit SESSION --at N"
        raise UsageError(msg)
    if args.all == (args.session is not None):
        msg = "give a SESSION, or --verify --all"
        raise UsageError(msg)


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
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help=(
            "show what turnlog logs (retries, view runner trouble, warnings) on "
            "stderr, one line each; by default only the command's own output"
        ),
    )
    parser.add_argument("--version", action="version", version=f"turnlog {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    _add_demo_parser(commands)

    _add_run_parser(commands)

    commands.add_parser(
        "sessions",
        help="list the sessions in the log",
        description=(
            "One line per session, the most recently active last: id, turns, "
            "state (running, waiting for approval, failed, aborted, idle or "
            "closed), the time of its last event and the start of its first "
            "prompt. A turn cut off by a crash shows as running until the "
            "session is opened again."
        ),
    )

    audit = commands.add_parser(
        "audit",
        help="show a session's timeline, or verify its hash chain",
        description=(
            "One line per stored event of the session, oldest first: POS is "
            "the event's position in the whole log (shared by all sessions), "
            "not its sequence within the session (1, 2, ...; in --json). With "
            "--verify, checks the session's hash chain from the raw log "
            "instead, and that it reaches the head the sessions view recorded, "
            "and names the first event that does not fit (exit 1). With "
            "--head, prints the chain's head as an anchor to keep elsewhere: "
            "--verify --against ANCHOR then shows that nothing up to it was "
            "removed or replaced."
        ),
    )
    audit.add_argument("session", metavar="SESSION", nargs="?", help="the session id")
    audit.add_argument(
        "--json",
        action="store_true",
        help=(
            "print one JSON object per event (position in the log, sequence "
            "in the session, time, event, data), per verdict with --verify, "
            "or the anchor with --head"
        ),
    )
    audit.add_argument("--verify", action="store_true", help="check the hash chain")
    audit.add_argument("--all", action="store_true", help="--verify every session")
    audit.add_argument(
        "--head",
        action="store_true",
        help=(
            "print the session's verified chain head: SESSION sequence=N "
            "sha256=HEX (N: its newest event's sequence in the session)"
        ),
    )
    audit.add_argument(
        "--at",
        type=int,
        metavar="N",
        help="show the session's state as it was when turn N ended (from the log)",
    )
    audit.add_argument(
        "--against",
        metavar="ANCHOR",
        help=(
            "with --verify SESSION: an anchor --head printed (or N:HEX, or the "
            "HEX alone) that the chain must still hold, or the archive file "
            "`turnlog archive` moved the session to"
        ),
    )

    add_lineage_parsers(commands)

    replay = commands.add_parser(
        "replay",
        help="print a session's EventMsg stream, regenerated from the log",
        description=(
            "One JSON object per durable EventMsg of the session, in order. "
            "Its sequence is the place in the session of the stored event it "
            "came from (1, 2, ...; several messages may share one), not a log "
            "position."
        ),
    )
    replay.add_argument("session", metavar="SESSION", help="the session id")

    traces = commands.add_parser(
        "traces",
        help="write a session's OpenTelemetry trace, rebuilt from the log",
        description=(
            "The session's spans (session, turns, model calls, tool calls, "
            "approval waits) as an OTLP ExportTraceServiceRequest: as JSON on "
            "stdout or to --output FILE, or POSTed to an OTLP/HTTP --endpoint "
            "(protobuf, OTLP/HTTP's default). Work the log never ended (a "
            "killed process) ends at its last event, marked unfinished."
        ),
    )
    traces.add_argument("session", metavar="SESSION", help="the session id")
    traces.add_argument("-o", "--output", metavar="FILE", help="default: stdout")
    traces.add_argument(
        "--endpoint",
        metavar="URL",
        help="an OTLP/HTTP endpoint (/v1/traces is added to a bare host)",
    )
    traces.add_argument(
        "--protocol",
        choices=("http/protobuf", "http/json"),
        help=(
            "the encoding, for --endpoint and (if given) --output and stdout; "
            "default: JSON for --output and stdout, and for --endpoint "
            "$OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, $OTEL_EXPORTER_OTLP_PROTOCOL "
            "or http/protobuf"
        ),
    )

    export = commands.add_parser(
        "export",
        help="write a session's stored events as JSON lines",
        description=(
            "One JSON object per stored event of the session (originator_id, "
            "originator_version, topic, state), in log order; `turnlog import` "
            "reads it into another log."
        ),
    )
    export.add_argument("session", metavar="SESSION", help="the session id")
    export.add_argument("-o", "--output", metavar="FILE", help="default: stdout")

    import_ = commands.add_parser(
        "import",
        help="add sessions exported from another log",
        description=(
            "Reads the output of `turnlog export` and writes its events "
            "verbatim, all in one transaction. A file that is not an export, "
            "a session that does not verify or one already in the log is "
            "refused, and nothing is written."
        ),
    )
    import_.add_argument("file", metavar="FILE", help="the export, or - for stdin")

    archive = commands.add_parser(
        "archive",
        help="move finished sessions out of the live log into an archive file",
        description=(
            "Writes the sessions to FILE (an export that verifies on its own), "
            "then removes them from the live log and its views in one step; "
            "`turnlog audit SESSION` then says where each went."
        ),
    )
    archive.add_argument("--before", metavar="DATE", help="idle, last active before")
    archive.add_argument(
        "--session", metavar="ID", action="append", help="this session (repeatable)"
    )
    archive.add_argument("-o", "--output", metavar="FILE", required=True)

    backup = commands.add_parser(
        "backup",
        help="copy a live SQLite log to a new file, and verify the copy",
        description=(
            "An online, consistent copy (SQLite's backup API, one snapshot): "
            "sessions may keep writing. The copy is checked (integrity, every "
            "session's chain) before it appears at DEST. For PostgreSQL, use "
            "pg_dump (see the README)."
        ),
    )
    backup.add_argument(
        "destination", metavar="DEST", help="a file that does not exist"
    )

    rebuild_ = commands.add_parser(
        "rebuild",
        help="rebuild views from the log, offline",
        description=(
            "Rebuilds each view beside the one serving and swaps it in when "
            "done. Interrupted, it resumes where it stopped when run again. "
            "With --verify, compares instead of swapping and prints every "
            "difference (exit 1 if there is one)."
        ),
    )
    rebuild_.add_argument("views", metavar="VIEW", nargs="*", help="default: all")
    rebuild_.add_argument(
        "--verify", action="store_true", help="compare with the live views only"
    )
    rebuild_.add_argument(
        "--batch",
        metavar="N",
        type=_positive_int,
        default=REBUILD_BATCH,
        help=f"log entries per transaction (default: {REBUILD_BATCH})",
    )

    project = commands.add_parser(
        "project",
        help="bring the views up to date with the log (or keep them so)",
        description=(
            "Folds what the log holds into every view, once; with --follow, "
            "keeps doing so as the log grows, until Ctrl-C. Runs beside the "
            "processes that write sessions."
        ),
    )
    project.add_argument("--follow", action="store_true", help="until Ctrl-C")
    project.add_argument(
        "--interval",
        metavar="SECONDS",
        type=_positive_float,
        default=FOLLOW_INTERVAL,
        help=(
            "with --follow: seconds to gather new events before folding them "
            f"(default: {FOLLOW_INTERVAL:g})"
        ),
    )
    _add_serve_parser(commands)
    return parser


def _add_serve_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Adds ``turnlog serve`` and its options."""
    serve = commands.add_parser(
        "serve",
        help="serve sessions over HTTP: JSON resources and a resumable SSE stream",
        description=(
            "Runs the turnlog service on uvicorn. Agents come from --agent "
            "module:attribute, --demo (offline, scripted), or else the model "
            "settings turnlog run uses. Bearer tokens come from --tokens FILE "
            "or TURNLOG_SERVICE_TOKENS (TENANT=SECRET,...); with neither, a "
            "token is made for this run and printed."
        ),
    )
    serve.add_argument(
        "--demo", action="store_true", help="serve the offline demo agent"
    )
    serve.add_argument(
        "--agent",
        metavar="MODULE:ATTRIBUTE",
        action="append",
        default=[],
        help="an Agent (or a function returning one) to serve; repeatable",
    )
    serve.add_argument(
        "--config", metavar="FILE", type=Path, help="route file, as for run"
    )
    serve.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    serve.add_argument("--port", type=int, default=8000, help="default: 8000")
    serve.add_argument(
        "--tokens",
        metavar="FILE",
        type=Path,
        help='TOML: [tokens] tenant = "sha256:HEX"',
    )
    serve.add_argument(
        "--cors-origin",
        metavar="ORIGIN",
        action="append",
        default=[],
        help="allow this origin by CORS (off unless given); repeatable",
    )
    serve.add_argument(
        "--heartbeat",
        metavar="SECONDS",
        type=float,
        default=15.0,
        help="seconds between keep-alive comments on idle streams (default: 15)",
    )
    serve.add_argument(
        "--young-generation",
        metavar="OBJECTS",
        type=int,
        default=SERVICE_YOUNG_GENERATION,
        help="the garbage collector's first threshold while serving: objects "
        "made between young collections (default: "
        f"{SERVICE_YOUNG_GENERATION}; 0 leaves Python's own; README: Service)",
    )
    # The connection's limits (turnlog.service.limits.ConnectionLimits holds
    # the defaults; an option not given keeps them).
    limits = serve.add_argument_group("connection limits (README: Service)")
    limits.add_argument(
        "--header-timeout",
        metavar="SECONDS",
        type=float,
        help="a request's headers must be in this long after the connection "
        "opens or the request starts (default: 10)",
    )
    limits.add_argument(
        "--keep-alive-timeout",
        metavar="SECONDS",
        type=int,
        help="an idle connection is closed after this long (default: 5)",
    )
    limits.add_argument(
        "--max-header-bytes",
        metavar="BYTES",
        type=int,
        help="request line and headers together (default: 16384)",
    )
    limits.add_argument(
        "--max-headers",
        metavar="N",
        type=int,
        help="header fields per request (default: 100)",
    )
    limits.add_argument(
        "--max-connections",
        metavar="N",
        type=int,
        help="connections served at once; more get a 503 (default: 1000)",
    )


def _add_demo_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Adds ``turnlog demo`` and its options."""
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
    demo.add_argument(
        "--agents",
        action="store_true",
        help=(
            "an agent that asks another (a child session of its own) and "
            "answers with a typed object"
        ),
    )


def _add_run_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Adds ``turnlog run`` and its options."""
    run = commands.add_parser(
        "run",
        help="talk to a model in an interactive session",
        description=(
            "An interactive session against an OpenAI-compatible endpoint "
            "(TURNLOG_MODEL, OPENAI_API_KEY, OPENAI_BASE_URL; TURNLOG_API=chat "
            "for /chat/completions) or Anthropic's Messages API "
            "(TURNLOG_API=anthropic, TURNLOG_MODEL, ANTHROPIC_API_KEY, "
            "ANTHROPIC_BASE_URL), or by routes in turnlog.toml. Answers stream as they "
            "arrive; Ctrl-C stops a running turn, and Ctrl-C twice (or Ctrl-D "
            "at the prompt) quits."
        ),
    )
    run.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        help=(
            "the route file, trusted (default: $TURNLOG_CONFIG, else "
            "~/.config/turnlog/turnlog.toml, then a turnlog.toml here, which "
            "may not set base_url or api_key_env or declare mcp_servers)"
        ),
    )
    run.add_argument(
        "--session",
        metavar="ID",
        help="the session to continue (or create); default: a new session",
    )
    run.add_argument(
        "--model",
        metavar="ROUTE",
        help="the model route to use (default: the configured default route)",
    )
    run.add_argument(
        "--tools",
        action="store_true",
        help=(
            "let the model list, read and write files under the working "
            "directory (writing asks for approval)"
        ),
    )
    run.add_argument(
        "--no-mcp",
        action="store_true",
        help="run without the MCP servers of the route file ([mcp_servers])",
    )
    run.add_argument(
        "--approval",
        choices=("ask", "allow", "deny"),
        default="ask",
        help="tools that need approval: ask (default), allow or deny them",
    )
