"""Group commit: the saves of many sessions, committed in one transaction.

Sessions save on their own threads. Without this, each save is its own
transaction: on SQLite every one of them queues for the one write
connection and waits for its own fsync; on PostgreSQL every one takes the
events table's lock, sends its own NOTIFY and commits on its own.

Here a save joins a queue. If no other save is being written, its own
thread becomes the writer at once (a session alone pays nothing extra: no
hand-off, no waiting for a batch to fill). While a writer is committing,
the saves that arrive queue behind it; when its commit is done, it wakes
them, and the first of them writes everything that is queued by then in
one transaction. So under load a batch holds whatever arrived during the
previous commit, and there is one commit, one lock and one fsync for all
of them (LevelDB's write queue and MySQL's group commit work this way).

Each save is told its outcome only after the transaction holding it has
committed or rolled back, so nothing is reported before it is durable.
A save that cannot commit (another writer appended to its aggregate, or
its fence no longer holds) fails alone: the batch is rolled back and
written again with each save on its own (a savepoint each on SQLite, a
transaction each on PostgreSQL), and only the saves that fail there
fail (see :meth:`BatchRecorder.insert_each`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from typing import Protocol

from eventsourcing.persistence import IntegrityError, StoredEvent

from turnlog.domain.errors import LeaseLostError
from turnlog.store.fencing import Claim, Fence

MAX_BATCH = 1000
"""Saves written in one transaction at most; the rest go in the next."""


class PendingSave:
    """One session's save, waiting in the queue for its transaction."""

    __slots__ = ("_wake", "claim", "error", "events", "fence", "ids", "lead")

    def __init__(
        self,
        events: Sequence[StoredEvent],
        fence: Fence | None,
        claim: Claim | None = None,
    ) -> None:
        self.events = events
        self.fence = claim.fence if claim is not None else fence
        self.claim = claim
        """A lease this save takes in its own transaction (``fence`` is its)."""
        self.ids: Sequence[int] | None = None
        """The log positions of ``events`` once committed."""
        self.error: BaseException | None = None
        """Why this save was not recorded (nothing of it is in the log)."""
        self.lead = False
        """Set, with a wake-up, when this save's thread is to write next."""
        # A latch, made only for a save that queues behind a writer (see
        # GroupCommit.save): a save that writes at once, a lone session's
        # every save, never waits. A bare lock, taken here and let go by
        # ``settle``: a threading.Event is a Condition and two locks more,
        # made in Python, and its wait makes yet another lock.
        self._wake: threading.Lock | None = None

    def queue_behind(self) -> None:
        """Readies this save to wait: called before its writer can settle it."""
        wake = threading.Lock()
        wake.acquire()
        self._wake = wake

    def wait(self) -> None:
        """Blocks until this save is settled or its thread is to write."""
        assert self._wake is not None, "queue_behind() first"
        self._wake.acquire()

    def settle(self) -> None:
        """Wakes the thread waiting for this save: its outcome is known.

        Called at most once before each ``wait`` returns: a save woken to
        write is settled again only by itself, after it woke (its latch
        held again by its own wait), when its batch is done.
        """
        if self._wake is not None:
            self._wake.release()


class BatchRecorder(Protocol):
    """What a backend's recorder offers to write a batch (sqlite, postgres)."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Fence | Claim | None
    ) -> Sequence[int] | None:
        """Inserts one save's events in a transaction of its own."""
        ...

    def insert_together(self, saves: Sequence[PendingSave]) -> None:
        """Inserts every save in one transaction and sets each one's ids.

        Raises (and rolls back, recording nothing) if any save fails.
        """
        ...

    def insert_each(self, saves: Sequence[PendingSave]) -> None:
        """Inserts every save on its own: a savepoint or a transaction each.

        A save that conflicts or whose fence fails gets its ``error`` and
        leaves nothing; the others get their ids. Raises only for a failure
        that leaves none of them recorded.
        """
        ...


SAVE_CONFLICTS = (IntegrityError, LeaseLostError)
"""The failures that belong to one save of a batch, not to the whole batch."""


class GroupCommit:
    """The one writer of a store in this process; thread-safe."""

    def __init__(self, recorder: BatchRecorder) -> None:
        self._recorder = recorder
        self._lock = threading.Lock()
        self._queue: deque[PendingSave] = deque()
        self._writing = False
        self._queued = threading.Condition(self._lock)
        self._watching = 0
        self.commits = 0
        """Transactions this writer committed or tried (for tests, benchmarks)."""

    def save(
        self,
        events: Sequence[StoredEvent],
        fence: Fence | None,
        claim: Claim | None = None,
    ) -> Sequence[int] | None:
        """Writes ``events`` with the saves queued beside them; returns their ids.

        With ``claim``, the save also takes that lease (and is fenced by it)
        in the same transaction. Returns once the transaction holding them
        has committed; raises this save's own error (nothing of it
        recorded) if it could not.
        """
        pending = PendingSave(events, fence, claim)
        with self._lock:
            self._queue.append(pending)
            pending.lead = not self._writing
            if not pending.lead:
                pending.queue_behind()
            self._writing = True
            if self._watching:
                self._queued.notify_all()
        if not pending.lead:
            # Until this save's batch is done, or this thread is to write.
            pending.wait()
        if pending.lead:
            self._write()
        if pending.error is not None:
            raise pending.error
        return pending.ids

    def wait_for_queue(self, count: int, timeout: float) -> bool:
        """Waits until ``count`` saves are queued behind the writer (tests).

        Returns False if they were not, ``timeout`` seconds on.
        """
        with self._queued:
            self._watching += 1
            try:
                return self._queued.wait_for(lambda: len(self._queue) >= count, timeout)
            finally:
                self._watching -= 1

    def _write(self) -> None:
        """Commits what is queued, then hands the writer's role on."""
        queue = self._queue
        with self._lock:
            if len(queue) == 1:  # a lone save, the usual case: no comprehension
                batch = [queue.popleft()]
            else:
                batch = [queue.popleft() for _ in range(min(len(queue), MAX_BATCH))]
        try:
            self._commit(batch)
        finally:
            with self._lock:
                if self._queue:
                    following = self._queue[0]
                    following.lead = True
                    following.settle()
                else:
                    self._writing = False
            for pending in batch:
                pending.settle()

    def _commit(self, batch: list[PendingSave]) -> None:
        self.commits += 1
        try:
            if len(batch) == 1:
                # Exactly the single save of old: no savepoint, no retry.
                only = batch[0]
                only.ids = self._recorder.insert_events(
                    only.events, fence=only.fence, claim=only.claim
                )
                return
            try:
                self._recorder.insert_together(batch)
            except SAVE_CONFLICTS:
                # One of them cannot commit, and the transaction is gone:
                # again, so that only that one fails.
                for pending in batch:
                    pending.ids = None
                self.commits += 1
                self._recorder.insert_each(batch)
        except BaseException as error:  # noqa: BLE001 - each waiter gets it
            for pending in batch:
                if pending.error is None:
                    pending.ids = None
                    pending.error = error
