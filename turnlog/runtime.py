"""The Runtime: one store, its views, and the actors of every live session.

``Runtime.open()`` starts the shared services (the ToolExecutor, the
ApprovalBroker actor), the I/O loop and the projection follower
(turnlog/hosting/services.py); ``close()`` (or leaving a ``with`` block)
stops every actor it started, sessions included. Its table of sessions, and
how one is opened here, are turnlog/hosting/session_table.py.

A runtime its program leaves open is closed at exit (turnlog/hosting/exit_hook.py
says why every thread is a daemon and what the hook does).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import msgspec

from turnlog.actors.tool_executor import DEFAULT_MAX_CONCURRENCY
from turnlog.agent import Agent
from turnlog.approvals import ApprovalBroker
from turnlog.config import RunConfig
from turnlog.domain.errors import InvalidInputError, LeaseLostError, UsageError
from turnlog.domain.ids import check_session_id
from turnlog.domain.protocol import Event
from turnlog.handles.agent_handle import AgentHandle
from turnlog.hosting.children import ChildSession, children_of, usage_by_agent
from turnlog.hosting.creation import Creation, CreationPool, check_creation
from turnlog.hosting.exit_hook import close_at_exit, closed
from turnlog.hosting.forking import record_fork
from turnlog.hosting.services import RuntimeServices
from turnlog.hosting.session_table import SessionTable
from turnlog.projections.checkpoint_reader import Checkpoints
from turnlog.projections.closing import VIEWS_TIMEOUT, bring_views_to_head
from turnlog.projections.follower import SessionFollower
from turnlog.projections.readers import (
    Executions,
    Summaries,
    Transcripts,
    replay_session,
)
from turnlog.projections.rebuild import default_projections
from turnlog.projections.runner import LIVE_CACHE_LIMIT, ProjectionRunner
from turnlog.session import AgentSession
from turnlog.store.lineage import HistoryPoint, scan
from turnlog.store.log import Store
from turnlog.store.ownership import LEASE_SECONDS

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter


class Runtime:
    """Runs agent sessions on one event log. Open with :meth:`open`."""

    def __init__(
        self,
        store: Store,
        *,
        run_config: RunConfig | None = None,
        max_tool_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        follow_projections: bool = True,
        lease_seconds: float = LEASE_SECONDS,
        span_exporter: SpanExporter | None = None,
    ) -> None:
        self.store = store
        self.run_config = run_config or RunConfig()
        self.projections = ProjectionRunner(store, default_projections())
        self.projections.cache_limit = LIVE_CACHE_LIMIT
        guard = self._check_open
        self.transcript = Transcripts(self.projections, guard)
        self.checkpoints = Checkpoints(self.projections, self.transcript, guard)
        self.executions = Executions(self.projections, guard)
        self.summaries = Summaries(self.projections, guard)
        services = RuntimeServices(
            store,
            self.projections,
            max_tool_concurrency=max_tool_concurrency,
            follow_projections=follow_projections,
            lease_seconds=lease_seconds,
            span_exporter=span_exporter,
            on_lease_lost=self._lease_lost,
        )
        self._services = services
        self._follows = follow_projections
        self.ownership = services.ownership
        self.approvals = ApprovalBroker(services.broker)
        self._io_loop = services.io_loop
        self._tool_executor = services.tool_executor
        self._creations = CreationPool()  # no thread until create_session_async
        self._table = SessionTable(
            store,
            services,
            defaults=self.run_config,
            recorded_answer=self._recorded_answer,
        )
        self._closed = self._table.closed  # set once the runtime closes
        close_at_exit(self)

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        run_config: RunConfig | None = None,
        max_tool_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        lease_seconds: float = LEASE_SECONDS,
        span_exporter: SpanExporter | None = None,
    ) -> Runtime:
        """Opens the log at ``url`` (default: ``.turnlog/turnlog.sqlite3``).

        ``lease_seconds`` is how long this runtime's hold on a session lasts
        if the process stops renewing it (frozen, or killed on another
        host); after that another process may take the session over.

        ``span_exporter`` (an OpenTelemetry ``SpanExporter``; needs the
        ``otel`` extra) is handed each session's spans as the log ends them,
        off the sessions' threads (see turnlog.traces.live); closing the runtime
        exports what is left and shuts it down.

        Raises StoreURLError for a bad URL and NotATurnlogStoreError for a
        database that is not a turnlog log; nothing is written then.
        """
        if run_config is not None and not isinstance(run_config, RunConfig):
            msg = "run_config must be a turnlog.RunConfig"
            raise InvalidInputError(msg)
        store = Store(url)
        try:
            return cls(
                store,
                run_config=run_config,
                max_tool_concurrency=max_tool_concurrency,
                lease_seconds=lease_seconds,
                span_exporter=span_exporter,
            )
        except BaseException:
            store.close()
            raise

    @property
    def location(self) -> str:
        """Where the log lives (a path, ``memory`` or a PostgreSQL address)."""
        return self.store.location

    def _check_open(self) -> None:
        self._table.check_open()

    def create_session(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        shared_state: dict[str, Any] | None = None,
        run_config: RunConfig | None = None,
        deps: object = None,
    ) -> AgentSession:
        """Opens the session ``session_id`` (created if the log has none).

        The session id comes from ``session_id``, else from the run config,
        else a new one is made. An existing session is hydrated from the log:
        its messages, shared state and usage are what the log says, and a
        turn a crash cut off is closed first. ``shared_state`` keys given
        here are set (and recorded) on top of the stored state.

        The session passivates after the run config's ``idle_timeout``
        idle (its actor stops, its lease is given back); the handle starts
        it again on its next call.

        ``deps`` are the session's dependencies, handed to its tools, hooks
        and instructions function (a prompt may give its own): live objects,
        never recorded, so pass them again when the session is opened after
        a restart. Given for a session open here, they replace its deps.
        They must be of the agent's ``deps_type`` (InvalidInputError).
        """
        creation = self._creation(agent, session_id, shared_state, run_config, deps)
        return self._open_created(creation)

    async def create_session_async(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        shared_state: dict[str, Any] | None = None,
        run_config: RunConfig | None = None,
        deps: object = None,
    ) -> AgentSession:
        """``create_session`` for asyncio: the caller's loop never waits on a commit.

        The same arguments, checks and errors as ``create_session``, and
        the same promise: the session and its lease are committed before it
        returns. The arguments are checked on the caller's loop; the rest
        runs on a few threads of the runtime's own, so creations awaited
        together overlap, and their commits are shared (a burst of them
        costs a few commits, not one each; see turnlog.hosting.creation).

        Cancelling the awaiting task does not cancel the creation: it runs
        to its end, and the session is then in the log (its handle,
        which nobody took, is let go, and it passivates). A creation is
        never half made. When the runtime closes meanwhile, one under way
        finishes and one not begun raises RuntimeClosedError.
        """
        creation = self._creation(agent, session_id, shared_state, run_config, deps)
        return await self._creations.run(
            functools.partial(self._open_created, creation)
        )

    def _creation(
        self,
        agent: Agent,
        session_id: str | None,
        shared_state: dict[str, Any] | None,
        run_config: RunConfig | None,
        deps: object,
    ) -> Creation:
        """The arguments of either create_session, checked (nothing written)."""
        self._check_open()
        return check_creation(
            agent,
            session_id=session_id,
            shared_state=shared_state,
            run_config=run_config,
            deps=deps,
            defaults=self.run_config,
        )

    def _open_created(self, creation: Creation) -> AgentSession:
        return self._table.open(
            creation.agent,
            creation.session_id,
            creation.shared_state,
            creation.settings,
            event_buffer=creation.event_buffer,
        )

    def _recorded_answer(self, session_id: str) -> tuple[Any, str]:
        """The session's last accepted answer as recorded (UNSET if none),
        and the agent in charge ("" if the checkpoint does not say)."""
        checkpoint = self.checkpoints.load(session_id, context=False)
        if checkpoint is None:
            return msgspec.UNSET, ""
        return checkpoint.output, checkpoint.agent_in_charge

    def create_agent(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        shared_state: dict[str, Any] | None = None,
        run_config: RunConfig | None = None,
        deps: object = None,
    ) -> AgentHandle:
        """The protocol face of a session: ``submit(op)`` and ``next_event()``.

        ``deps`` as for ``create_session``: every input submitted runs with them.
        """
        session = self.create_session(
            agent,
            session_id=session_id,
            shared_state=shared_state,
            run_config=run_config,
            deps=deps,
        )
        return AgentHandle(session)

    def children(self, session_id: str) -> list[ChildSession]:
        """The child sessions the tool calls of ``session_id`` ran, in order
        (agents used as tools; see ``Agent.as_tool``)."""
        self._check_open()
        return children_of(self.store, session_id)

    def usage_by_agent(self, session_id: str) -> dict[str, dict[str, int]]:
        """The usage totals of ``session_id`` and every session under it
        (its children, theirs, ...), summed by agent name."""
        self._check_open()
        return usage_by_agent(self.store, session_id)

    def fork_session(
        self,
        source_id: str,
        *,
        before_input: int | None = None,
        after_turn: int | None = None,
        at: object = None,
        session_id: str | None = None,
        agent: Agent | None = None,
        keep_allowances: bool = False,
        deps: object = None,
    ) -> AgentSession:
        """A new session whose history is ``source_id``'s up to a quiet point.

        The point is ``before_input=N`` (before the user input N, counted
        from 1, that started a turn), ``after_turn=N`` (after turn N; 0 is
        before the first input), ``at=`` a Checkpoint of a quiet moment
        (``rt.checkpoints.at``), or, when none is given, the source's latest
        quiet point (a running source's last finished turn). ``rt.history``
        lists the points. The fork is one event naming its source, the point
        and the source chain's digest there (see turnlog.hosting.forking for what is
        carried); the source is not touched.

        The fork runs ``agent``, or the source's agent if the source is
        open in this runtime. Raises InvalidInputError for a point that is
        not quiet or not there, UsageError if ``session_id`` exists or no
        agent is known; nothing is recorded then.
        """
        self._check_open()
        if agent is None:
            live = self._table.get(source_id) if isinstance(source_id, str) else None
            if live is None or not isinstance(live.agent, Agent):
                msg = f"pass agent=: session {source_id!r} is not open in this runtime"
                raise UsageError(msg)
            agent = live.agent
            named: tuple[str | None, str | None] = (None, None)
        elif not isinstance(agent, Agent):
            msg = f"agent must be a turnlog.Agent, not {type(agent).__name__}"
            raise InvalidInputError(msg)
        else:
            named = (agent.name, agent.digest())
        fork_id, _ = record_fork(
            self.store,
            source_id,
            before_input=before_input,
            after_turn=after_turn,
            at=at,
            session_id=session_id,
            agent_name=named[0],
            agent_digest=named[1],
            keep_allowances=keep_allowances,
        )
        return self.create_session(agent, session_id=fork_id, deps=deps)

    def history(self, session_id: str) -> list[HistoryPoint]:
        """The quiet points of a session a fork or a rewind may name, in order.

        One per turn start (with the input that started it and a preview)
        and one for the session's end if no turn runs; each with its log
        position and whether a rewind has set its turn aside.
        """
        self._check_open()
        check_session_id(session_id)
        return scan(self.store, session_id).points

    def replay_events(self, session_id: str) -> list[Event]:
        """The session's durable EventMsg stream, regenerated from the log."""
        self._check_open()
        return replay_session(self.transcript, session_id)

    def follow(self, session_id: str, *, after: int = 0) -> SessionFollower:
        """Follows a session from the log, wherever it runs.

        Unlike ``session.subscribe()``, which sees a session running in
        this runtime, this reads the log: it follows a session run by
        another process on the same PostgreSQL (woken by LISTEN/NOTIFY
        after each commit; on SQLite, by saves here and a poll), and one
        taken over by another process after a crash. It yields the
        durable Events ``replay_events`` gives, each once and in order,
        those whose ``sequence`` is above ``after`` (pass the last one
        read to resume). It takes no lease: any number may follow.
        """
        self._check_open()
        return SessionFollower(
            self.store, session_id, after=after, check_open=self._check_open
        )

    def _lease_lost(self, session_id: str, error: LeaseLostError) -> None:
        """Stops a session whose lease another process took over."""
        # Only a session opened here holds a lease, so the table is there.
        self._table.lease_lost(session_id, error)

    def live_sessions(self) -> int:
        """How many session actors run now (idle ones passivate)."""
        return self._table.live.count()

    def wait_live_sessions(
        self, at_most: int = 0, timeout: float | None = None
    ) -> bool:
        """Waits until at most ``at_most`` session actors run here.

        Sessions passivate once idle past their ``idle_timeout``, or soon
        after idling when no handle holds them; this returns once enough
        have, their actors stopped (a service draining before a deploy,
        a memory check). False if ``timeout`` passed first. A session
        whose actor failed is not live; closing the runtime stops them all.
        """
        if at_most < 0:
            msg = f"at_most must be 0 or more sessions, not {at_most!r}"
            raise ValueError(msg)
        return self._table.live.wait(at_most, timeout)

    def sessions(self) -> list[str]:
        """Every session id in the log."""
        self._check_open()
        return self.transcript.sessions()

    def close(self, *, views_timeout: float = VIEWS_TIMEOUT) -> None:
        """Stops every actor this runtime started and closes the store.

        It does not wait for sync tool calls still running: their results
        are dropped, and the log shows each such call as started, not
        finished, so reopening the session closes it as interrupted. Nor
        does it wait for background jobs (``ToolContext.start_job``): the
        same holds for them, unless a job is idempotent (it runs again).

        Once the sessions have stopped, it waits up to ``views_timeout``
        seconds for the views this process keeps (see ``follow_projections``)
        to fold the log up to its head, so the sessions view holds each
        session's head for a later ``turnlog audit --verify``. If they
        cannot (a view failed, the store failed, time ran out, another
        process keeps them), it logs a warning saying how far they got and
        closes anyway: the log is complete, and the next runtime or
        ``turnlog project`` brings the views up to it.

        Every call on the runtime, its read models and its sessions raises
        RuntimeClosedError afterwards. Closing twice is harmless.

        Raises:
            ValueError: ``views_timeout`` is negative.
        """
        if not views_timeout >= 0:
            msg = f"views_timeout must be 0 or more seconds, not {views_timeout!r}"
            raise ValueError(msg)
        activations = self._table.close()
        if activations is None:
            return
        closed(self)
        self._creations.close()  # once they have finished or failed
        for activation in activations:
            activation.close()
        self._table.live.changed()
        if self._follows:
            bring_views_to_head(self.store, self.projections, views_timeout)
        self._table.close_providers()
        self._table.close_mcp_servers()
        self._services.stop()
        self.store.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
