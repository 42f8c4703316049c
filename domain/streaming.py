"""Streaming text deltas from a provider to the session's subscribers.

A provider that streams calls :func:`emit_delta` with each fragment of
assistant text as it arrives. The TurnActor sets the sink around each
model call, so the fragments reach ``subscribe()`` as transient
``AgentMessageDelta`` events; they are never stored (only the completed
step is). Outside a turn, ``emit_delta`` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

_sink: ContextVar[Callable[[str], None] | None] = ContextVar(
    "turnlog_delta_sink", default=None
)


def emit_delta(text: str) -> None:
    """Reports a fragment of the assistant's text (a no-op outside a turn)."""
    sink = _sink.get()
    if sink is not None and text:
        sink(text)


def set_delta_sink(sink: Callable[[str], None] | None) -> object:
    """Sets where fragments go for the current task; returns a reset token."""
    return _sink.set(sink)


def reset_delta_sink(token: object) -> None:
    """Undoes :func:`set_delta_sink`."""
    _sink.reset(token)  # type: ignore[arg-type]
