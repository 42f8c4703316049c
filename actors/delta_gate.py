"""A running turn's text deltas, published where they arrive: on the I/O loop.

A provider that streams hands each fragment of its answer to the
TurnActor, on the loop. Told to the session, each fragment woke the
session's worker (gone idle while its model ran) only to publish a
message that is never recorded: 40-230 us a fragment on a 2-core VM,
more the further apart they come (``bench/stream_deltas.py``), so an
answer of a few dozen fragments cost several unstreamed turns. The gate
publishes them on the loop instead, and keeps what the session's thread
gave them:

- order: a step's fragments come while its model call runs, after the
  session published what came before the call, and before the loop tells
  it the call's answer, whose events it publishes after them;
- none after its turn's end: the session closes the gate before it
  publishes the turn's end (and when the turn's TurnActor ends), and the
  gate publishes under the lock that closing takes, so a fragment is
  offered before the end, or not at all;
- subscribers that come and go meanwhile: each fragment goes to those the
  session holds when it arrives (a copy of the list, taken at once).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from turnlog.actors.subscribers import Subscriber
from turnlog.domain.protocol import AgentMessageDeltaMsg
from turnlog.domain.run import RunEvent
from turnlog.domain.text import encodable_text
from turnlog.domain.translation import EventTranslator


class Publishing(Protocol):
    """What the gate reads of its session's state (a SessionState)."""

    @property
    def session_id(self) -> str: ...

    @property
    def subscribers(self) -> Sequence[Subscriber]: ...

    @property
    def translator(self) -> EventTranslator: ...


class DeltaGate:
    """Publishes one turn's text deltas to its session's subscribers."""

    __slots__ = ("_lock", "_open", "_state")

    def __init__(self, state: Publishing) -> None:
        self._state = state
        self._lock = threading.Lock()
        self._open = True

    def publish(self, text: str) -> None:
        """Offers ``text`` to every subscriber, unless the turn has ended.

        Called by the provider's delta sink, on the I/O loop. With nobody
        subscribed it does nothing more than look.
        """
        state = self._state
        subscribers = tuple(state.subscribers)
        if not subscribers:
            return
        msg = AgentMessageDeltaMsg(encodable_text(text)[0])
        with self._lock:
            if not self._open:
                return
            event = state.translator.transient(msg, datetime.now(UTC))
            item = RunEvent(state.session_id, event)
            for subscriber in subscribers:
                subscriber.offer(item)

    __call__ = publish
    """The gate is the model's delta sink itself: no bound method made for
    it, one object less for the collector while the session waits."""

    def close(self) -> None:
        """No fragment is published from now on (the turn ended, or is
        about to be published as ended); waits for one being offered."""
        with self._lock:
            self._open = False
