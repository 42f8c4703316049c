"""Which session an AG-UI run's ``threadId`` names; a new one on first use.

AG-UI clients make their own thread ids (``@ag-ui/client``'s
``HttpAgent`` a UUID, ``ag-ui-validate`` ``thread_`` and hex digits) and
expect the agent to take them. So the thread id is the session id, and:

- an id that is not a thread id (1 to 200 of the letters, digits and
  ``-._:~``: no spaces, slashes or other characters a URL path would
  have to escape, since the session is then reached at
  ``/sessions/{id}``) is a 422 naming ``$.threadId``;
- the tenant's own session is that session;
- an id the tenant has never used starts a new session of that tenant
  under it, running the agent ``forwardedProps.agent`` names, or the
  service's default agent (none named and no default: a 422 naming
  ``$.forwardedProps.agent``);
- another tenant's session, or a session of the log that no tenant owns
  (made by the embedded API), is a 404 exactly like every session that
  is not the caller's (:func:`~turnlog.service.context.unknown_session`);
  so is a ``resume`` of an id the tenant never used, which has nothing to
  resume.

Everything in the request is checked before anything is written: a
refused request records nothing. (The agent's own ``user_prompt``
middleware reviews the prompt only once the session exists: a new thread
whose first prompt it refuses is left as a session with no turn.)
Concurrent first runs on one new id, in one process or
several on one PostgreSQL, make one session: the owner's row is claimed
with ``INSERT ... ON CONFLICT DO NOTHING`` and every request goes on with
the claim that won (the other runs then find the session running: 409).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from turnlog.service.context import ServiceContext, unknown_session
from turnlog.service.problems import Problem
from turnlog.service.tenancy import OwnedSession

THREAD_ID = re.compile(r"[A-Za-z0-9._:~-]{1,200}")
"""What a thread id (a session id made by an AG-UI client) may be."""

AGENT_PROP = "agent"
"""The key of ``forwardedProps`` that names the agent of a new thread."""

AGENT_FIELD = f"$.forwardedProps.{AGENT_PROP}"


def check_thread_id(thread_id: str) -> str:
    """``thread_id`` if a session may have it, else a 422 problem."""
    if THREAD_ID.fullmatch(thread_id) is None:
        raise Problem(
            422,
            "threadId must be 1 to 200 letters, digits or '-', '.', '_', ':', '~'",
            field="$.threadId",
        )
    return thread_id


def requested_agent(forwarded_props: Any) -> str | None:
    """The agent ``forwardedProps`` names, if it names one."""
    if not isinstance(forwarded_props, dict) or AGENT_PROP not in forwarded_props:
        return None
    name = forwarded_props[AGENT_PROP]
    if not isinstance(name, str):
        raise Problem(422, "the agent must be named by a string", field=AGENT_FIELD)
    return name


class AguiThreads:
    """Finds, or starts, the session of an AG-UI thread for a tenant."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    async def session_of(
        self, tenant: str, thread_id: str, agent: str | None, *, resuming: bool
    ) -> OwnedSession:
        """The tenant's session ``thread_id``, claimed for it if new.

        Args:
            tenant: the caller's tenant.
            thread_id: the run's ``threadId``.
            agent: the agent ``forwardedProps`` names, if any.
            resuming: the run only resumes (a new thread has nothing to).
        """
        check_thread_id(thread_id)
        known = self.context.owners.known(tenant, thread_id)
        if known is None:  # not known here: ask the database, off the loop
            known = await asyncio.to_thread(
                self._find_or_claim, tenant, thread_id, agent, resuming
            )
        if agent is not None and agent != known.agent:
            raise Problem(
                409,
                f"thread {thread_id!r} runs the agent {known.agent!r}, not {agent!r}",
                field=AGENT_FIELD,
            )
        return known

    def _find_or_claim(
        self, tenant: str, thread_id: str, agent: str | None, resuming: bool
    ) -> OwnedSession:
        owners = self.context.owners
        owned = owners.get(tenant, thread_id)
        if owned is not None:
            return owned
        if resuming:
            raise unknown_session(thread_id)
        if self.context.runtime.store.get_session(thread_id) is not None:
            # In the log but not the tenant's: no tenant's, or another's;
            # unless a concurrent first run of this tenant made it meanwhile.
            owned = owners.get(tenant, thread_id)
            if owned is None:
                raise unknown_session(thread_id)
            return owned
        name = self._agent_of_new_thread(agent)
        owned = owners.claim_unless_taken(thread_id, tenant, name)
        if owned.tenant != tenant:  # another tenant's claim came first
            raise unknown_session(thread_id)
        return owned

    def _agent_of_new_thread(self, agent: str | None) -> str:
        name = agent if agent is not None else self.context.default_agent
        if name is None:
            raise Problem(
                422,
                f"name the agent of a new thread in forwardedProps.{AGENT_PROP}; "
                f"agents: {sorted(self.context.agents)}",
                field=AGENT_FIELD,
            )
        if name not in self.context.agents:
            raise Problem(
                422,
                f"no agent {name!r}; agents: {sorted(self.context.agents)}",
                field=AGENT_FIELD,
            )
        return name


__all__ = [
    "AGENT_PROP",
    "THREAD_ID",
    "AguiThreads",
    "check_thread_id",
    "requested_agent",
]
