"""An SQLite log's WAL, checkpointed and started over off the savers' threads.

SQLite checkpoints on its own (``wal_autocheckpoint``, every 1000 pages):
the commit that passes the mark copies the WAL's pages into the log file
and syncs it before its own ``commit`` returns. That is a save waiting
for about a hundred page copies and a second ``fdatasync``, once every
50 turns or so, on the path of a turn whose every commit gates its next
step. Here the log's connections never checkpoint themselves; the
savers count what they wrote, and past ``CHECKPOINT_PAGES`` a thread of
this keeper checkpoints on a connection of its own while saves go on (a
``PASSIVE`` checkpoint takes no write lock: it copies what is committed).

A checkpoint that runs while commits go on rarely leaves the WAL wholly
copied, so SQLite's next writer would seldom start it over from the
beginning, and readers that overlap without a gap (exports, audits,
views catching up beside live sessions) can keep it from ever starting
over. So once the WAL holds about ``WAL_CHECKPOINT_BYTES`` (every second
checkpoint) the keeper follows the passive one with a ``RESTART``: it
copies the few frames committed since, waits (up to
``WAL_CHECKPOINT_WAIT``) for the readers of older snapshots to finish
(each reads in bounded chunks, one short transaction each), and the next
commit writes from the WAL's start again.
The file keeps its blocks, so commits write over them: a write and
``fdatasync`` that grows a file costs 50-90 us more than one into blocks
it has (it must make the new size durable too; bench/wal_appends.py),
four times a turn. The connections' ``journal_size_limit`` trims a WAL
that grew far past the bound (``wal_file_limit``) once it starts over.

Waiting for the readers is not enough on its own, and the wait holds every
save back. SQLite has four read-mark slots for all of a file's readers; a
reader that cannot move a slot's mark to the newest commit (others hold
it) shares an older one, and the checkpoint copies no further than that
mark; and the write lock the checkpoint must take first is polled for,
so writers committing back to back can keep it for a quarter of a second.
So while this keeper restarts the WAL, this process's new transactions on
the file wait: writers for the pool's writer's turn, readers (of any of
its stores) at a :class:`ReadGate`. Beside six readers and two writers on
a loaded machine, that took the checkpoints that gave up after their
whole second from 6 in 418 to none in 420 (bench/wal_truncation.py;
figures in bench/RESULTS.md). Other processes' readers can still hold a
restart off; the next try then comes a bound later.

None of this touches durability: a commit is in the WAL, synced, before
it returns; a checkpoint only moves committed pages into the log file,
and the WAL starts over only once all of it is there, synced.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

logger = logging.getLogger(__name__)

WAL_CHECKPOINT_BYTES = 4 * 1024 * 1024
"""The WAL's bound: the keeper starts the WAL over once it holds about
this much (readers allowing)."""

WAL_CHECKPOINT_WAIT = 1.0
"""Seconds a restart waits for older readers before it gives up."""

CHECKPOINT_PAGES = 1000
"""Pages (about) written between two checkpoints, as SQLite's own
``wal_autocheckpoint``; at most half the bound's worth, so that a WAL
started over at each stays well within it."""

PAGES_A_COMMIT = 5
"""Pages a commit writes besides its events' bytes: table and index leaves
(a session's event and a turn's land in different leaves of the key),
counted in the WAL of a turn's commits (about ten writes each, a frame
header and a page a frame)."""

PAGE = 4096

FRAME = PAGE + 24
"""A WAL frame: a page and its header."""


def restart_frames() -> int:
    """Frames past which a checkpoint starts the WAL over: three quarters of
    the bound. Checkpoints come due every half bound (``CHECKPOINT_PAGES``),
    so every second one restarts the WAL, with a quarter's margin either
    way for the loose count of a commit's pages; each restart holds this
    process back, however short its copy (tests/store/test_wal_restart.py)."""
    return WAL_CHECKPOINT_BYTES * 3 // 4 // FRAME


def wal_file_limit() -> int:
    """Bytes a WAL file is trimmed to once it starts over, if it grew past
    them (restarts held off). Half a bound above the bound: a WAL restarted
    a little past the bound keeps its blocks, and its next commits write
    over them rather than growing the file again."""
    return WAL_CHECKPOINT_BYTES * 3 // 2


def connection_settings() -> tuple[str, ...]:
    """The PRAGMAs each of the log's own connections runs when opened."""
    return (
        "PRAGMA wal_autocheckpoint = 0",
        f"PRAGMA journal_size_limit = {wal_file_limit()}",
    )


class ReadGate:
    """Holds this process's new read transactions on one SQLite file back
    while its WAL is restarted.

    Thread-safe. A reader calls :meth:`wait_open` before its transaction;
    :meth:`closed` holds new ones back (the ones under way go on). Every
    store of this process open on the file shares its gate, and each has a
    keeper of its own: the gate stays closed until the last of the
    restarts that closed it is over.
    """

    __slots__ = ("__weakref__", "_closers", "_lock", "_open")

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._closers = 0
        """Restarts under way that hold the gate closed."""

    def wait_open(self) -> None:
        """Returns at once unless a restart is under way, else after it.

        The wait is bounded: so is a restart (``WAL_CHECKPOINT_WAIT``
        for readers, then the copy). A reader that slips past as the gate
        closes is one of those under way.
        """
        if not self._open.is_set():
            self._open.wait()

    def open_in_child(self) -> None:
        """Lets readers in again in a forked child, whoever closed the gate:
        no restart is under way there, and a lock a parent's thread held
        at the fork is held for ever."""
        self._lock = threading.Lock()
        self._closers = 0
        self._open.set()

    @contextmanager
    def closed(self) -> Iterator[None]:
        """Holds new readers back for the block (and for any other closer's)."""
        with self._lock:
            self._closers += 1
            self._open.clear()
        try:
            yield
        finally:
            with self._lock:
                # Not below 0: a forked child may leave a block its forking
                # thread was in after its gates were opened.
                self._closers = max(0, self._closers - 1)
                if self._closers == 0:
                    self._open.set()


_gates: weakref.WeakValueDictionary[str, ReadGate] = weakref.WeakValueDictionary()
_gates_lock = threading.Lock()


def _open_gates_in_child() -> None:
    """A forked child has no keeper thread mid-restart: a gate it
    inherited closed would hold its readers for ever."""
    global _gates_lock  # noqa: PLW0603 - a lock a parent thread held is lost
    _gates_lock = threading.Lock()
    for gate in list(_gates.values()):
        gate.open_in_child()


os.register_at_fork(after_in_child=_open_gates_in_child)


def read_gate(path: str) -> ReadGate:
    """The one gate of this process's readers of the SQLite file ``path``
    (every store open on it shares it while any holds it)."""
    key = os.path.realpath(path)
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = ReadGate()
        return gate


class WalKeeper:
    """Checkpoints the WAL of the SQLite file ``path`` on a thread of its own.

    Thread-safe. The thread starts at the first checkpoint due; ``close``
    stops it.
    """

    def __init__(
        self,
        path: str,
        lock_timeout: float,
        hold_writers: Callable[[], AbstractContextManager[object]],
    ) -> None:
        self._path = path
        self._hold_writers = hold_writers
        """Holds this process's write transactions back for its block."""
        self._lock_timeout = lock_timeout
        self._written = 0
        self._due = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.gate = read_gate(path)
        """This process's readers of the file, held back while it is restarted."""
        self._retry_above = 0
        """After a restart readers held out: the WAL's frames to try again past."""
        self.checkpoints = 0
        """Checkpoints run (for tests)."""
        self.idle = threading.Condition()
        """Notified after each checkpoint (tests wait on it)."""

    def committed(self, size: int) -> None:
        """Notes a commit of events of ``size`` bytes; wakes the keeper when a
        checkpoint is due. Cheap: an addition, mostly."""
        # Unlocked: a lost update delays a checkpoint by one commit.
        self._written = written = self._written + PAGES_A_COMMIT + size // PAGE
        if written < min(CHECKPOINT_PAGES, WAL_CHECKPOINT_BYTES // PAGE // 2):
            return
        self._written = 0
        if self._thread is None:
            self._start()
        self._due.set()

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None or self._stopping.is_set():
                return
            self._thread = threading.Thread(
                target=self._run, name="turnlog-checkpoint", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while True:
                self._due.wait()
                self._due.clear()
                if self._stopping.is_set():
                    return
                try:
                    if connection is None:
                        connection = sqlite3.connect(
                            self._path,
                            isolation_level=None,
                            check_same_thread=False,
                            timeout=self._lock_timeout,
                        )
                    self._checkpoint(connection)
                except Exception:
                    # SQLite's errors, or the pool's (a writer's turn not
                    # given): the next one due tries again; saves go on.
                    logger.warning("could not checkpoint %s", self._path, exc_info=True)
                with self.idle:
                    self.checkpoints += 1
                    self.idle.notify_all()
        finally:
            if connection is not None:
                connection.close()

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        # Copies what it can without waiting for anyone; says how many
        # frames the WAL holds since it last started over.
        (_, frames, _) = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if frames > max(restart_frames(), self._retry_above):
            busy = self._restart(connection)
            bound = WAL_CHECKPOINT_BYTES // FRAME
            self._retry_above = frames + bound if busy else 0

    def _restart(self, connection: sqlite3.Connection) -> bool:
        """Copies the rest of the WAL and lets the next commit start it over;
        whether readers (or a writer) held that off."""
        connection.execute(f"PRAGMA busy_timeout = {int(WAL_CHECKPOINT_WAIT * 1000)}")
        try:
            with self._hold_writers(), self.gate.closed():
                # No new transaction of this process starts meanwhile: SQLite
                # waits for the readers under way, and need not wait for the
                # write lock (its busy handler polls, and writers committing
                # back to back held it for a quarter of a second).
                (busy, _, _) = connection.execute(
                    "PRAGMA wal_checkpoint(RESTART)"
                ).fetchone()
        finally:
            connection.execute(
                f"PRAGMA busy_timeout = {int(self._lock_timeout * 1000)}"
            )
        return bool(busy)

    def wait_for_checkpoint(self, after: int, timeout: float) -> bool:
        """Waits until more than ``after`` checkpoints ran (tests)."""
        with self.idle:
            return self.idle.wait_for(lambda: self.checkpoints > after, timeout)

    def close(self) -> None:
        """Stops the thread (after a checkpoint under way)."""
        self._stopping.set()
        self._due.set()
        with self._start_lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)
