"""Handoffs: which agent is in charge of a session, and the event that changes it.

A handoff is a tool call: an agent with handoffs offers the model one tool
per target (``transfer_to_<name>``, :func:`handoff_tool_name`). When the
model calls one, the turn machine answers the call, records
:class:`AgentHandedOff` on the Session, and the turn's next model step is
made by the target agent (its instructions, tools and model route), seeing
the whole conversation so far. The agent in charge is then the target's,
by name, until another handoff: a session reopened after a restart goes on
with it (:func:`agent_in_charge`).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.events import TurnlogEvent
from turnlog.domain.ids import turn_uuid
from turnlog.domain.model import ToolSpec

HANDOFF_PREFIX = "transfer_to_"
"""Every handoff tool's name starts so; the rest is the target's name."""

_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_TOOL_NAME = 64  # the longest tool name the OpenAI APIs take


class AgentHandedOff(TurnlogEvent):
    """The model handed the conversation to another agent.

    Recorded when the model called a handoff tool; from the turn's next
    model step on, ``to_agent`` is in charge of the session, on its own
    model route.
    """

    turn_id: str
    """The turn whose model step called the handoff."""
    call_id: str
    """The handoff tool call."""
    from_agent: str
    """The agent that was in charge."""
    to_agent: str
    """The agent now in charge."""
    reason: str
    """Why, as the model said in the call's ``reason`` ("" if it gave none)."""
    model_route: str
    """The route ``to_agent`` runs on: the session's route from now on."""

    def apply(self, aggregate: Any) -> None:
        aggregate.handed_to = self.to_agent
        aggregate.model_route = self.model_route


class HandoffTool(msgspec.Struct, frozen=True):
    """One handoff as the model sees it: a call of ``spec`` hands over to
    ``agent``, which runs on ``route``."""

    agent: str
    route: str
    spec: ToolSpec


def handoff_tool_name(agent_name: str) -> str:
    """The name of the tool that hands over to ``agent_name``.

    ``transfer_to_`` and the name, lower-cased, with every character a
    tool name may not hold made ``_``: ``"Billing desk"`` gives
    ``transfer_to_billing_desk``.

    Raises:
        InvalidInputError: the name would be longer than a tool name may be.
    """
    name = HANDOFF_PREFIX + _TOOL_NAME.sub("_", agent_name.lower())
    if len(name) > _MAX_TOOL_NAME:
        msg = (
            f"agent name {agent_name!r} is too long to hand off to: its tool "
            f"name would pass {_MAX_TOOL_NAME} characters"
        )
        raise InvalidInputError(msg)
    return name


def handoff_spec(agent_name: str, description: str) -> ToolSpec:
    """The tool spec of a handoff to ``agent_name``."""
    about = description or f"Hand the conversation over to the agent {agent_name}."
    return ToolSpec(
        handoff_tool_name(agent_name),
        about,
        {
            "type": "object",
            "properties": {
                "reason": {
                    "type": "string",
                    "description": "Why the conversation is handed over.",
                }
            },
            "additionalProperties": False,
        },
    )


def agent_in_charge(session: Any) -> str | None:
    """The agent a handoff put in charge of ``session``; None if none did
    (the agent the session is opened with is then in charge)."""
    handed_to: str = getattr(session, "handed_to", "")
    return handed_to or None


def hand_off(
    session: Any,
    *,
    turn_number: int,
    call_id: str,
    from_agent: str,
    target: HandoffTool,
    arguments: str,
) -> None:
    """Records that call ``call_id`` of turn ``turn_number`` handed the
    session (a Session aggregate) over to ``target``."""
    session.trigger_event(
        AgentHandedOff,
        turn_id=str(turn_uuid(session.session_id, turn_number)),
        call_id=call_id,
        from_agent=from_agent,
        to_agent=target.agent,
        reason=handoff_reason(arguments),
        model_route=target.route,
    )


def handoff_reason(arguments: str) -> str:
    """The ``reason`` a handoff call gave, "" if none (or not JSON): a call
    with arguments the model got wrong still hands over."""
    try:
        decoded = msgspec.json.decode(arguments or "{}")
    except msgspec.DecodeError:
        return ""
    reason = decoded.get("reason") if isinstance(decoded, dict) else None
    return reason if isinstance(reason, str) else ""


def handoff_output(to_agent: str) -> str:
    """What the handoff call is answered with: who took over."""
    return msgspec.json.encode({"assistant": to_agent}).decode()


def not_taken_output(to_agent: str) -> str:
    """The answer to a second handoff call in a step: the first one won."""
    return f"not handed off: this step already handed the conversation to {to_agent!r}"
