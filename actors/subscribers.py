"""Bounded per-subscriber buffers.

A slow subscriber must not stall its session: the session never waits to
deliver. When a buffer is full, the oldest buffered events are dropped for
that subscriber only, and an ``EventsMissed`` item takes their place: the
reader learns how many it missed at the point of the gap, as soon as it
reads there. Terminal events are never dropped (``RunFinished``, and the
ends of turns and of the session), so a reader that falls behind still
learns how each run ended. They are few (a handful per run), so they may
take a buffer past its size rather than be lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable

from turnlog.domain.errors import TurnlogError
from turnlog.domain.protocol import SessionClosedMsg, TurnAbortedMsg, TurnCompletedMsg
from turnlog.domain.run import EventsMissed, RunEvent, RunFinished, SessionEvent

DEFAULT_BUFFER = 10_000

_TERMINAL_MESSAGES = (TurnCompletedMsg, TurnAbortedMsg, SessionClosedMsg)


def is_terminal(item: SessionEvent) -> bool:
    """Whether ``item`` ends a run, a turn or the session (never dropped)."""
    if isinstance(item, RunFinished):
        return True
    return isinstance(item, RunEvent) and isinstance(item.event.msg, _TERMINAL_MESSAGES)


_Waiting = tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]
"""An asyncio reader waiting: its loop, and the future it awaits there."""


class SubscriptionClosed(Exception):
    """The subscription ended (the session or the subscription was closed)."""


class _Gap:
    """Where dropped events were, and how many (an EventsMissed once read)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class Subscriber:
    """A buffer the session offers events to, and a reader takes them from."""

    def __init__(
        self,
        session_id: str,
        maxsize: int = DEFAULT_BUFFER,
        accept: Callable[[SessionEvent], bool] | None = None,
    ) -> None:
        self.session_id = session_id
        self.maxsize = maxsize
        self._accept = accept
        self._items: deque[SessionEvent | _Gap] = deque()  # events and gaps, in order
        self._events = 0  # buffered events, markers not counted
        self._closed = False
        self._failure: TurnlogError | None = None
        self._ready = threading.Condition()
        # asyncio readers waiting (get_async), each on its own loop: woken
        # there by the next offer or the close, holding no thread meanwhile.
        self._waking: list[_Waiting] = []

    def offer(self, item: SessionEvent) -> None:
        """Adds ``item`` without ever blocking; drops the oldest if full."""
        if self._accept is not None and not self._accept(item):
            return
        with self._ready:
            if self._closed:
                return
            if self._events >= self.maxsize:
                self._drop_oldest()
            self._items.append(item)
            self._events += 1
            self._ready.notify()
            waking = self._waking  # taken here, not in a method: every event
            if waking:
                self._waking = []
        if waking:
            _wake(waking)

    def _drop_oldest(self) -> None:
        """Replaces the oldest droppable event with (or adds it to) a gap."""
        index = next(
            (
                i
                for i, item in enumerate(self._items)
                if not isinstance(item, _Gap) and not is_terminal(item)
            ),
            None,
        )
        if index is None:
            return  # only terminal events are buffered: keep them all
        del self._items[index]
        self._events -= 1
        before = self._items[index - 1] if index > 0 else None
        after = self._items[index] if index < len(self._items) else None
        if isinstance(before, _Gap):
            gap = before
            if isinstance(after, _Gap):  # two gaps met: one gap
                gap.count += after.count
                del self._items[index]
        elif isinstance(after, _Gap):
            gap = after
        else:
            gap = _Gap()
            self._items.insert(index, gap)
        gap.count += 1

    def _take(self) -> SessionEvent:
        item = self._items.popleft()
        if isinstance(item, _Gap):
            return EventsMissed(self.session_id, item.count)
        self._events -= 1
        return item

    def get(self, timeout: float | None = None) -> SessionEvent:
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
                return self._take()
            raise self._ended()

    async def get_async(self) -> SessionEvent:
        """The next item, waited for on the calling event loop; raises as
        ``get`` does once the subscription has ended.

        No thread waits meanwhile: a thread each (``run_in_executor``) held
        the loop's default executor, whose few threads (``os.cpu_count()``
        + 4) a handful of idle subscriptions took, leaving later readers,
        and the caller's own ``asyncio.to_thread``, waiting behind them.
        """
        loop = asyncio.get_running_loop()
        while True:
            with self._ready:
                if self._items:
                    return self._take()
                if self._closed:
                    raise self._ended()
                woken: asyncio.Future[None] = loop.create_future()
                self._waking.append((loop, woken))
            try:
                await woken
            except asyncio.CancelledError:
                with self._ready:  # no longer waiting: nothing to wake
                    self._waking = [w for w in self._waking if w[1] is not woken]
                raise

    def _ended(self) -> Exception:
        """What a reader gets once the buffered items are read."""
        if self._failure is not None:
            # A fresh error per reader: one instance raised in several
            # threads would pile their tracebacks onto each other.
            return type(self._failure)(*self._failure.args)
        return SubscriptionClosed(self.session_id)

    def drain(self) -> list[SessionEvent]:
        """Every item buffered now, without waiting."""
        with self._ready:
            return [self._take() for _ in range(len(self._items))]

    def close(self, failure: TurnlogError | None = None) -> None:
        """Ends the subscription; buffered items can still be read.

        ``failure``, if given, is what readers get after those items.
        """
        with self._ready:
            if not self._closed:
                self._failure = failure
            self._closed = True
            self._ready.notify_all()
            waking = self._waking
            if waking:
                self._waking = []
        if waking:
            _wake(waking)

    def end_with(self, item: SessionEvent) -> None:
        """Delivers ``item`` as the last event, then ends the subscription.

        For a subscriber that comes after its session closed: it is told
        at once (``item`` is the closed event), and its iteration ends.
        """
        self.offer(item)
        self.close()

    @property
    def closed(self) -> bool:
        """Whether the subscription was closed."""
        return self._closed


def _wake(waking: list[_Waiting]) -> None:
    """Wakes each waiting asyncio reader on its own loop."""
    for loop, woken in waking:
        with contextlib.suppress(RuntimeError):  # its loop closed: nobody reads
            loop.call_soon_threadsafe(_done, woken)


def _done(woken: asyncio.Future[None]) -> None:
    if not woken.done():  # the reader may have been cancelled meanwhile
        woken.set_result(None)
