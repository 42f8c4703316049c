"""Passing a session's streamed deltas to the service's open streams.

Deltas are not in the log: the SSE stream gets them live from a
subscription to the session. One pump a session reads that subscription
and hands each delta to the streams' feeds, and only while a stream of
the session is open: a pump is woken for every event of every run, which
a session nobody watches should not pay for.

A pump is a task on the service's event loop, reading the subscription
with ``async for``, which holds no thread while it waits (the session's
actor offers each item straight to the loop). Until the fifteenth pass of
issue 24 it was a thread a streamed session, which then handed each delta
to the loop: a thread and a hand-over more for every delta, and threads
that grew with the sessions being watched.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

from turnlog.domain.errors import TurnlogError
from turnlog.domain.protocol import Event
from turnlog.domain.run import RunEvent
from turnlog.session import AgentSession, Subscription

logger = logging.getLogger(__name__)


class Pump(NamedTuple):
    """A running pump: the handle it reads, its subscription, its task's end."""

    session: AgentSession
    subscription: Subscription
    done: concurrent.futures.Future[None]
    """Done when the pump has ended (its subscription did, or it was stopped)."""


class DeltaPumps:
    """The pumps of one service: at most one a session, while streams read it.

    Args:
        find: the service's open handle of a session, if it has one.
        publish: hands a delta to the session's open streams (on the loop).
        loop: the service's event loop, once it is known.
    """

    def __init__(
        self,
        find: Callable[[str], AgentSession | None],
        publish: Callable[[Event], None],
        loop: Callable[[], asyncio.AbstractEventLoop | None],
    ) -> None:
        self._find = find
        self._publish = publish
        self._loop = loop
        self._lock = threading.Lock()
        self._readers: collections.Counter[str] = collections.Counter()
        self._pumps: dict[str, Pump] = {}
        self._starting: set[str] = set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._pumps)

    def running(self, session_id: str) -> Pump | None:
        """The session's pump, if one runs."""
        with self._lock:
            return self._pumps.get(session_id)

    def follow(self, session_id: str) -> None:
        """A stream of the session opened: it wants the session's deltas.

        Only counts (never blocks); ``start``, off the loop, then starts the
        pump if none runs. Each call needs one ``unfollow``.
        """
        with self._lock:
            self._readers[session_id] += 1

    def unfollow(self, session_id: str) -> None:
        """A stream of the session closed; the last one stops the pump."""
        with self._lock:
            self._readers[session_id] -= 1
            if self._readers[session_id] > 0:
                return
            del self._readers[session_id]
            pump = self._pumps.pop(session_id, None)
        if pump is not None:
            pump.subscription.close()  # its task ends at its next read

    def forget_stale(self, session: AgentSession) -> None:
        """``session`` is the service's handle of its session now.

        A pump of an earlier handle of the session, which ended, reads a
        subscription that ended with it: the new handle needs its own. (A
        pump holds its handle: while it runs, the session is found, and a
        new handle means that one ended.)
        """
        with self._lock:
            stale = self._pumps.get(session.session_id)
            if stale is None or stale.session is session:
                return
            del self._pumps[session.session_id]
        stale.subscription.close()

    def start(self, session_id: str) -> None:
        """Starts the session's pump, if streams want its deltas, the session
        is open here and no pump runs (blocking: subscribing asks the
        session's actor, so call it off the loop)."""
        session = self._find(session_id)
        with self._lock:
            if (
                session is None
                or not self._readers[session_id]
                or session_id in self._pumps
                or session_id in self._starting
            ):
                return
            self._starting.add(session_id)
        subscription: Subscription | None = None
        try:
            if session.reachable():
                subscription = session.subscribe()
        except TurnlogError:  # it closed meanwhile: streams read the log alone
            logger.debug("no deltas of %s: its session ended", session_id)
        finally:
            with self._lock:
                self._starting.discard(session_id)
                started = self._run(session, subscription)
        if subscription is not None and not started:
            # The last stream closed while this subscribed, or the loop is
            # gone: nobody is left to hand the deltas to.
            subscription.close()

    def _run(self, session: AgentSession, subscription: Subscription | None) -> bool:
        """Schedules the pump's task on the loop, if it is wanted (the lock
        held, so an ``unfollow`` either comes before it or closes it)."""
        loop = self._loop()
        if (
            subscription is None
            or loop is None
            or not self._readers[session.session_id]
        ):
            return False
        coroutine = self._pump(session.session_id, subscription)
        try:
            # The returned future holds the task (the loop holds its tasks
            # weakly) and tells whoever waits on it when the pump ended.
            done = asyncio.run_coroutine_threadsafe(coroutine, loop)
        except RuntimeError:  # the loop has closed
            coroutine.close()
            return False
        self._pumps[session.session_id] = Pump(session, subscription, done)
        return True

    async def _pump(self, session_id: str, subscription: Subscription) -> None:
        publish = self._publish
        try:
            async for item in subscription:
                if isinstance(item, RunEvent) and item.event.transient:
                    publish(item.event)
        except TurnlogError:  # the session failed: its streams read the log
            logger.debug("deltas of %s ended with its session", session_id)
        except Exception:  # a bug here: said, as a thread's would be
            logger.exception("the delta pump of %s failed", session_id)
        finally:
            with self._lock:  # the session ended here: a reopened one pumps anew
                pump = self._pumps.get(session_id)
                if pump is not None and pump.subscription is subscription:
                    del self._pumps[session_id]
            # Nobody reads it now: the session stops offering to it.
            subscription.close()

    def close(self) -> None:
        """Stops every pump (each task ends at its next read)."""
        with self._lock:
            pumps = list(self._pumps.values())
            self._pumps.clear()
            self._readers.clear()
        for pump in pumps:
            pump.subscription.close()


__all__ = ["DeltaPumps", "Pump"]
