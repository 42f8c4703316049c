"""Helpers for testing code that embeds turnlog (and for turnlog's own tests).

``HeldModel`` wraps a model so a test can hold a model call open, observe
that it started, and release it: the deterministic way to test what
happens while a turn runs (busy prompts, interrupts, concurrent sessions),
with no sleeps. ``wait_for`` reads a subscription until an event matches.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from turnlog.domain.model import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    respond_streaming,
)
from turnlog.domain.protocol import EventMsg
from turnlog.domain.run import RunEvent, SessionEvent
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.session import Subscription


class HeldModel:
    """A model whose calls wait until released.

    ``entered`` is set when a call arrives. ``release()`` lets every call
    waiting now go on to ``inner``; unless ``hold_all`` is set, later calls
    then pass straight through. ``cancelled`` is set when a held call was
    cancelled (its turn was interrupted).
    """

    def __init__(self, inner: ModelProvider, *, hold_all: bool = False) -> None:
        self.inner = inner
        self.hold_all = hold_all
        self.entered = threading.Event()
        self.cancelled = threading.Event()
        self.calls = 0
        self._lock = threading.Lock()
        self._open = False
        self._held: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def release(self) -> None:
        """Lets the waiting calls (and, unless ``hold_all``, later ones) go on."""
        with self._lock:
            held, self._held = self._held, []
            if not self.hold_all:
                self._open = True
        for loop, gate in held:
            loop.call_soon_threadsafe(gate.set)

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        """Waits for ``release()``, then answers with the inner model."""
        gate = asyncio.Event()
        with self._lock:
            self.calls += 1
            if self._open:
                gate.set()
            else:
                self._held.append((asyncio.get_running_loop(), gate))
        self.entered.set()
        try:
            await gate.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return await respond_streaming(self.inner, request, on_delta)


def wait_for(
    subscription: Subscription,
    predicate: Callable[[SessionEvent | EventMsg], bool],
    timeout: float = 10.0,
) -> tuple[SessionEvent, list[SessionEvent]]:
    """Reads ``subscription`` until an item matches; returns it and all read.

    For ``RunEvent`` items the predicate sees the ``EventMsg`` as well as
    the item: ``wait_for(sub, lambda m: isinstance(m, TurnCompletedMsg))``.
    """
    seen: list[SessionEvent] = []
    while True:
        item = subscription.get(timeout)
        seen.append(item)
        if predicate(item) or (
            isinstance(item, RunEvent) and predicate(item.event.msg)
        ):
            return item, seen
