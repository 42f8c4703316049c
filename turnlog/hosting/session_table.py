"""The sessions a Runtime hosts now, and opening one of them here.

``SessionTable`` holds each session's Activation by id, weakly: an
activation lives while a handle of its session, its running actor, or a
pending approval's broker holds it; a session nobody holds and that has
passivated is let go (the next ``create_session`` opens it from the log).
So is an agent whose sessions were all let go (a factory's, one per
session), except agents with MCP servers: their processes are stopped
when the runtime closes.

Opening a session reserves its activation under the lock, then starts
it (or asks the one that runs) with the lock let go: sessions opening at
once commit at once (one group commit for all).
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pykka

from turnlog.actors.activation import Activation, Starter
from turnlog.actors.messages import ClosedQuery, LeaseLost
from turnlog.actors.session_parts import SessionSettings
from turnlog.agent import Agent
from turnlog.config import RunConfig
from turnlog.domain.errors import (
    LeaseLostError,
    RuntimeClosedError,
    SessionClosedError,
    UsageError,
)
from turnlog.handles.actor_handle import ASK_TIMEOUT
from turnlog.hosting.children import ChildSessions
from turnlog.hosting.live_sessions import LiveSessions
from turnlog.hosting.services import RuntimeServices
from turnlog.hosting.session_starts import SessionStarts
from turnlog.session import AgentSession
from turnlog.store.log import Store

# The Runtime's logger, not this module's: what a program filters on
# (README: turnlog.runtime) stays what it was before these moved here.
logger = logging.getLogger("turnlog.runtime")


class SessionTable:
    """The sessions of one Runtime, by id (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        services: RuntimeServices,
        *,
        defaults: RunConfig,
        recorded_answer: Callable[[str], tuple[Any, str]],
    ) -> None:
        self._store = store
        self._defaults = defaults
        """The runtime's run config: a child's settings, if its parent is
        not open here."""
        self._children = ChildSessions(self.open_child, store)
        self._starts = SessionStarts(
            store,
            services.for_sessions,
            services.ownership,
            self._children,
            self.check_open,
        )
        # Bound once: every activation and handle shares these, rather
        # than each keeping bound methods (and partials) of its own, objects
        # the garbage collector walks for as long as the session is open.
        self._release = services.ownership.release
        self._revive = self._starts.revive
        self._refusal = store.refusal
        self._live_children = self._children.live
        self._recorded_answer = recorded_answer
        self._lock = threading.Lock()
        # An Event, not a flag: session handles hold it, and must not keep
        # the runtime alive (the exit hook holds runtimes weakly).
        self.closed = threading.Event()
        """Set once the runtime closes (its handles check it)."""
        self._sessions: weakref.WeakValueDictionary[str, Activation] = (
            weakref.WeakValueDictionary()
        )
        self._agents: weakref.WeakValueDictionary[int, Agent] = (
            weakref.WeakValueDictionary()
        )
        self._agents_with_servers: dict[int, Agent] = {}
        self.live = LiveSessions(self._activations)
        """The count of the session actors that run here, and a wait for fewer."""
        self._changed = self.live.changed

    def check_open(self) -> None:
        """Raises RuntimeClosedError once the runtime was closed."""
        if self.closed.is_set():
            msg = "the runtime was closed"
            raise RuntimeClosedError(msg)

    def get(self, session_id: str) -> Activation | None:
        """The activation of ``session_id`` here, if it has one."""
        with self._lock:
            return self._sessions.get(session_id)

    def open(
        self,
        agent: Agent,
        chosen: str,
        shared_state: dict[str, Any] | None,
        settings: SessionSettings,
        *,
        event_buffer: int,
        parent: tuple[str, str, str] = ("", "", ""),
    ) -> AgentSession:
        """A handle of session ``chosen``, started here if it does not run."""
        while True:
            activation, new = self._activation(agent, chosen, settings)
            # Started, or asked, with the lock let go: sessions opening at
            # once commit at once (one group commit for all).
            if new:
                self._start(
                    activation,
                    functools.partial(
                        self._starts.start,
                        agent,
                        chosen,
                        shared_state,
                        settings,
                        parent=parent,
                    ),
                )
                break
            try:
                closed = activation.ask(ClosedQuery()).get(timeout=ASK_TIMEOUT)
            except pykka.ActorDeadError:
                if activation.ended():  # its start failed meanwhile: again
                    continue
                raise
            if closed:
                msg = f"session {chosen!r} was closed"
                raise SessionClosedError(msg)
            break
        handle = AgentSession(
            chosen,
            activation,
            event_buffer,
            self.closed,
            stopped_by=self._refusal,
            check_deps=agent.check_deps,
            recorded_answer=self._recorded_answer,
            children=self._live_children,
        )
        if shared_state and not new:
            handle.update_shared_state(**shared_state)
        return handle

    def open_child(
        self, agent: Agent, child_id: str, parent: str, call_id: str
    ) -> AgentSession:
        """Opens the child session ``child_id`` of ``parent``'s call ``call_id``.

        The child runs with the parent's settings (its approvals reach
        whoever answers the parent's).
        """
        self.check_open()
        defaults = self._defaults
        host = self.get(parent)
        settings = host.settings if host is not None else None
        stored = self._store.get_session(parent)
        root = (stored.root_session or parent) if stored is not None else parent
        if settings is None:
            settings = SessionSettings(
                approval_policy=defaults.approval_policy,
                approval_provider=defaults.approval_provider,
                approval_timeout=defaults.approval_timeout,
                idle_timeout=defaults.idle_timeout,
            )
        return self.open(
            agent,
            child_id,
            None,
            settings,
            event_buffer=defaults.event_buffer,
            parent=(parent, call_id, root),
        )

    def _activation(
        self, agent: Agent, chosen: str, settings: SessionSettings
    ) -> tuple[Activation, bool]:
        """The session's activation here, and whether it is new (reserved
        for the caller to start: see Activation.reserve)."""
        with self._lock:
            self.check_open()
            activation = self._sessions.get(chosen)
            new = activation is None or activation.ended()
            if activation is None or new:
                activation = Activation(
                    chosen,
                    agent,
                    settings,
                    revive=self._revive,
                    release=self._release,
                    passivated=self._changed,
                )
                activation.reserve()
                self._sessions[chosen] = activation
            elif activation.digest != agent.digest():
                msg = f"session {chosen!r} is already open here with another agent"
                raise UsageError(msg)
            elif settings.deps.value is not None:  # new deps replace the old
                activation.settings.deps.value = settings.deps.value
            self._agents[id(agent)] = agent
            if agent.mcp_servers:
                self._agents_with_servers[id(agent)] = agent
            return activation, new

    def _start(self, activation: Activation, starter: Starter) -> None:
        """Starts a reserved activation's first actor; if it cannot, the
        activation is forgotten (nothing of it was recorded)."""
        try:
            activation.start(starter)
        except BaseException:
            with self._lock:
                if self._sessions.get(activation.session_id) is activation:
                    del self._sessions[activation.session_id]
            raise

    def lease_lost(self, session_id: str, error: LeaseLostError) -> None:
        """Stops a session whose lease another process took over."""
        live = self.get(session_id)
        if live is not None:
            live.tell_if_live(LeaseLost(error))

    def _activations(self) -> list[Activation]:
        with self._lock:
            return list(self._sessions.values())

    def close(self) -> list[Activation] | None:
        """Marks the runtime closed; the activations to close (None if it
        was closed already)."""
        with self._lock:
            if self.closed.is_set():
                return None
            self.closed.set()
            return list(self._sessions.values())

    def close_providers(self) -> None:
        """Closes HTTP providers while the I/O loop they live on still runs."""
        seen: set[int] = set()
        for agent in self._agents.values():
            for provider in agent.router.routes.values():
                closer = getattr(provider, "close", None)
                if id(provider) in seen or not callable(closer):
                    continue
                seen.add(id(provider))
                try:
                    closer()
                except (
                    Exception
                ):  # a provider that will not close must not stop close()
                    logger.warning("could not close %r", provider, exc_info=True)

    def close_mcp_servers(self) -> None:
        """Stops the MCP servers of the agents this runtime ran."""
        seen: set[int] = set()
        for agent in self._agents_with_servers.values():
            for server in agent.mcp_servers:
                if id(server) in seen:
                    continue
                seen.add(id(server))
                try:
                    server.close()
                except Exception:  # one server that will not stop must not stop close()
                    logger.warning("could not stop %r", server, exc_info=True)
