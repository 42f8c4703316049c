"""Waiting for the log's connections: no limit the user did not set.

eventsourcing's SQLite pool gives up on a thread that waited 5 s for the
one write connection ("Timed out waiting for return of writer"): under a
burst of sessions the writer is busy for longer than that, and the saves
behind it failed with StoreError though nothing was wrong. A wait behind
this process's own writer is a queue, not a failure.

No test waits for real: the pool's clock is made to run an hour ahead on
every reading by the waiting thread, so any finite limit it kept would
already be spent when it reaches the held write lock.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import eventsourcing.persistence
import pytest
from store_support import WatchedLock

from turnlog.domain.ids import session_uuid
from turnlog.domain.session import Session
from turnlog.store.log import Store

WAIT = 10.0


def test_a_save_waits_behind_the_writer_as_long_as_it_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'log.sqlite3'}")
    try:
        pool = store.datastore.pool
        writer_lock = WatchedLock(pool._writer_lock)
        monkeypatch.setattr(pool, "_writer_lock", writer_lock)
        readings = 0
        real_time = time.time

        def clock() -> float:
            nonlocal readings
            if threading.get_ident() != writer_lock.thread:
                return real_time()
            readings += 1
            return real_time() + 3600.0 * readings

        monkeypatch.setattr(eventsourcing.persistence, "time", clock)
        outcome: list[BaseException | None] = []

        def save() -> None:
            writer_lock.thread = threading.get_ident()
            try:
                store.save(
                    Session.create(
                        "late",
                        agent_name="a",
                        agent_digest="d",
                        shared_state={},
                        model_route="default",
                    )
                )
            except BaseException as error:
                outcome.append(error)
            else:
                outcome.append(None)

        waiter = threading.Thread(target=save)
        with store.transaction():  # holds the write connection
            waiter.start()
            assert writer_lock.waiting.wait(WAIT)
        waiter.join(WAIT)
        assert not waiter.is_alive()
        assert outcome == [None]
        assert store.get(session_uuid("late")) is not None
    finally:
        store.close()
