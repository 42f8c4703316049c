"""``turnlog run``: an interactive terminal session against a real model.

Three threads take part, and only one of them ever touches the terminal:

- the main thread reads the user's lines, reads the session's
  subscription while a turn runs, prints what it shows (streamed text
  as it arrives, tool calls, their results) and asks for approvals;
- a prompt thread calls ``session.prompt`` and waits there for the run
  to end, so the main thread never blocks on the run itself;
- the runtime's own actors run the turn.

Approvals cannot deadlock: a tool that needs one makes the turn wait for a
decision and publishes an ``ApprovalRequestedMsg``; the main thread sees it on
the subscription, asks, and answers with ``session.approve`` (an ask the
session actor serves at once, since the waiting turn blocks nothing).

Ctrl-C during a turn interrupts it (``turnlog.cli.run.terminal`` counts the
presses); a second one, or one at the ``you>`` prompt, quits.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from turnlog.agent import Agent
from turnlog.cli.run.mcp_settings import build_mcp_servers, describe_tools
from turnlog.cli.run.settings import Settings, build_router, close_router
from turnlog.cli.run.terminal import CtrlC, Terminal
from turnlog.cli.run.view import TurnView, approval_question, parse_approval
from turnlog.cli.run.workspace import Workspace, workspace_tools
from turnlog.cli.timeline import one_line
from turnlog.config import RunConfig
from turnlog.domain.errors import SessionClosedError, UsageError
from turnlog.domain.ids import check_session_id
from turnlog.domain.protocol import ApprovalRequestedMsg
from turnlog.domain.run import RunEvent, RunFinished, RunResult
from turnlog.mcp.tools import McpServer
from turnlog.routing import ModelRouter
from turnlog.runtime import Runtime
from turnlog.session import AgentSession
from turnlog.store.opening import parse_store_url

AGENT_NAME = "turnlog-run"
"""The agent of ``turnlog run``; ``--session`` continues only its sessions."""

INSTRUCTIONS = (
    "You are a helpful assistant talking to a user in a terminal. Answer "
    "concisely, in plain text."
)
TOOL_INSTRUCTIONS = (
    " You can list, read and write files in the user's workspace with your "
    "tools; paths are relative to it, and writing asks the user first."
)

PROMPT = "you> "
ERROR_LIMIT = 500
"""Characters of an error message shown (it is one line, never a traceback)."""
POLL_SECONDS = 0.1
"""How often a waiting turn loop looks at Ctrl-C presses."""
QUIT_WAIT = 5.0
"""Seconds quitting waits for an interrupted turn to be recorded as ended."""

HOW_TO_CONFIGURE = """\
turnlog run talks to an OpenAI-compatible endpoint or to Anthropic's API.
Configure one with environment variables:

    export TURNLOG_MODEL=gpt-4.1-mini OPENAI_API_KEY=sk-...
    # another server: OPENAI_BASE_URL=http://127.0.0.1:8080/v1
    # its /chat/completions API: TURNLOG_API=chat

    # or Anthropic's Messages API:
    export TURNLOG_API=anthropic TURNLOG_MODEL=claude-sonnet-4-5 ANTHROPIC_API_KEY=...

or with routes in ~/.config/turnlog/turnlog.toml (or the file --config or
$TURNLOG_CONFIG names):

    default_route = "local"
    [routes.local]
    model = "llama3.1"
    base_url = "http://127.0.0.1:8080/v1"
    api = "chat"
    api_key_env = "LOCAL_KEY"    # the variable that holds the key, if any

A turnlog.toml in this directory may add routes and pick the default, but
not set base_url or api_key_env: those say where your key goes.

To try turnlog offline first, without any endpoint: turnlog demo
"""

ApprovalPolicy = Literal["ask", "allow", "deny"]


class ChatLoop:
    """Reads lines, runs each as a prompt and shows the turn as it goes.

    Args:
        session: the session to talk to.
        terminal: where to read and write.
        ctrl_c: the Ctrl-C presses (installed by the caller, or pressed by
            a test).
        poll: seconds between looks at Ctrl-C while a turn runs.
    """

    def __init__(
        self,
        session: AgentSession,
        terminal: Terminal,
        ctrl_c: CtrlC,
        *,
        poll: float = POLL_SECONDS,
    ) -> None:
        self._session = session
        self._terminal = terminal
        self._ctrl_c = ctrl_c
        self._poll = poll
        self._subscription = session.subscribe()

    def run(self) -> None:
        """Until the user quits (EOF or Ctrl-C at the prompt, or Ctrl-C twice)."""
        while True:
            try:
                line = self._ctrl_c.read_line(self._terminal, PROMPT)
            except (EOFError, KeyboardInterrupt):
                self._terminal.write("\n")
                return
            text = line.strip()
            if text and not self.run_turn(text):
                return

    def close(self) -> None:
        """Stops reading the session's events."""
        self._subscription.close()

    def run_turn(self, text: str) -> bool:
        """Runs ``text`` to the end of its run; False if the user quit meanwhile.

        The first Ctrl-C interrupts the turn. A second one quits once the
        turn has ended, so the log records it as interrupted rather than
        leaving it for the next resume to find cut off; a third, or
        ``QUIT_WAIT`` seconds, quits at once.
        """
        view = TurnView(self._terminal.write)
        self._ctrl_c.take()  # presses from before the turn are not about it
        started = _start_prompt(self._session, text)
        stop = _Stop()
        while True:
            if stop.pressed(self._ctrl_c.take(), view):
                return False
            if stop.interrupting and not stop.sent:
                stop.sent = self._interrupt()
            refused = started.exception() if started.done() else None
            if refused is not None:
                view.line(f"  error: {one_line(str(refused), ERROR_LIMIT)}")
                return not stop.quitting
            try:
                item = self._subscription.get(timeout=self._poll)
            except TimeoutError:
                if started.done() and started.exception() is None:
                    view.close_line()  # the run ended, its end missed
                    return not stop.quitting
                continue
            except SessionClosedError:
                view.line("the session was closed")
                return False
            if isinstance(item, RunEvent) and isinstance(
                item.event.msg, ApprovalRequestedMsg
            ):
                if not stop.interrupting:  # else the interrupt settles it
                    view.close_line()
                    self._approve(item.event.msg)
                continue
            view.show(item)
            if isinstance(item, RunFinished):
                return not stop.quitting

    def _interrupt(self) -> bool:
        """Asks the session to stop its turn; False if there was none yet."""
        try:
            self._session.interrupt()
        except UsageError:
            # No turn running: it has not started yet (the prompt thread's
            # message may not have reached the session) or already ended;
            # the loop tries again until the run's end arrives.
            return False
        return True

    def _approve(self, request: ApprovalRequestedMsg) -> None:
        """Asks the user about ``request`` and answers the session."""
        pending = {each.request_id for each in self._session.pending_approvals()}
        if request.request_id not in pending:
            return  # decided meanwhile, e.g. covered by a session allowance
        question = approval_question(request)
        while True:
            try:
                answer = self._ctrl_c.read_line(self._terminal, question)
            except KeyboardInterrupt:
                self._terminal.write("\n")
                self._ctrl_c.press()  # the turn loop interrupts the turn
                return
            except EOFError:
                answer = "q"  # no one is left to answer: end the turn
            decision = parse_approval(answer)
            if decision is not None:
                break
            self._terminal.write("  please answer y, a, n or q\n")
        try:
            self._session.approve(request.request_id, decision)
        except UsageError as error:  # decided first by a timeout, say
            self._terminal.write(f"  {one_line(str(error), ERROR_LIMIT)}\n")


class _Stop:
    """What the user's Ctrl-C presses asked of the running turn."""

    def __init__(self) -> None:
        self.interrupting = False
        self.sent = False
        self._quit_by: float | None = None

    @property
    def quitting(self) -> bool:
        """Whether the user asked to quit (after the turn ends)."""
        return self._quit_by is not None

    def pressed(self, presses: int, view: TurnView) -> bool:
        """Takes ``presses`` new presses; True to quit right now."""
        if self._quit_by is not None:
            return presses > 0 or time.monotonic() > self._quit_by
        if presses and (self.interrupting or presses > 1):
            view.line("quitting once the turn has stopped (Ctrl-C again: now)")
            self._quit_by = time.monotonic() + QUIT_WAIT
        elif presses:
            view.line("interrupting the turn (Ctrl-C again quits)")
        self.interrupting = self.interrupting or presses > 0
        return False


def _start_prompt(
    session: AgentSession, text: str
) -> concurrent.futures.Future[RunResult]:
    """Runs ``session.prompt(text)`` on a thread; its future resolves with it.

    A daemon thread: should the runtime be closed with the run unfinished,
    the waiting thread must not keep the process alive.
    """
    done: concurrent.futures.Future[RunResult] = concurrent.futures.Future()

    def prompt() -> None:
        try:
            done.set_result(session.prompt(text))
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            done.set_exception(error)

    threading.Thread(target=prompt, name="turnlog-run-prompt", daemon=True).start()
    return done


@dataclass(frozen=True)
class RunOptions:
    """What ``turnlog run`` was asked for.

    Attributes:
        store: the log's URL (None: the default log).
        session_id: the session to resume or create (None: a new one).
        route: the model route to use (None: the configured default).
        tools: whether the workspace tools are on.
        approval: the approval policy.
        workspace: the directory the tools work in.
        mcp: whether the route file's MCP servers are used.
    """

    store: str | None
    session_id: str | None = None
    route: str | None = None
    tools: bool = False
    approval: ApprovalPolicy = "ask"
    workspace: Path = Path()
    mcp: bool = True


SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a log file while it is open."""


def protected_paths(options: RunOptions, config_path: Path | None) -> list[Path]:
    """What the tools must not touch: the config file, the log's files and
    its folder (other logs may be there).

    A log folder that holds the workspace itself (``sqlite:///log.sqlite3``
    in it, say) cannot be refused whole: then only the log's files are.
    """
    paths = [] if config_path is None else [config_path]
    name = parse_store_url(options.store).get("SQLITE_DBNAME")
    if name is None or name.startswith("file:"):  # PostgreSQL, or memory://
        return paths
    log = Path(name).absolute()
    paths += [log, *(log.with_name(log.name + end) for end in SQLITE_SIDECARS)]
    if options.workspace.resolve().is_relative_to(log.parent.resolve()):
        return paths
    return [*paths, log.parent]


def build_agent(
    router: ModelRouter,
    options: RunOptions,
    config_path: Path | None = None,
    mcp_servers: Sequence[McpServer] = (),
) -> Agent:
    """The agent of ``turnlog run``: the routes, the tools if asked, and
    the MCP servers' tools.

    The tools refuse the log and ``config_path`` (the trusted route file).
    """
    tools = (
        workspace_tools(
            Workspace(options.workspace, protected_paths(options, config_path))
        )
        if options.tools
        else []
    )
    return Agent(
        AGENT_NAME,
        model=router,
        instructions=INSTRUCTIONS + (TOOL_INSTRUCTIONS if options.tools else ""),
        tools=tools,
        mcp_servers=mcp_servers,
    )


def open_session(
    runtime: Runtime, agent: Agent, options: RunOptions
) -> tuple[AgentSession, str]:
    """The session to talk in, and a line saying which it is."""
    if options.session_id is None:
        session = runtime.create_session(agent)
        return session, f"session {session.session_id} (new)"
    checkpoint = runtime.checkpoints.load(options.session_id, context=False)
    if checkpoint is None:
        session = runtime.create_session(agent, session_id=options.session_id)
        return session, f"session {session.session_id} (new)"
    if checkpoint.agent_name != AGENT_NAME:
        msg = (
            f"session {options.session_id!r} belongs to agent "
            f"{checkpoint.agent_name!r}; turnlog run continues only its own sessions"
        )
        raise UsageError(msg)
    session = runtime.create_session(agent, session_id=options.session_id)
    if options.route is not None and options.route != checkpoint.model_route:
        session.set_model_route(options.route)
    count = len(session.messages())
    plural = "" if count == 1 else "s"
    return (
        session,
        f"session {session.session_id} (resumed: {count} earlier message{plural})",
    )


def run_interactive(
    options: RunOptions,
    settings: Settings,
    terminal: Terminal,
    ctrl_c: CtrlC | None = None,
) -> tuple[str, str]:
    """Opens the log and the session and talks until the user quits.

    Returns the session's id and where its log is. ``ctrl_c`` is for
    tests; without it, SIGINT is taken over while the conversation runs
    (and only then: while the log opens, Ctrl-C stops the command as usual).

    Raises NoModelConfiguredError (before the log is opened) if no model is
    configured, UsageError for a bad route, session id or session (or an
    MCP server's setting), and McpServerError if an MCP server did not
    start. The MCP servers are stopped on the way out.
    """
    if options.session_id is not None:
        check_session_id(options.session_id)  # a bad id must change nothing
    router = build_router(settings, options.route)
    routes = settings.routes()
    servers = (
        build_mcp_servers(settings.file.mcp_servers, settings.config_path)
        if options.mcp
        else []
    )
    config = RunConfig(approval_policy=options.approval)
    presses = ctrl_c if ctrl_c is not None else CtrlC()
    try:
        with Runtime.open(options.store, run_config=config) as runtime:
            try:
                agent = build_agent(router, options, settings.config_path, servers)
                session, which = open_session(runtime, agent, options)
                route = routes[options.route or _route_of(runtime, session, agent)]
                terminal.write(f"turnlog run: {which}\nmodel: {route.describe()}\n")
                for line in describe_tools(servers):
                    terminal.write(line + "\n")
                terminal.write(
                    "Type a message and press Enter. Ctrl-C stops a running turn; "
                    "Ctrl-D, or Ctrl-C here, quits.\n"
                )
                if ctrl_c is None:
                    presses.install()
                loop = ChatLoop(session, terminal, presses)
                try:
                    loop.run()
                finally:
                    loop.close()
                return session.session_id, runtime.location
            finally:
                # While the runtime's loop, where the clients live, still runs.
                # (Runtime.close closes its sessions' providers too; closing
                # twice is harmless, and what this builds, this closes.)
                close_router(router)
    finally:
        # Runtime.close stopped the servers of the sessions it ran; one
        # whose session did not start (its tool list failed) is stopped here.
        for server in servers:
            server.close()
        # Only now: a Ctrl-C while the runtime closes must not cut it short.
        presses.restore()


def _route_of(runtime: Runtime, session: AgentSession, agent: Agent) -> str:
    checkpoint = runtime.checkpoints.load(session.session_id, context=False)
    return checkpoint.model_route if checkpoint is not None else agent.model_route
