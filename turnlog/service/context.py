"""What every face of the service shares: runtime, agents, tenants, feeds.

A :class:`ServiceContext` is made by ``create_app`` and kept in
``app.state.turnlog``; each face (the JSON resources, the event stream,
and faces added later) reads it from there. It opens sessions for the
tenant that owns them, and only for that tenant: another tenant's
session is reported exactly like one that does not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping

from starlette.requests import HTTPConnection

from turnlog.agent import Agent
from turnlog.domain.errors import InvalidInputError
from turnlog.domain.ids import new_submission_id
from turnlog.runtime import Runtime
from turnlog.service.auth import ServiceTokens
from turnlog.service.delta_pumps import DeltaPumps
from turnlog.service.feed import Feeds
from turnlog.service.log_tail import CommitSignal, LocalCommitSignal
from turnlog.service.problems import Problem
from turnlog.service.tenancy import OwnedSession, SessionOwners
from turnlog.session import AgentSession

logger = logging.getLogger(__name__)

AgentSource = Agent | Callable[[], Agent]
"""An agent, or a function making one per session (for stateful models)."""


def unknown_session(session_id: str) -> Problem:
    """The one 404 of every session that is not the caller's.

    A session of another tenant, one that does not exist and one that no
    tenant owns all get this very answer, so none can be told apart.
    """
    return Problem(404, f"no session {session_id!r}")


class ServiceContext:
    """The state behind one service app.

    Args:
        runtime: the runtime whose sessions the service serves (the caller
            owns it: closing the service does not close it).
        agents: the agents a client may start sessions with, by name.
        tokens: the tenants' bearer tokens.
        default_agent: the agent of a session created without one (default:
            the only agent, if there is one).
        heartbeat: seconds between keep-alive comments on an idle stream.
        signal: when streams look at the log again (default: in-process
            commits at once, other processes' by polling).
    """

    def __init__(
        self,
        runtime: Runtime,
        agents: Mapping[str, AgentSource],
        tokens: ServiceTokens,
        *,
        default_agent: str | None = None,
        heartbeat: float = 15.0,
        signal: CommitSignal | None = None,
    ) -> None:
        if not agents:
            msg = "the service needs at least one agent"
            raise InvalidInputError(msg)
        if default_agent is None and len(agents) == 1:
            default_agent = next(iter(agents))
        if default_agent is not None and default_agent not in agents:
            msg = f"default_agent {default_agent!r} is not one of {sorted(agents)}"
            raise InvalidInputError(msg)
        self.runtime = runtime
        self.agents = dict(agents)
        self.default_agent = default_agent
        self.tokens = tokens
        self.heartbeat = heartbeat
        self.owners = SessionOwners(runtime.store)
        self.signal = signal or LocalCommitSignal(runtime.store)
        self.feeds = Feeds(runtime.transcript, self.signal)
        self._lock = threading.Lock()
        # Handles are held by the requests (and delta pumps) using them, and
        # only looked up here: a session no request holds is let go, so the
        # runtime passivates it soon and forgets it (a service that runs for
        # weeks holds memory for its live work only).
        self._handles: weakref.WeakValueDictionary[str, AgentSession] = (
            weakref.WeakValueDictionary()
        )
        # Deltas are pumped (turnlog.service.delta_pumps) only for sessions
        # that open streams are reading.
        self.pumps = DeltaPumps(
            self._find, self.feeds.publish_delta, lambda: self._loop
        )
        # One lock a session while prompts wait on it (the loop's only).
        self._prompt_locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        self.running_tasks: set[asyncio.Task[object]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind_loop(self) -> None:
        """Notes the event loop that serves (deltas are handed to it)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()

    def tenant(self, connection: HTTPConnection) -> str:
        """The tenant of a request, or a 401 problem."""
        self.bind_loop()
        return self.tokens.authenticate(connection)

    def owned(self, tenant: str, session_id: str) -> OwnedSession:
        """The tenant's session; a 404 for any other (even one that exists)."""
        owned = self.owners.get(tenant, session_id)
        if owned is None:
            raise unknown_session(session_id)
        return owned

    async def owned_async(self, tenant: str, session_id: str) -> OwnedSession:
        """``owned`` for the loop: no worker thread when the owner is known."""
        known = self.owners.known(tenant, session_id)
        if known is not None:  # most requests: no query, no thread
            return known
        return await asyncio.to_thread(self.owned, tenant, session_id)

    def agent(self, name: str) -> Agent:
        """A (new, for a factory) agent of the service by its name."""
        source = self.agents.get(name)
        if source is None:
            raise Problem(
                422,
                f"no agent {name!r}; agents: {sorted(self.agents)}",
                field="$.agent",
            )
        return source if isinstance(source, Agent) else source()

    def create(
        self, tenant: str, agent_name: str, shared_state: dict[str, object] | None
    ) -> tuple[OwnedSession, AgentSession]:
        """A new session of ``tenant`` (blocking: call it off the loop)."""
        agent = self.agent(agent_name)
        session_id = f"session-{new_submission_id()[:16]}"
        # The owner first: a crash before the session exists leaves a row
        # naming nothing, never a session that no tenant owns.
        owned = self.owners.claim(session_id, tenant, agent_name)
        session = self.runtime.create_session(
            agent, session_id=session_id, shared_state=shared_state
        )
        self._keep(session)
        return owned, session

    def session(self, owned: OwnedSession) -> AgentSession:
        """The live session (opened here if needed; blocking)."""
        with self._lock:
            handle = self._handles.get(owned.session_id)
        if handle is not None and handle.reachable():
            return handle
        handle = self.runtime.create_session(
            self.agent(owned.agent), session_id=owned.session_id
        )
        self._keep(handle)
        return handle

    async def session_async(self, owned: OwnedSession) -> AgentSession:
        """``session`` for the loop: no worker thread when it is open here."""
        handle = self.live(owned.session_id)
        if handle is not None and handle.reachable():
            return handle
        return await asyncio.to_thread(self.session, owned)

    def live(self, session_id: str) -> AgentSession | None:
        """The session if it was opened in this process, else None."""
        with self._lock:
            return self._handles.get(session_id)

    def _keep(self, session: AgentSession) -> None:
        """Remembers an opened session (and pumps its deltas if streams wait)."""
        with self._lock:
            self._handles[session.session_id] = session
        self.pumps.forget_stale(session)
        self.pumps.start(session.session_id)

    @contextlib.asynccontextmanager
    async def prompt_lock(self, session_id: str) -> AsyncIterator[None]:
        """One prompt of the session at a time from here (on the loop only).

        The lock lives while prompts hold it or wait for it, no longer.
        """
        entry = self._prompt_locks.get(session_id)
        if entry is None:
            entry = self._prompt_locks[session_id] = (asyncio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._prompt_locks[session_id]

    def held_sessions(self) -> int:
        """How much the service holds for sessions now: handles, delta pumps,
        prompt locks, stream feeds and their wake-ups (one each a session).

        Bounded by the work in flight (requests, open streams, background
        runs), not by the sessions the service ever served.
        """
        with self._lock:
            held = len(self._handles) + len(self._prompt_locks)
        held += len(self.pumps)
        return held + self.feeds.open_count() + self.signal.watched()

    def _find(self, session_id: str) -> AgentSession | None:
        with self._lock:
            return self._handles.get(session_id)

    def close(self) -> None:
        """Stops the streams' feeds and delta pumps (not the runtime)."""
        self.feeds.stop_all()
        self.signal.close()
        self.pumps.close()
        for task in self.running_tasks:
            task.cancel()


__all__ = ["AgentSource", "ServiceContext", "unknown_session"]
