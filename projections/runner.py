"""The runner that keeps every view following the log, exactly once.

A view's rows and its tracking position are written in one transaction
(:mod:`turnlog.projections.tables`), and the tracking row is advanced only from
the position and generation this runner read (a compare-and-set), so two
processes following the same database never fold an event twice: the
loser rolls back and re-reads.

Reads call :meth:`ProjectionRunner.catch_up` first, so a read made after a
session reported an event sees at least that event (read-your-writes).

What this process saves is folded from the saves' own recordings, not read
back from the log, wherever they follow the runner's position without a
gap (:mod:`turnlog.projections.handover`); the rest is read from the log.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Any, NoReturn

from eventsourcing.persistence import Notification, Recording

from turnlog.domain.errors import ReplayError
from turnlog.projections.handover import Handover
from turnlog.projections.leader import ViewLeader
from turnlog.projections.rows import Projection, session_of
from turnlog.projections.tables import TrackingMovedError, ViewTables
from turnlog.store.log import Store

logger = logging.getLogger(__name__)

BATCH_SIZE = 1000
CACHE_LIMIT = 20_000
"""Documents a runner keeps per view between batches; past it, only the
documents the last batch wrote stay (a session's checkpoint, its running
turn: the ones the next batch is likely to read again). Rebuilds from
empty use it; a runtime's live follower, which runs for as long as its
process, keeps far fewer (LIVE_CACHE_LIMIT)."""
LIVE_CACHE_LIMIT = 4096
"""``cache_limit`` of a runtime's follower: its memory stays flat, however
many sessions the process serves (a few documents a session, so the
sessions of the last few minutes stay cached)."""
FOLLOW_INTERVAL = 0.2
"""Seconds the live follower gathers new events before committing them."""


class _PoisonError(Exception):
    """An entry a view cannot fold (or the log cannot decode)."""

    def __init__(
        self, index: int, notification: Notification, view: str, error: Exception
    ) -> None:
        super().__init__(index)
        self.index = index
        self.position = notification.id
        self.topic = notification.topic
        self.view = view
        self.error = error


_MISSING = object()


class _Unit:
    """The documents one batch of one view reads and writes.

    Documents read are kept in ``cache`` (shared by the runner across
    batches, misses included): a fold reads the same few documents again and
    again (a session's checkpoint, its running execution), and each read is
    a query. A fold may keep a document as a msgspec Struct in the cache and
    mutate it; it is encoded only when the batch commits.
    """

    def __init__(
        self,
        tables: ViewTables,
        view: str,
        cache: dict[tuple[str, int], Any],
        complete: bool,
    ) -> None:
        self.tables = tables
        self.view = view
        self.cache = cache
        self.complete = complete
        self.dirty: set[tuple[str, int]] = set()

    def get(self, part: str, position: int) -> Any:
        key = (part, position)
        doc = self.cache.get(key, _MISSING)
        if doc is not _MISSING:
            return doc
        # A view this runner built from empty, whose cache was never
        # dropped, holds nothing the cache does not: no query needed.
        doc = None if self.complete else self.tables.get(self.view, part, position)
        self.cache[key] = doc
        return doc

    def put(self, part: str, position: int, doc: Any) -> None:
        key = (part, position)
        self.cache[key] = doc
        self.dirty.add(key)

    @property
    def writes(self) -> dict[tuple[str, int], Any]:
        return {key: self.cache[key] for key in self.dirty}


class ProjectionRunner:
    """Folds new log entries into every view, exactly once.

    ``catch_up`` is safe to call from any thread; a background follower
    thread (``start``) calls it whenever this process saves.
    """

    def __init__(self, store: Store, projections: Sequence[Projection]) -> None:
        self.store = store
        self.tables = ViewTables(store)
        self.projections = list(projections)
        self._lock = threading.Lock()
        self._folded = threading.Condition()
        self._positions: dict[str, int] = {}
        self._generations: dict[str, int] = {}
        self._caches: dict[str, dict[tuple[str, int], Any]] = {
            projection.name: {} for projection in projections
        }
        self._leader = ViewLeader(self, FOLLOW_INTERVAL)
        self._handover = Handover()
        """What this process's saves recorded, not folded yet (see notify)."""
        self.batch_size = BATCH_SIZE
        """Log entries folded per transaction."""
        self.cache_limit = CACHE_LIMIT
        """Documents kept per view between batches (see CACHE_LIMIT)."""
        self.failure: ReplayError | None = None
        self._complete: set[str] = set()
        for projection in self.projections:
            self._positions[projection.name] = self._load_position(projection)
            if self._positions[projection.name] == 0:
                self._complete.add(projection.name)

    def _load_position(self, projection: Projection) -> int:
        tracking = self.tables.tracking_row(projection.name)
        if tracking is None or tracking.version != projection.version:
            generation = self.tables.reset(projection.name, projection.version)
            self._generations[projection.name] = generation
            return 0
        self._generations[projection.name] = tracking.generation
        return tracking.position

    def position(self, name: str) -> int:
        """The last log position folded into view ``name``."""
        return self._positions[name]

    def position_folded(self) -> int:
        """The log position every view has folded up to."""
        return min(self._positions.values(), default=0)

    def catch_up(self, until: int | None = None) -> int:
        """Folds what the log holds now (up to ``until``); returns the position.

        Each batch of up to ``batch_size`` entries is one transaction for
        every view, so an interrupted catch-up resumes after the last committed batch.
        """
        if self.failure is not None:
            raise self.failure
        with self._lock:
            while True:
                try:
                    return self._catch_up_locked(until)
                except TrackingMovedError:
                    # Another follower wrote these views: nothing cached holds.
                    self._forget()
                    for projection in self.projections:
                        self._positions[projection.name] = self._load_position(
                            projection
                        )

    def _catch_up_locked(self, until: int | None) -> int:
        # Stop at the end the log had when we began: chasing a busy writer
        # would commit a trickle of tiny batches, each taking the write lock.
        end = self.store.max_position() if until is None else until
        start = min(self._positions.values(), default=0) + 1
        while True:
            limit = min(self.batch_size, end - start + 1)
            if limit <= 0:
                return start - 1
            # This process's own saves, if they are what comes next: their
            # events as saved, without reading and decoding them again.
            handed = self._handover.take(start, limit)
            events: list[Any] | None = None
            if handed:
                batch: Sequence[Notification] = [r.notification for r in handed]
                events = [r.domain_event for r in handed]
            else:
                batch = self.store.notifications(start, limit)
                if not batch:
                    return start - 1
            try:
                units = self._fold(batch, events)
            except _PoisonError as poison:
                self._stop_at(batch, events, poison)
            self._commit(batch, units)
            start = batch[-1].id + 1

    def _stop_at(
        self,
        batch: Sequence[Notification],
        events: Sequence[Any] | None,
        poison: _PoisonError,
    ) -> NoReturn:
        """Commits what came before the poison entry, then stops at it."""
        while True:
            self._forget()  # the failed fold left half-changed documents
            if not poison.index:
                break
            before = batch[: poison.index]
            try:
                self._commit(
                    before,
                    self._fold(
                        before, None if events is None else events[: poison.index]
                    ),
                )
                break
            except _PoisonError as earlier:
                # An entry before an undecodable one that no view can fold.
                poison = earlier
        self._fail(poison.position, poison.topic, poison.view, poison.error)

    def _fold(
        self, batch: Sequence[Notification], events: Sequence[Any] | None = None
    ) -> dict[str, _Unit]:
        """Folds ``batch`` into fresh units; raises _PoisonError at a bad entry.

        Each entry is decoded once for every view (unless ``events`` holds
        them, as saved), and each view gets the batch session by session
        (its runs of entries of its classes). If a fold raises, the batch
        is folded again entry by entry, in log order, to name the entry it
        cannot fold.
        """
        sessions: dict[str, list[tuple[int, Any]]] = {}
        for index, notification in enumerate(batch):
            if events is not None:
                event = events[index]
            else:
                try:
                    event = self.store.decode(notification)
                except Exception as error:
                    raise _PoisonError(index, notification, "decode", error) from error
            session_id = session_of(event)
            if session_id is None:
                continue
            run = sessions.get(session_id)
            if run is None:
                run = sessions[session_id] = []
            run.append((notification.id, event))
        try:
            return self._fold_runs(list(sessions.items()))
        except Exception:  # noqa: BLE001 - found again, and named, below
            self._forget()  # the failed fold left half-changed documents
        return self._fold_entry_by_entry(batch, sessions)

    def _fold_entry_by_entry(
        self,
        batch: Sequence[Notification],
        sessions: dict[str, list[tuple[int, Any]]],
    ) -> dict[str, _Unit]:
        """Folds in log order, one entry at a time; raises _PoisonError naming
        the first entry, and the view, whose fold fails."""
        units = self._units()
        index_of = {notification.id: index for index, notification in enumerate(batch)}
        in_log_order = sorted(
            (position, session_id, event)
            for session_id, run in sessions.items()
            for position, event in run
        )
        for position, session_id, event in in_log_order:
            for projection in self.projections:
                unit = units[projection.name]
                try:
                    self._fold_run(projection, unit, session_id, [(position, event)])
                except Exception as error:
                    index = index_of[position]
                    raise _PoisonError(
                        index, batch[index], projection.name, error
                    ) from error
        return units

    def _units(self) -> dict[str, _Unit]:
        return {
            p.name: _Unit(
                self.tables, p.name, self._caches[p.name], p.name in self._complete
            )
            for p in self.projections
        }

    def _fold_runs(
        self, runs: list[tuple[str, list[tuple[int, Any]]]]
    ) -> dict[str, _Unit]:
        units = self._units()
        for projection in self.projections:
            unit = units[projection.name]
            for session_id, run in runs:
                self._fold_run(projection, unit, session_id, run)
        return units

    def _fold_run(
        self,
        projection: Projection,
        unit: _Unit,
        session_id: str,
        run: list[tuple[int, Any]],
    ) -> None:
        """Hands ``projection`` the entries of ``run`` it has not folded yet."""
        folded, handles = self._positions[projection.name], projection.handles
        if handles is not None or run[0][0] <= folded:
            run = [
                (position, event)
                for position, event in run
                if position > folded and (handles is None or type(event) in handles)
            ]
        if run:
            projection.fold(unit, session_id, run)

    def _commit(self, batch: Sequence[Notification], units: dict[str, _Unit]) -> None:
        last = batch[-1].id
        behind = [p.name for p in self.projections if self._positions[p.name] < last]
        if not behind:
            return
        advances = [
            (
                name,
                units[name].writes,
                self._positions[name],
                last,
                self._generations[name],
            )
            for name in behind
        ]
        try:
            self.tables.commit(advances)
        except BaseException:
            self._forget()  # the caches may hold what was not written
            raise
        with self._folded:
            for name in behind:
                self._positions[name] = last
            self._folded.notify_all()
        self._handover.folded(self.position_folded())
        for name in behind:
            cache = self._caches[name]
            if len(cache) > self.cache_limit:
                hot = {key: cache[key] for key in units[name].dirty}
                cache.clear()
                cache.update(hot)
                # What was dropped is in the table now: misses must query it.
                self._complete.discard(name)

    def _forget(self) -> None:
        for cache in self._caches.values():
            cache.clear()
        self._complete.clear()

    def _fail(self, position: int, topic: str, view: str, error: Exception) -> NoReturn:
        failure = ReplayError(
            f"view {view!r} cannot fold log entry {position} ({topic}): {error}"
        )
        self.failure = failure
        raise failure from error

    # -- the live follower ------------------------------------------------------

    def notify(self, recordings: Sequence[Recording[uuid.UUID]] = ()) -> None:
        """Wakes the follower (a Store listener: called after every save in
        this process, with the save's recordings, folded from memory when
        they come next: see turnlog.projections.handover)."""
        if recordings:
            self._handover.give(recordings)
        self._leader.wake()

    def hurry(self) -> None:
        """Has the follower catch up at once from now on (closing)."""
        self._leader.hurry()

    def start(self, gather: float | None = None) -> None:
        """Starts the background follower (it follows once elected).

        Args:
            gather: Seconds to gather new events after each catch-up
                (default ``FOLLOW_INTERVAL``).
        """
        if gather is not None:
            self._leader.interval = gather
        self._leader.start()

    def wait_folded(self, past: int, timeout: float | None = None) -> int:
        """Waits until the views fold past ``past``; returns where they are."""
        with self._folded:
            self._folded.wait_for(lambda: self.position_folded() != past, timeout)
            return self.position_folded()

    @property
    def leading(self) -> bool:
        """Whether this process's follower keeps the views current now."""
        return self._leader.leading

    @property
    def follower_trouble(self) -> Exception | None:
        """Why the follower's last catch-up failed (None if it did not)."""
        return self._leader.trouble

    def wait_leading(self, timeout: float | None = None) -> bool:
        """Waits until this process's follower is the elected one."""
        return self._leader.wait_leading(timeout)

    def stop(self) -> None:
        """Stops the follower after its current batch."""
        self._leader.stop()
