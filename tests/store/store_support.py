"""Helpers of the store's tests: a new Session to save, seeing a save wait
on PostgreSQL's locks (for tests of takeovers), and on the SQLite pool's
writer's lock."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sized
from typing import Any

import psycopg

from turnlog.domain.session import Session
from turnlog.store.fencing import LEASE_TABLE, Fence
from turnlog.store.log import Store


class WatchedLock:
    """A lock that says when a thread starts a blocking wait for it.

    Only ``thread``'s waits, once it is set; a try that does not block
    (the pool's own first try for the writer's turn) is not a wait.
    """

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self.thread: int | None = None
        self.waiting = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if blocking and self.thread in (None, threading.get_ident()):
            self.waiting.set()
        return bool(self._lock.acquire(blocking, timeout))

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return bool(self._lock.locked())


def still_open(
    connections: list[sqlite3.Connection],
) -> list[sqlite3.Connection]:
    """Those of ``connections`` not closed yet."""
    found = []
    for connection in connections:
        try:
            connection.execute("SELECT 1")
        except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
            continue
        found.append(connection)
    return found


def new_session(session_id: str = "s1") -> Session:
    """A Session with its creation pending, to save."""
    return Session.create(
        session_id,
        agent_name="a",
        agent_digest="d",
        shared_state={},
        model_route="default",
    )


def write_lease(store: Store, session_id: str, owner: str, epoch: int) -> None:
    """Writes a lease row as SessionOwnership.acquire would."""
    store.prepare_leases()
    with store.transaction() as cursor:
        cursor.execute(
            store.sql(
                f"INSERT INTO {store.backend.qualify(LEASE_TABLE)} "
                "(session_id, owner, renewed, epoch) VALUES (?, ?, ?, ?)"
            ),
            (session_id, owner, time.time(), epoch),
        )


def lease(store: Store, session_id: str, owner: str, epoch: int = 1) -> Fence:
    """Writes a lease row and fences the store's saves of the session by it."""
    write_lease(store, session_id, owner, epoch)
    fence = Fence(session_id, owner, epoch)
    store.fence(fence)
    return fence


def wait_until_blocked_by(
    server_url: str, cursor: Any, done: Sized, timeout: float = 10.0
) -> None:
    """Returns once a session waits on ``cursor``'s transaction (or ``done``
    holds an outcome, or ``timeout`` passes): the caller asserts which."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(server_url, autocommit=True) as watcher:
        while not done and time.monotonic() < deadline:
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE %s = ANY(pg_blocking_pids(pid))",
                (cursor.connection.info.backend_pid,),
            ).fetchone()
            if waiting and waiting[0]:
                return
            time.sleep(0.01)  # polling the server: no event to wait on


def outcome_behind_takeover(
    store_url: str, takeover: str, save: Callable[[], object]
) -> BaseException | None:
    """Runs ``save`` while another store's transaction locks out saves (as
    a lease's acquire does) and runs ``takeover``; checks that the save
    waited for that transaction, and returns how it ended (None: saved)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            save()
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thief = Store(store_url)
    try:
        with thief.transaction() as cursor:
            thief.lock_out_saves(cursor)
            cursor.execute(takeover)
            saver = threading.Thread(target=run)
            saver.start()
            wait_until_blocked_by(store_url.split("?", maxsplit=1)[0], cursor, outcome)
            assert not outcome, f"it did not wait for the takeover: {outcome}"
        saver.join(timeout=10)
    finally:
        thief.close()
    assert len(outcome) == 1
    return outcome[0]
