"""When to look at the log again: the tail of a session's event stream.

A stream reads a session's events from the log by position; between reads
it waits on a :class:`CommitSignal`, which says that the session may have
new events. :class:`LocalCommitSignal` wakes a session's readers at once
for commits made in this process (the store calls it after every save),
and finds commits of other processes on the same database by looking at
the log's newest position: at once when the store hears of a commit
(``Store.commits``: PostgreSQL's LISTEN/NOTIFY), and every
``poll_interval`` seconds where it cannot hear of them (SQLite shared by
processes), or every ``LISTENING_POLL`` seconds as a safety net where it
can. Only a reader's wake-up depends on the signal, never what it reads,
so a signal that wakes too often costs a query, and one that wakes late
costs latency, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from eventsourcing.persistence import PersistenceError

from turnlog.domain.errors import TurnlogError
from turnlog.store.log import Store

POLL_INTERVAL = 0.25
"""Seconds between looks at the log for commits of other processes."""
LISTENING_POLL = 5.0
"""The same, where the store hears of other processes' commits."""


class CommitSignal(Protocol):
    """Wakes readers of a session when its log may have grown."""

    def watch(self, session_id: str) -> None:
        """Starts watching the session (call it before its first read)."""
        ...

    async def wait(self, session_id: str) -> None:
        """Returns once the session may have events not read yet.

        It may return early (spurious wake-ups are allowed); it must not
        miss a commit made after the previous ``wait`` of the same session
        returned (or after ``watch``).
        """
        ...

    def close(self) -> None:
        """Stops watching; waiters return."""
        ...


class LocalCommitSignal:
    """In-process commits at once; other processes' commits by polling.

    Args:
        store: the log; its save listener wakes the sessions saved.
        poll_interval: seconds between looks at the log's newest position.
    """

    def __init__(self, store: Store, poll_interval: float = POLL_INTERVAL) -> None:
        self._store = store
        self.poll_interval = poll_interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakes: dict[str, asyncio.Event] = {}
        self._lock = threading.Lock()
        self._local_max = 0
        """The newest position this process committed (seen by the listener)."""
        self._seen_max: int | None = None
        self._poller: asyncio.Task[None] | None = None
        self._nudge: asyncio.Event | None = None
        self._closed = False
        store.add_listener(self._saved)

    def _saved(self, recordings: Sequence[Any]) -> None:
        """The store's listener (an actor's thread): wake the sessions saved."""
        if not recordings:
            return
        sessions = {
            str(getattr(recording.domain_event, "session_id", ""))
            for recording in recordings
        }
        with self._lock:
            self._local_max = max(
                self._local_max, *(r.notification.id for r in recordings)
            )
            loop = self._loop
        if loop is not None:
            # The loop may have closed under us (a server shut down while
            # its runtime goes on): a save must never fail for that.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake, sessions)

    def _wake(self, sessions: set[str] | None) -> None:
        for session_id, event in self._wakes.items():
            if sessions is None or session_id in sessions:
                event.set()

    def _heard(self) -> None:
        """A commit the store heard of (maybe another process's): look now."""
        with self._lock:
            loop, nudge = self._loop, self._nudge
        if loop is not None and nudge is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed
                loop.call_soon_threadsafe(nudge.set)

    def _start(self) -> None:
        if self._loop is None:
            with self._lock:
                self._loop = asyncio.get_running_loop()
                self._nudge = asyncio.Event()
            self._store.commits.add_waker(self._heard)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        while not self._closed:
            try:
                newest = await asyncio.to_thread(self._store.max_position)
            except (TurnlogError, PersistenceError):  # closed, or a lost connection
                newest = None
            if newest is not None:
                with self._lock:
                    local = self._local_max
                previous, self._seen_max = self._seen_max, newest
                # Growth this process did not commit: another process's.
                if previous is not None and newest > max(previous, local):
                    self._wake(None)
            listening = self._store.commits.hears_other_processes
            interval = LISTENING_POLL if listening else self.poll_interval
            nudge = self._nudge
            assert nudge is not None  # set by _start, before this task
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(nudge.wait(), interval)
            nudge.clear()

    def watch(self, session_id: str) -> None:
        """Starts watching the session (see CommitSignal)."""
        self._start()
        self._wakes.setdefault(session_id, asyncio.Event())

    async def wait(self, session_id: str) -> None:
        """Returns when the session may have new events (see CommitSignal)."""
        self.watch(session_id)
        event = self._wakes[session_id]
        if not self._closed:
            with contextlib.suppress(TimeoutError):
                # A bound, in case a wake-up was lost with a closed loop.
                await asyncio.wait_for(event.wait(), self.poll_interval * 20)
        event.clear()

    def forget(self, session_id: str) -> None:
        """Drops the wake-up of a session nobody reads any more."""
        self._wakes.pop(session_id, None)

    def close(self) -> None:
        """Stops polling; the store's listener stays but does nothing."""
        self._closed = True
        with self._lock:
            self._loop = None
        if self._poller is not None:
            self._poller.cancel()
        self._wake(None)
        self._store.remove_listener(self._saved)
        self._store.commits.remove_waker(self._heard)


__all__ = ["LISTENING_POLL", "POLL_INTERVAL", "CommitSignal", "LocalCommitSignal"]
