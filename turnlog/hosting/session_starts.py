"""Starting a session's actor: a new session, one opened from the log, one revived.

The Runtime's table of sessions (session_table.py) decides which session
to start and when; this is how: the lease claimed or taken, the Session
created or read from the log, a turn a crash cut off settled, and the
SessionActor started on it. Both ways run on the thread that opens the
session, outside the table's lock, so that sessions opening at once
share commits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pykka

from turnlog.actors.activation import Activation
from turnlog.actors.agent_in_charge import agent_in_charge_of
from turnlog.actors.background_jobs import recover_jobs
from turnlog.actors.revive import load_turn, recover_turn
from turnlog.actors.session_actor import SessionActor, SessionServices, SessionSettings
from turnlog.agent import Agent, session_agent
from turnlog.domain.errors import SessionClosedError, UsageError
from turnlog.domain.ids import session_uuid
from turnlog.domain.session import Session
from turnlog.hosting.children import ChildSessions
from turnlog.store.log import Store
from turnlog.store.ownership import SessionOwnership


class SessionStarts:
    """Starts the actors of a runtime's sessions (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        services: SessionServices,
        ownership: SessionOwnership,
        children: ChildSessions,
        check_open: Callable[[], None],
    ) -> None:
        self._services = services
        self.store = store
        self.ownership = ownership
        self._children = children
        self._check_open = check_open

    def start(
        self,
        agent: Agent,
        session_id: str,
        shared_state: dict[str, Any] | None,
        settings: SessionSettings,
        host: Activation,
        *,
        parent: tuple[str, str, str] = ("", "", ""),
    ) -> pykka.ActorRef[Any]:
        # MCP tool lists are read before anything is taken or written: a
        # server that does not start leaves no trace of the session.
        # With its handoff graph resolved, and its agent tools bound here.
        agent = session_agent(agent, self._children)
        new_session = functools.partial(
            Session.create,
            session_id,
            agent_name=agent.name,
            agent_digest=agent.digest(),
            shared_state={"todo_list": [], **(shared_state or {})},
            model_route=agent.model_route,
            parent_session=parent[0],
            parent_call=parent[1],
            root_session=parent[2],
        )
        # A session new to the log is saved with its lease, in one commit,
        # and the log is not read first: a new session, the common case,
        # costs one round trip. Where the log holds the session or a lease
        # on it, that save clashes and records nothing; the lease is then
        # taken first and the session read from the log.
        created = new_session()
        claimed = self.ownership.claim_new(
            session_id, lambda claim: self.store.save(created, claim=claim)
        )
        if not claimed:
            self.ownership.acquire(session_id)
        session = created if claimed else self.store.get_session(session_id)
        if session is None:  # only a lease row was there (expired, or left)
            session = new_session()
            self.store.save(session)
        elif not claimed:
            if session.closed:
                msg = f"session {session_id!r} was closed"
                raise SessionClosedError(msg)
            if parent[0] and session.parent_session != parent[0]:
                msg = f"session {session_id!r} is not a child of {parent[0]!r}"
                raise UsageError(msg)
            # The session's route must exist here, or its next turn would fail.
            try:
                in_charge = agent_in_charge_of(agent, session)
            except UsageError:  # nothing was written: the lease goes back
                self.ownership.release(session_id)
                raise
            in_charge.provider_for(session.model_route)
            idempotent = frozenset(
                tool.name
                for tool in in_charge.tools_by_name.values()
                if tool.idempotent
            )
            recover_turn(
                self.store, session, load_turn(self.store, session), idempotent
            )
            recover_jobs(self.store, session, in_charge.tools_by_name)
            if shared_state:
                session.update_shared_state(shared_state)
                self.store.save(session)
        ref: pykka.ActorRef[Any] = SessionActor.start(
            services=self._services,
            agent=agent,
            session=session,
            settings=settings,
            host=host,
        )
        return ref

    def revive(self, activation: Activation) -> pykka.ActorRef[Any]:
        """Starts the actor of a session that passivated, under a new lease.

        Not a crash: the log holds nothing to settle. Raises
        SessionBusyError if another process took the session meanwhile.
        """
        self._check_open()
        session_id = activation.session_id
        self.ownership.acquire(session_id)
        try:
            session = _stored_session(self.store, session_id)
            ref: pykka.ActorRef[Any] = SessionActor.start(
                services=self._services,
                agent=_bound(activation.agent, self._children),
                session=session,
                settings=activation.settings,
                host=activation,
            )
        except BaseException:
            self.ownership.release(session_id)
            raise
        return ref


def _stored_session(store: Store, session_id: str) -> Session:
    session: Session | None = store.get(session_uuid(session_id))
    if session is None:  # removed from the log behind our back: nothing to revive
        msg = f"session {session_id!r} is no longer in the log"
        raise SessionClosedError(msg)
    return session


def _bound(agent: Any, children: ChildSessions) -> Any:
    """The agent a revived actor runs: its agent tools bound to ``children``."""
    return agent.with_child_runner(children) if isinstance(agent, Agent) else agent
