"""Knowing that the log moved: the wake-up of everything that follows it live.

A reader that follows the log (a view runner, a session follower) reads
by position; a wake-up only tells it to read again, so a spurious one
costs a query and a missed one at most a poll interval, never an event.

Saves made in this process bump the watch directly (a Store listener).
Saves of other processes reach it through the backend: PostgreSQL's
recorder NOTIFYs a channel inside every insert's transaction, which the
server delivers after the commit, and one listening connection per store
bumps the watch for all its followers. SQLite has no such channel, so
there followers also look again every ``POLL_INTERVAL``; on PostgreSQL the
same poll, slower, covers a listening connection that was lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)

POLL_INTERVAL = 0.5
"""Seconds a follower waits before reading again when nothing woke it
and the backend cannot tell it about other processes' commits."""
LISTENING_POLL_INTERVAL = 5.0
"""The same, when a listening connection tells it about every commit."""
RETRY_LIMIT = 5.0
"""The longest pause between attempts to re-establish the listener."""


class CommitListener(Protocol):
    """A backend's way to hear of other processes' commits."""

    def listen_for_commits(
        self, wake: Callable[[], None], stopping: threading.Event
    ) -> bool:
        """Calls ``wake`` after each commit to the log until ``stopping`` is set.

        Returns False at once if the backend has no way to hear of them;
        raises if the connection fails (the caller listens again).
        """
        ...


class CommitWatch:
    """A counter of commits seen, and a way to wait for the next one.

    Args:
        backend: What hears of other processes' commits.
    """

    def __init__(self, backend: CommitListener) -> None:
        self._backend = backend
        self._count = 0
        self._condition = threading.Condition()
        self._wakers: list[Callable[[], None]] = []
        self._listening = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def bump(self, *_: object) -> None:
        """Notes a commit (called after saves here, and by the listener)."""
        with self._condition:
            self._count += 1
            wakers = list(self._wakers)
            self._condition.notify_all()
        for waker in wakers:
            waker()

    def count(self) -> int:
        """Commits seen so far; pass it to :meth:`wait` after reading."""
        self._start()
        with self._condition:
            return self._count

    def wait(self, seen: int, timeout: float | None = None) -> int:
        """Waits until a commit after ``seen`` is noted, or a poll is due.

        Returns the count now; equal to ``seen`` when it timed out.
        """
        self._start()
        poll = LISTENING_POLL_INTERVAL if self._listening else POLL_INTERVAL
        limit = poll if timeout is None else min(timeout, poll)
        with self._condition:
            self._condition.wait_for(lambda: self._count != seen, limit)
            return self._count

    def add_waker(self, waker: Callable[[], None]) -> None:
        """Calls ``waker`` (without arguments) on every commit noted."""
        self._start()
        with self._condition:
            self._wakers.append(waker)

    def remove_waker(self, waker: Callable[[], None]) -> None:
        """Stops calling ``waker``."""
        with self._condition:
            if waker in self._wakers:
                self._wakers.remove(waker)

    @property
    def hears_other_processes(self) -> bool:
        """Whether other processes' commits wake it (not just the poll)."""
        return self._listening

    def _start(self) -> None:
        # Lazily: a runtime that never follows opens no extra connection.
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is not None or self._stopping.is_set():
                return
            self._thread = threading.Thread(
                target=self._listen, name="turnlog-commits", daemon=True
            )
            self._thread.start()

    def _listen(self) -> None:
        pause = 0.1
        while not self._stopping.is_set():
            try:
                self._listening = True
                # Commits made while nobody listened: read again.
                self.bump()
                if not self._backend.listen_for_commits(self.bump, self._stopping):
                    self._listening = False
                    return
                pause = 0.1
            except Exception:
                self._listening = False
                logger.warning(
                    "lost the connection that hears of commits; polling until "
                    "it is back (retrying in %.1f s)",
                    pause,
                    exc_info=True,
                )
                started = time.monotonic()
                self._stopping.wait(pause)
                if time.monotonic() - started >= pause:
                    pause = min(pause * 2, RETRY_LIMIT)

    def close(self) -> None:
        """Stops listening; waiters go on polling until they stop."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.bump()
