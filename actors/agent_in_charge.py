"""Which agent of a session's handoff graph runs it: the one a handoff put
in charge (domain.handoff), else the one the session was opened with."""

from __future__ import annotations

from turnlog.actors.contracts import AgentDefinition
from turnlog.domain.errors import UsageError
from turnlog.domain.handoff import agent_in_charge
from turnlog.domain.session import Session


def agent_in_charge_of(root: AgentDefinition, session: Session) -> AgentDefinition:
    """The agent of ``root``'s handoff graph in charge of ``session``.

    Raises:
        UsageError: a handoff put an agent in charge that the graph has not:
            the session must be opened with an agent whose handoffs reach it.
    """
    name = agent_in_charge(session)
    if name is None or name == root.name:
        return root
    agent = root.handoff_graph().get(name)
    if agent is None:
        msg = (
            f"session {session.session_id!r} was handed off to agent {name!r}, "
            f"which agent {root.name!r} does not reach by handoffs: open it with "
            f"{name!r} or an agent whose handoffs reach it"
        )
        raise UsageError(msg)
    return agent
