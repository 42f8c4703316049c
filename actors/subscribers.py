"""Bounded per-subscriber buffers.

A slow subscriber must not stall its session: the session never waits to
deliver. When a buffer is full, events are dropped for that subscriber only
and it is told how many it missed (an ``EventsMissed`` item) as soon as
there is room again.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from turnlog.domain.errors import TurnlogError
from turnlog.domain.run import EventsMissed

DEFAULT_BUFFER = 10_000


class SubscriptionClosed(Exception):
    """The subscription ended (the session or the subscription was closed)."""


class Subscriber:
    """A buffer the session offers events to, and a reader takes them from."""

    def __init__(
        self,
        session_id: str,
        maxsize: int = DEFAULT_BUFFER,
        accept: Callable[[Any], bool] | None = None,
    ) -> None:
        self.session_id = session_id
        self.maxsize = maxsize
        self._accept = accept
        self._items: deque[Any] = deque()
        self._missed = 0
        self._closed = False
        self._failure: TurnlogError | None = None
        self._ready = threading.Condition()

    def offer(self, item: Any) -> None:
        """Adds ``item`` without ever blocking; drops it if the buffer is full."""
        if self._accept is not None and not self._accept(item):
            return
        with self._ready:
            if self._closed:
                return
            if len(self._items) >= self.maxsize:
                self._missed += 1
                return
            if self._missed:
                self._items.append(EventsMissed(self.session_id, self._missed))
                self._missed = 0
            self._items.append(item)
            self._ready.notify()

    def get(self, timeout: float | None = None) -> Any:
        """The next item; raises TimeoutError or SubscriptionClosed.

        A subscription ended by a failure raises that failure instead, once
        the buffered items are read: a reader must not take a crash for an
        orderly close.
        """
        with self._ready:
            if not self._ready.wait_for(
                lambda: self._items or self._closed, timeout=timeout
            ):
                msg = f"no event within {timeout} s"
                raise TimeoutError(msg)
            if self._items:
                return self._items.popleft()
            if self._failure is not None:
                # A fresh error per reader: one instance raised in several
                # threads would pile their tracebacks onto each other.
                raise type(self._failure)(*self._failure.args)
            raise SubscriptionClosed(self.session_id)

    def drain(self) -> list[Any]:
        """Every item buffered now, without waiting."""
        with self._ready:
            items = list(self._items)
            self._items.clear()
            return items

    def close(self, failure: TurnlogError | None = None) -> None:
        """Ends the subscription; buffered items can still be read.

        ``failure``, if given, is what readers get after those items.
        """
        with self._ready:
            if not self._closed:
                self._failure = failure
            self._closed = True
            self._ready.notify_all()

    @property
    def closed(self) -> bool:
        """Whether the subscription was closed."""
        return self._closed
