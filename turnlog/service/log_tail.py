"""When to look at the log again: the tail of a session's event stream.

A stream reads a session's events from the log by position; between reads
it waits on a :class:`CommitSignal`, which says that the session may have
new events. :class:`LocalCommitSignal` carries the store's one follower of
the log (``Store.commits``, see turnlog.store.commits) onto the server's
event loop: a commit of this process wakes the readers of the sessions it
saved, and another process's commit (heard through PostgreSQL's
LISTEN/NOTIFY, or found by the watch's poll on SQLite) wakes every
reader. Only a reader's wake-up depends on the signal, never what it
reads, so a signal that wakes too often costs a query, and one that wakes
late costs latency, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Protocol

from turnlog.store.commits import Commit
from turnlog.store.log import Store


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

    def forget(self, session_id: str) -> None:
        """Stops watching the session: its last reader went away."""
        ...

    def watched(self) -> int:
        """How many sessions it watches now."""
        ...

    def close(self) -> None:
        """Stops watching; waiters return."""
        ...


class LocalCommitSignal:
    """The store's commit watch, waking a session's readers on an event loop.

    Args:
        store: the log whose commits wake the readers.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakes: dict[str, asyncio.Event] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _heard(self, commit: Commit) -> None:
        """The watch's waker (any thread): wake the sessions' readers."""
        with self._lock:
            loop = self._loop
        if loop is not None:
            # The loop may have closed under us (a server shut down while
            # its runtime goes on): a save must never fail for that.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake, commit.sessions)

    def _wake(self, sessions: frozenset[str] | None) -> None:
        for session_id, event in self._wakes.items():
            if sessions is None or session_id in sessions:
                event.set()

    def watch(self, session_id: str) -> None:
        """Starts watching the session (see CommitSignal)."""
        if self._loop is None and not self._closed:
            with self._lock:
                self._loop = asyncio.get_running_loop()
            # Starts the watch: commits from here on wake this session.
            self._store.commits.add_waker(self._heard)
        self._wakes.setdefault(session_id, asyncio.Event())

    async def wait(self, session_id: str) -> None:
        """Returns when the session may have new events (see CommitSignal)."""
        self.watch(session_id)
        event = self._wakes[session_id]
        if not self._closed:
            await event.wait()
        event.clear()

    def forget(self, session_id: str) -> None:
        """Drops the wake-up of a session nobody reads any more."""
        self._wakes.pop(session_id, None)

    def watched(self) -> int:
        """How many sessions have a wake-up now."""
        return len(self._wakes)

    def close(self) -> None:
        """Stops waking readers; waiters return."""
        self._closed = True
        with self._lock:
            self._loop = None
        self._wake(None)
        self._store.commits.remove_waker(self._heard)


__all__ = ["CommitSignal", "LocalCommitSignal"]
