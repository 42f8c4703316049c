"""The live view follower: one per database, elected, and never silently dead.

Every runtime can fold the log into the views (reads catch up first, for
read-your-writes), but only one process at a time keeps them current in
the background: the holder of the backend's runner lock (a PostgreSQL
advisory lock, released by the server the moment its holder's connection
ends, so a standby takes over within milliseconds of a SIGKILL; on SQLite
every follower holds it). The others wait for the lock on a thread of
their own.

The leader folds whenever the log moves: after saves of this process, and
after other processes' commits (turnlog.store.commits). A store error (a
connection dropped, a pool exhausted, a lock timeout) is logged and
retried with backoff; an entry no view can fold stops the views (every
read then raises the ReplayError naming it), logged as an error.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from turnlog.domain.errors import ReplayError
from turnlog.store.backend import RunnerLock
from turnlog.store.commits import Commit
from turnlog.store.log import Store

logger = logging.getLogger(__name__)

CHECK_INTERVAL = 1.0
"""Seconds between checks that the lock is still held, when nothing moves."""
FIRST_RETRY = 0.1
"""Seconds before the first retry of a failed catch-up."""
RETRY_LIMIT = 5.0
"""The longest pause between retries."""


class FoldedViews(Protocol):
    """What the leader keeps current: the runner (``ProjectionRunner``).

    Declared here, where it is used, so that the runner, which starts its
    leader, is the only one of the two that knows the other.
    """

    @property
    def store(self) -> Store:
        """The log the views fold; its backend holds the runner lock."""
        ...

    def position_folded(self) -> int:
        """The log position every view has folded up to."""
        ...

    def catch_up(self) -> int:
        """Folds what the log holds now; returns the position reached."""
        ...


class ViewLeader:
    """Runs ``runner.catch_up`` in the background while holding the runner lock.

    Args:
        runner: The runner whose views to keep current.
        interval: Seconds to gather new events after each catch-up (views
            commit in batches; on SQLite every commit holds the one write
            lock the sessions need).
    """

    def __init__(self, runner: FoldedViews, interval: float) -> None:
        self.runner = runner
        self.interval = interval
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._hurried = threading.Event()
        """Set once the views are wanted at the head now (the runtime is
        closing, or stopping): no more gathering after a catch-up."""
        self._leading = threading.Event()
        self._thread: threading.Thread | None = None
        self.trouble: Exception | None = None
        """Why the last catch-up failed (None once one succeeds)."""

    def start(self) -> None:
        """Starts the thread that waits for the lock and then follows."""
        # Now, not once elected: the store's watch of the log starts here,
        # on the caller's thread, rather than at some later moment.
        self.runner.store.commits.add_waker(self._woken)
        self._thread = threading.Thread(
            target=self._run, name="turnlog-projections", daemon=True
        )
        self._thread.start()

    def wake(self) -> None:
        """Asks for a catch-up soon (the log moved)."""
        # Called after every save, twice (as the runner's listener and as a
        # commit waker), mostly while the follower gathers with the event
        # already set; setting it again takes its Condition for nothing.
        # Safe to skip: the follower clears it before it reads, so a set
        # seen here is cleared only by a catch-up that sees this commit.
        if not self._wake.is_set():
            self._wake.set()

    def hurry(self) -> None:
        """Asks for catch-ups at once from now on, without gathering.

        For a runtime that closes: its last turns' events are all saved,
        so waiting ``interval`` for more only delays the close.
        """
        self._hurried.set()
        self._wake.set()

    @property
    def leading(self) -> bool:
        """Whether this process keeps the views current now."""
        return self._leading.is_set()

    def wait_leading(self, timeout: float | None = None) -> bool:
        """Waits until this process leads; False if ``timeout`` passed first."""
        return self._leading.wait(timeout)

    def stop(self) -> None:
        """Stops following after the current batch and gives the lock up."""
        self._stopping.set()
        self._hurried.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.runner.store.commits.remove_waker(self._woken)

    def _run(self) -> None:
        lock = self.runner.store.backend.runner_lock()
        try:
            self._elect_and_lead(lock)
        finally:
            lock.release()  # a standby's connection too

    def _elect_and_lead(self, lock: RunnerLock) -> None:
        pause = FIRST_RETRY
        while not self._stopping.is_set():
            try:
                if not lock.acquire(self._stopping):
                    return
            except Exception:
                logger.warning(
                    "could not wait for the view runner lock; retrying in %.1f s",
                    pause,
                    exc_info=True,
                )
                lock.release()
                self._stopping.wait(pause)
                pause = min(pause * 2, RETRY_LIMIT)
                continue
            pause = FIRST_RETRY
            logger.info("this process now keeps the views current")
            self._leading.set()
            try:
                if not self._lead(lock):
                    return
            finally:
                self._leading.clear()
                lock.release()

    def _lead(self, lock: RunnerLock) -> bool:
        """Follows the log until stopped (False) or the lock is lost (True)."""
        pause = FIRST_RETRY
        self._wake.set()  # what the previous leader left undone
        while not self._stopping.is_set():
            self._wake.wait(CHECK_INTERVAL)
            self._wake.clear()
            if self._stopping.is_set():
                break
            if not lock.held():
                logger.warning("lost the view runner lock; standing by")
                return True
            try:
                before = self.runner.position_folded()
                moved = self.runner.catch_up() != before
            except ReplayError:
                logger.exception("the views stopped at an entry they cannot fold")
                return False
            except Exception as error:
                self.trouble = error
                logger.warning(
                    "could not bring the views up to date; retrying in %.1f s",
                    pause,
                    exc_info=True,
                )
                self._stopping.wait(pause)
                pause = min(pause * 2, RETRY_LIMIT)
                self._wake.set()
                continue
            pause, self.trouble = FIRST_RETRY, None
            if moved:
                self._hurried.wait(self.interval)
        return False

    def _woken(self, _: Commit) -> None:
        self.wake()
