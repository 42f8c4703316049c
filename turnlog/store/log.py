"""The event store: an eventsourcing Application chosen by one URL.

=========================  ===============================================
URL                        backend
=========================  ===============================================
(none)                     SQLite file ``.turnlog/turnlog.sqlite3`` under
                           the working directory (the embedded default)
``sqlite:///rel/path``     SQLite file, relative path (SQLAlchemy style)
``sqlite:////abs/path``    SQLite file, absolute path
``memory://``              SQLite in memory, private to this Store (tests)
``postgresql://u@h:p/db``  PostgreSQL; ``?schema=NAME`` picks a schema
=========================  ===============================================

The store marks its database with a ``turnlog_meta`` table holding the
schema version, so that a database of something else, or one written by a
newer turnlog, is refused with a clear error before anything is written.

Hostile conditions get one clear error (a StoreError) naming the log: a
damaged SQLite file ("the log at PATH is damaged: ..."), a log this
process may not write (``Store(url, read_only=True)`` reads it without
writing a byte), and a PostgreSQL server that cannot be reached or refuses
the user or database (its own reason, at once, not a pool timeout).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import (
    IntegrityError,
    Notification,
    PersistenceError,
    Recording,
    StoredEvent,
)
from eventsourcing.utils import (
    resolve_topic,
)

from turnlog.domain.chain import ChainHead
from turnlog.domain.errors import (
    ConcurrencyConflictError,
    LeaseLostError,
    StoreURLError,
)
from turnlog.domain.events import in_decision_order
from turnlog.domain.ids import session_uuid
from turnlog.domain.session import Session
from turnlog.store.application import RECORDERS, TurnlogApplication
from turnlog.store.backend import LogBackend, ViewWrite
from turnlog.store.chaining import (
    creates_session,
    first_head,
    load_head,
    stamp_stored,
)
from turnlog.store.commits import CommitWatch
from turnlog.store.fencing import Claim, Fence, lease_lost
from turnlog.store.group_commit import BatchRecorder, GroupCommit
from turnlog.store.log_tables import META_TABLE
from turnlog.store.marker import check_marker
from turnlog.store.opening import (
    as_store_error,
    describe_url,
    is_sqlite_file,
    parse_store_url,
)
from turnlog.store.recordings import recordings_of
from turnlog.store.snapshots import snapshot_sessions


class Store:
    """The log: saves aggregates atomically, reads events and notifications.

    Thread-safe; one Store is shared by all actors of a Runtime.
    """

    def __init__(self, url: str | None = None, *, read_only: bool = False) -> None:
        """Opens the log ``url`` names (see the module docstring).

        Args:
            url: the store URL; None for the embedded default.
            read_only: read an SQLite log without writing to it (for a log
                this process may not write): the file is copied into
                memory once, so views can still catch up, in memory only.

        Raises:
            StoreURLError: a malformed URL.
            NotATurnlogStoreError: a database that is not a turnlog log.
            StoreError: a log that is damaged, may not be written (opened
                without ``read_only``), or cannot be reached.
        """
        self.url = url
        env = parse_store_url(url)
        env["IS_SNAPSHOTTING_ENABLED"] = "y"
        self.location = describe_url(url, env)
        self.read_only = read_only
        self._snapshot: sqlite3.Connection | None = None
        if read_only and not is_sqlite_file(env):
            msg = f"only an SQLite log file can be opened read-only, not {url!r}"
            raise StoreURLError(msg)
        app: TurnlogApplication | None = None
        try:
            recorder = resolve_topic(RECORDERS[env["PERSISTENCE_MODULE"]])
            self._snapshot = recorder.prepare(env, self.location, read_only=read_only)
            self._app = app = TurnlogApplication(env)
            check_marker(self)
        except BaseException as error:
            # Whatever failed, what was opened is closed: a log refused by
            # its marker (NotATurnlogStoreError) left the application's pool
            # open, on PostgreSQL with its threads, until garbage collection.
            if app is not None:
                app.close()
            if self._snapshot is not None:
                self._snapshot.close()
            if isinstance(
                error, (PersistenceError, sqlite3.Error, OSError, ImportError)
            ):
                raise as_store_error(error, self.location) from error
            raise
        self._closed = False
        self._close_lock = threading.Lock()
        self._heads: dict[str, ChainHead] = {}
        self._fences: dict[str, Fence] = {}
        self._lost: set[str] = set()
        self._mapper = self._app.mapper
        # Stamping encodes each event once for its link and its stored
        # state; a mapper that also compresses or encrypts (never one of
        # turnlog's, but an application may be configured so) maps anew.
        self._stamped_as_stored = (
            self._mapper.compressor is None and self._mapper.cipher is None
        )
        transcoder = self._mapper.transcoder
        self._encode_state: Callable[[Any], bytes] = getattr(
            transcoder, "encode_state", transcoder.encode
        )
        # Every save of this Store, from every session, goes through one
        # writer (see turnlog.store.group_commit).
        self._writer = GroupCommit(cast(BatchRecorder, self._app.recorder))
        self._commits: CommitWatch | None = None

    # -- what the views need ------------------------------------------------

    @property
    def datastore(self) -> Any:
        """The eventsourcing datastore (connection pool) of the log."""
        # Not in eventsourcing's Recorder interface, but both recorders have
        # one: views write their tables in the log's own transactions.
        return self._app.recorder.datastore  # type: ignore[attr-defined]

    @property
    def backend(self) -> LogBackend:
        """The SQL dialect of the log's backend (its recorder)."""
        # The recorder is one of turnlog's (see RECORDERS), which
        # eventsourcing's Application types only as its own base class.
        return cast(LogBackend, self._app.recorder)

    @property
    def events_table(self) -> str:
        """The (schema-qualified) name of the stored events table."""
        backend = self.backend
        return backend.qualify(backend.events_table_name)

    def add_listener(
        self, listener: Callable[[Sequence[Recording[uuid.UUID]]], None]
    ) -> None:
        """Calls ``listener`` after every save in this process."""
        self._app.listeners.append(listener)

    @property
    def commits(self) -> CommitWatch:
        """What wakes readers that follow the log live (see turnlog.store.commits)."""
        with self._close_lock:
            if self._commits is None:
                self._commits = CommitWatch(self.backend, self.max_position)
                self.add_listener(self._commits.bump)
            return self._commits

    def remove_listener(
        self, listener: Callable[[Sequence[Recording[uuid.UUID]]], None]
    ) -> None:
        """Stops calling ``listener`` (added with :meth:`add_listener`)."""
        with contextlib.suppress(ValueError):
            self._app.listeners.remove(listener)

    # -- writing --------------------------------------------------------------

    def save(
        self, *aggregates: Aggregate, claim: Claim | None = None
    ) -> list[Recording[uuid.UUID]]:
        """Saves the pending events of ``aggregates`` in one transaction.

        The transaction may hold other sessions' saves too (group commit,
        see turnlog.store.group_commit); this returns once it has committed.
        Raises ConcurrencyConflictError if another writer got there first,
        and LeaseLostError if the session is fenced (see :meth:`fence`) and
        its lease has passed to another process; in either case nothing of
        this save is recorded. With ``claim`` the save takes that lease in
        its own transaction, and is fenced by it from then on; it raises
        LeaseLostError if the log holds a lease on the session already.
        """
        events = in_decision_order(aggregates)
        session_id = events[0].session_id if events else None
        fence = claim.fence if claim else self._fences.get(session_id or "")
        if claim is None and fence is not None and session_id in self._lost:
            raise lease_lost(fence)
        head: ChainHead | None = None
        stored: list[StoredEvent] | None = None
        if session_id is not None:
            start = self._heads.get(session_id)
            if start is None and not creates_session(events):
                start = load_head(self._app.recorder, self.get, session_id)
            events, stamped, head = stamp_stored(
                events, start or first_head(events), self._encode_state
            )
            if self._stamped_as_stored:
                stored = stamped
        try:
            recordings = self._put(events, stored, fence, claim)
        except LeaseLostError:
            self._forget(session_id)
            if claim is None:  # a claim refused lost nothing it held
                self._lost.add(str(session_id))
            raise
        except IntegrityError as error:
            self._forget(session_id)
            msg = f"another writer appended to the same aggregate first: {error}"
            raise ConcurrencyConflictError(msg) from error
        except PersistenceError as error:
            self._forget(session_id)
            raise as_store_error(error, self.location) from error
        if session_id is not None and head is not None:
            self._heads[session_id] = head
        if claim is not None:
            self._fences[claim.session_id] = claim.fence
            self._lost.discard(claim.session_id)
        if self._app.snapshots is not None:
            snapshot_sessions(self._app.snapshots, aggregates, events)
        for listener in self._app.listeners:
            listener(recordings)
        return recordings

    def _put(
        self,
        events: list[Any],
        stored: list[StoredEvent] | None,
        fence: Fence | None,
        claim: Claim | None,
    ) -> list[Recording[uuid.UUID]]:
        """Writes ``events`` through the group commit; their recordings.

        ``stored`` is their stored form where stamping made it already (see
        turnlog.store.chaining.stamp_stored), else the mapper makes it.
        What eventsourcing's EventStore.put does, but the insert joins the
        batch of every session saving at the same moment. Not
        Application.save either: that checks every event against runtime
        Protocols, a quarter of a save's time.
        """
        if stored is None:
            stored = [self._mapper.to_stored_event(event) for event in events]
        ids = self._writer.save(stored, fence, claim)
        return recordings_of(events, stored, ids) if ids else []

    def _forget(self, session_id: str | None) -> None:
        """Drops what is cached of a session whose save failed.

        Another writer may have appended to it: the chain head is read from
        the log again on the next save.
        """
        if session_id is not None:
            self._heads.pop(session_id, None)

    # -- fencing (see turnlog.store.fencing) -------------------------------------------

    def prepare_leases(self) -> None:
        """Creates the lease table (and upgrades an older one); idempotent."""
        try:
            self.backend.create_lease_table()
        except PersistenceError as error:
            raise as_store_error(error, self.location) from error

    def fence(self, fence: Fence) -> None:
        """Fences every later save of ``fence.session_id`` with ``fence``.

        Such a save commits only if the lease row still names this owner and
        epoch, checked in the insert's own transaction.
        """
        self._heads.pop(fence.session_id, None)
        self._fences[fence.session_id] = fence
        self._lost.discard(fence.session_id)

    def lock_out_saves(self, cursor: Any) -> None:
        """In a transaction that moves a lease: no fenced save commits across it."""
        self.backend.lock_out_saves(cursor)

    def refusal(self, session_id: str) -> LeaseLostError | None:
        """The error every save of ``session_id`` gets here, if its lease is lost."""
        fence = self._fences.get(session_id)
        return lease_lost(fence) if fence and session_id in self._lost else None

    def let_go(self, session_id: str) -> None:
        """Keeps nothing of ``session_id`` (its lease was given back).

        A later save needs the lease again, which fences it anew and reads
        the chain head from the log: so a process that opened many sessions
        holds state only for those it still leases.
        """
        self._heads.pop(session_id, None)
        self._fences.pop(session_id, None)
        self._lost.discard(session_id)

    def sessions_kept(self) -> int:
        """How many sessions the store keeps a chain head or a fence for."""
        return len(self._heads.keys() | self._fences.keys())

    def lose_fence(self, session_id: str) -> None:
        """Refuses every later save of ``session_id`` here, at once.

        For a lease found lost outside a save (its renewal matched no row):
        the log would refuse those saves anyway.
        """
        if session_id in self._fences:
            self._lost.add(session_id)
            self._heads.pop(session_id, None)

    def insert_stored(self, events: Sequence[StoredEvent]) -> None:
        """Appends events exactly as given (ids, versions, topics, bytes).

        For importing a history written elsewhere: one transaction, nothing
        decoded or re-stamped. Raises ConcurrencyConflictError if any of
        them is already in the log; then nothing is written.
        """
        try:
            # The recorder, not the event store: imported events keep the
            # exact bytes (and chain) they were exported with.
            self._app.recorder.insert_events(list(events))
        except IntegrityError as error:
            msg = f"the log at {self.location} already holds some of these events"
            raise ConcurrencyConflictError(msg) from error
        except PersistenceError as error:
            raise as_store_error(error, self.location) from error
        if self._commits is not None:
            self._commits.bump_unnamed()

    # -- reading --------------------------------------------------------------

    def get_session(self, session_id: str) -> Session | None:
        """The Session ``session_id`` from the log, or None (one read if new)."""
        aggregate_id = session_uuid(session_id)
        with self._failures():
            newest = self._app.recorder.select_events(aggregate_id, desc=True, limit=1)
        if not newest:
            return None
        session: Session | None = self.get(aggregate_id)
        return session

    def get(self, aggregate_id: uuid.UUID, version: int | None = None) -> Any | None:
        """The aggregate with ``aggregate_id`` rebuilt from the log, or None.

        With ``version``, as it was at that version (from a snapshot taken
        at or before it, if any).
        """
        try:
            return self._app.repository.get(aggregate_id, version=version)
        except AggregateNotFoundError:
            return None
        except PersistenceError as error:
            raise as_store_error(error, self.location) from error

    def events(self, aggregate_id: uuid.UUID, *, gt: int | None = None) -> list[Any]:
        """The domain events of one aggregate, in order."""
        with self._failures():
            return list(self._app.events.get(aggregate_id, gt=gt))

    def notifications(
        self, start: int, limit: int, topics: Sequence[str] = ()
    ) -> Sequence[Notification]:
        """Up to ``limit`` log entries from position ``start`` on."""
        with self._failures():
            return self._app.recorder.select_notifications(start, limit, topics=topics)

    def stored_rows(
        self, aggregate_ids: Sequence[uuid.UUID]
    ) -> list[tuple[int, uuid.UUID, int, str, bytes]]:
        """(position, aggregate id, version, topic, stored state) of aggregates.

        Read straight from the events table, for auditing: no decoding, no
        upcasting, no projection in between.
        """
        key = self.backend.aggregate_key
        return self._select_stored("originator_id", [key(a) for a in aggregate_ids])

    def stored_before(
        self, aggregate_id: uuid.UUID, position: int, limit: int = 1
    ) -> list[tuple[int, uuid.UUID, int, str, bytes]]:
        """Up to ``limit`` stored events of an aggregate before log ``position``,
        newest first (as :meth:`stored_rows` gives them)."""
        key = self.backend.aggregate_key(aggregate_id)
        with self.reading() as cursor:
            return self.backend.tables.stored_before(cursor, key, position, limit)

    def stored_at(
        self, positions: Sequence[int]
    ) -> dict[int, tuple[uuid.UUID, int, str, bytes]]:
        """The stored events at these log positions: (id, version, topic, state)."""
        column = self.backend.position_column
        return {
            position: (aggregate, version, topic, state)
            for position, aggregate, version, topic, state in self._select_stored(
                column, list(positions)
            )
        }

    def _select_stored(
        self, column: str, values: list[Any]
    ) -> list[tuple[int, uuid.UUID, int, str, bytes]]:
        """Stored events whose ``column`` is one of ``values``, as plain tuples."""
        if not values:
            return []
        with self.reading() as cursor:
            return self.backend.tables.stored_rows(cursor, column, values)

    def max_position(self) -> int:
        """The position of the newest log entry (0 if the log is empty)."""
        with self._failures():
            return self._app.recorder.max_notification_id() or 0

    def decode(self, notification: Notification) -> Any:
        """The domain event a log entry holds."""
        return self._app.mapper.to_domain_event(notification)

    def encode(self, event: Any) -> bytes:
        """The stored bytes of a domain event's state."""
        return self._app.mapper.to_stored_event(event).state

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A write transaction on the log's database (for views)."""
        with self._failures(), self.datastore.transaction(commit=True) as cursor:
            yield cursor

    def write_views(self, writes: Sequence[ViewWrite]) -> str | None:
        """Moves views' tracking rows and writes their documents in one
        transaction (see LogBackend.write_views): None once committed, the
        view whose row had moved otherwise."""
        with self._failures():
            return self.backend.write_views(writes)

    @contextlib.contextmanager
    def reading(self) -> Iterator[Any]:
        """A read-only transaction on the log's database (for views)."""
        with self._failures(), self.datastore.transaction(commit=False) as cursor:
            yield cursor

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """Turns a database failure into a StoreError naming this log.

        IntegrityError passes: callers tell a conflict from a failure by it.
        """
        try:
            yield
        except IntegrityError:
            raise
        except (PersistenceError, sqlite3.Error) as error:
            raise as_store_error(error, self.location) from error

    def close(self) -> None:
        """Closes the connections; idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            commits = self._commits
        if commits is not None:
            commits.close()
        self._app.close()
        if self._snapshot is not None:
            self._snapshot.close()  # the last link to the memory copy

    def sql(self, statement: str) -> str:
        """``statement`` with ``?`` placeholders in this backend's style."""
        return self.backend.sql(statement)

    def _meta_table(self) -> str:
        return self.backend.qualify(META_TABLE)
