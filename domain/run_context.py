"""What instructions, hooks and tools know of the run they serve.

A :class:`RunContext` is built by the session for each use (a model
step's instructions, a hook, a tool call) and handed over; nothing in it
is recorded. ``deps`` are the user's live dependencies (a database
client, say), given to ``Runtime.create_session(deps=...)`` or to one
prompt: they stay in this process, so a session reopened elsewhere gets
them again from its caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Deps = TypeVar("Deps")


@dataclass(frozen=True, kw_only=True)
class RunContext(Generic[Deps]):
    """The run as instructions and hooks see it.

    Attributes:
        session_id: the session's id.
        turn_id: the running turn's id (None for input reviewed before its
            turn starts, as a user_prompt hook sees a queued follow-up).
        agent_name: the name of the agent in charge.
        shared_state: the session's shared state as of this use (read-only;
            a tool changes it with ``ToolContext.update_shared_state``).
        deps: the dependencies given for this run (the prompt's, else the
            session's; None if none were given). Never recorded.
    """

    session_id: str
    turn_id: str | None
    agent_name: str
    shared_state: Mapping[str, Any]
    deps: Deps


InstructionsFunction = Callable[..., str | Awaitable[str]]
"""Gives an agent's instructions for one model step (plain or async): it is
called with one argument, the step's :class:`RunContext`."""
