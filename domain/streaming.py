"""Streaming text deltas from a provider to the session's subscribers.

Streamed text travels through an explicit channel: the TurnActor passes
each model call an ``on_delta`` callable (a parameter of
``ModelProvider.respond``), and a provider that streams calls it with each
fragment of assistant text as it arrives. The fragments reach
``subscribe()`` as transient ``AgentMessageDeltaMsg`` events; they are never
stored (only the completed step is). A call made outside a turn (a
compaction's summary, a test) gets :func:`discard_deltas`.
"""

from __future__ import annotations

from collections.abc import Callable

DeltaSink = Callable[[str], None]
"""Where a provider sends each fragment of streamed assistant text."""


def discard_deltas(text: str) -> None:
    """A :data:`DeltaSink` that drops every fragment."""
