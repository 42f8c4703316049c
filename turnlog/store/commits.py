"""Knowing that the log moved: the one follower of the log's commits.

Everything that follows the log live (a session follower, the view
runner's leader, the service's SSE tails) reads by position; it waits on
this store's :class:`CommitWatch` only to know when to read again, so a
spurious wake-up costs a query and never an event.

The watch hears of commits two ways:

- Saves made in this process tell it directly (it is a Store listener),
  naming the sessions they saved, so a reader of one session is not woken
  by another's; an import (``Store.insert_stored``) tells it too, naming
  none.
- Other processes' commits reach it through the backend: PostgreSQL's
  recorder NOTIFYs a channel in every insert's transaction, delivered
  after the commit to one listening connection per store, which passes
  on only the NOTIFYs of other stores' inserts. SQLite has no
  such channel, so there (and on PostgreSQL while the listening
  connection is being re-established) the watch looks at the log's newest
  position every ``POLL_INTERVAL``. Growth that this process's saves do
  not account for is announced as another process's commit, of sessions
  unknown.

Only the watch polls, once per store, however many readers follow.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

import msgspec
from eventsourcing.persistence import Recording

logger = logging.getLogger(__name__)

POLL_INTERVAL = 0.25
"""Seconds between looks at the log's newest position, where the backend
cannot tell of other processes' commits (SQLite, or a lost listener)."""
LOCAL_LIMIT = 10_000
"""Positions of this process's commits kept between two looks at most."""
RETRY_LIMIT = 5.0
"""The longest pause between attempts to re-establish the listener."""


class Commit(msgspec.Struct, frozen=True):
    """What a waker is told of a commit."""

    sessions: frozenset[str] | None
    """The sessions it saved; None for another process's (not known which)."""


Waker = Callable[[Commit], None]
"""Called on every commit noted, on the thread that noted it."""


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

    It starts listening (and, where it must, polling) when first asked to
    wait or to wake someone: a runtime that never follows the log opens no
    extra connection.

    Args:
        backend: What hears of other processes' commits.
        newest_position: The position of the log's newest entry.
    """

    def __init__(
        self, backend: CommitListener, newest_position: Callable[[], int]
    ) -> None:
        self._backend = backend
        self._newest_position = newest_position
        self._count = 0
        self._condition = threading.Condition()
        # Replaced, never changed in place, so that a commit reads it
        # without copying it.
        self._wakers: tuple[Waker, ...] = ()
        # Threads in wait(): only they need notifying (after every save).
        self._waiting = 0
        self._listening = False
        self._stopping = threading.Event()
        self._look_now = threading.Event()
        self._started = False
        self._start_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # What the log's newest position was at the last look, and the
        # positions this process committed since: growth past it that they
        # do not account for is another process's.
        self._seen: int | None = None
        self._local: set[int] = set()

    # -- noting commits -----------------------------------------------------

    def bump(self, recordings: Sequence[Recording[uuid.UUID]] = ()) -> None:
        """Notes commits of this process (the Store calls it after saves)."""
        # One loop, not a comprehension for each (each is a Python call in
        # 3.11): every save of every session passes here.
        sessions: set[str] = set()
        positions: list[int] = []
        started = self._started
        for recording in recordings:
            sessions.add(str(getattr(recording.domain_event, "session_id", "")))
            if started:
                positions.append(recording.notification.id)
        if self._announce(Commit(frozenset(sessions)), positions) > LOCAL_LIMIT:
            # Only a look forgets them, and where a listener hears other
            # processes' commits none may come for hours: one now.
            self._look_now.set()

    def bump_unnamed(self) -> None:
        """Notes a commit of this process that names no session (an import)."""
        self._announce(Commit(None))

    def _announce(self, commit: Commit, positions: Sequence[int] = ()) -> int:
        """Wakes readers and wakers; returns how many of this process's
        commit positions are kept until the next look."""
        # The condition's own lock methods (C), not its ``with`` (Python),
        # on this path of every save.
        self._condition.acquire()
        try:
            self._local.update(positions)
            kept = len(self._local)
            self._count += 1
            wakers = self._wakers
            if self._waiting:
                self._condition.notify_all()
        finally:
            self._condition.release()
        for waker in wakers:
            waker(commit)
        return kept

    def _look(self) -> None:
        """Announces growth of the log that this process's saves did not make."""
        newest = self._newest_position()
        with self._condition:
            previous, self._seen = self._seen, max(newest, self._seen or 0)
            if previous is None:
                foreign = True  # nothing to compare with: assume the worst
            else:
                ours = len([p for p in self._local if previous < p <= newest])
                foreign = newest - previous > ours
                self._local = {p for p in self._local if p > newest}
        if foreign:
            self._announce(Commit(None))

    # -- the readers' side --------------------------------------------------

    def count(self) -> int:
        """Commits seen so far; pass it to :meth:`wait` after reading."""
        self._start()
        with self._condition:
            return self._count

    def wait(self, seen: int, timeout: float | None = None) -> int:
        """Waits until a commit after ``seen`` is noted, or ``timeout`` passes.

        Returns the count now; equal to ``seen`` when it timed out.
        """
        self._start()
        with self._condition:
            self._waiting += 1
            try:
                self._condition.wait_for(lambda: self._count != seen, timeout)
            finally:
                self._waiting -= 1
            return self._count

    def add_waker(self, waker: Waker) -> None:
        """Calls ``waker`` on every commit noted (on the noting thread)."""
        self._start()
        with self._condition:
            self._wakers = (*self._wakers, waker)

    def remove_waker(self, waker: Waker) -> None:
        """Stops calling ``waker``."""
        with self._condition:
            wakers = list(self._wakers)
            if waker in wakers:
                wakers.remove(waker)
                self._wakers = tuple(wakers)

    @property
    def hears_other_processes(self) -> bool:
        """Whether other processes' commits wake it without polling."""
        return self._listening

    # -- listening and looking ----------------------------------------------

    def _start(self) -> None:
        if self._started:
            return
        with self._start_lock:
            if self._started or self._stopping.is_set():
                return
            # The first look, before any reader reads: growth after it is
            # seen, so a commit between a reader's read and its wait is not.
            try:
                self._seen = self._newest_position()
            except Exception:  # the looker tries again, and wakes everyone
                logger.warning(
                    "could not read the log's newest position", exc_info=True
                )
            self._started = True
            for target, name in (
                (self._listen, "turnlog-commits"),
                (self._poll, "turnlog-commits-poll"),
            ):
                thread = threading.Thread(target=target, name=name, daemon=True)
                self._threads.append(thread)
                thread.start()

    def _listen(self) -> None:
        pause = 0.1
        while not self._stopping.is_set():
            try:
                if not self._backend.listen_for_commits(self._heard, self._stopping):
                    self._listening = False
                    return
                pause = 0.1
            except Exception:
                self._listening = False
                self._look_now.set()  # the poller takes over meanwhile
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

    def _heard(self) -> None:
        """The backend heard a commit (or began listening): look now."""
        self._listening = True
        self._look_now.set()

    def _poll(self) -> None:
        """Looks when the listener heard a commit, or every POLL_INTERVAL
        while nothing can hear other processes' commits."""
        while not self._stopping.is_set():
            self._look_now.wait(None if self._listening else POLL_INTERVAL)
            self._look_now.clear()
            if self._stopping.is_set():
                return
            try:
                self._look()
            except Exception:  # a lost connection: look again, slower
                logger.debug("could not look at the log", exc_info=True)
                self._stopping.wait(POLL_INTERVAL)

    def close(self) -> None:
        """Stops listening and looking; waiters return."""
        self._stopping.set()
        self._look_now.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._announce(Commit(None))
