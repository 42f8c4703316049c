"""Group commit: saves of many sessions share transactions, and fail alone.

The store's recorder is wrapped to hold its first (lone) save inside the
writer, so that the saves made meanwhile queue behind it and are written
together as one batch when it is let go.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from store_support import lease, new_session

from turnlog.domain.errors import ConcurrencyConflictError, LeaseLostError
from turnlog.domain.ids import session_uuid
from turnlog.store.fencing import LEASE_TABLE
from turnlog.store.log import Store

WAIT = 10.0


class HeldWriter:
    """Wraps a store's recorder: holds the first lone save; counts batches."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.recorder = store._app.recorder
        self.entered = threading.Event()
        self.release = threading.Event()
        self.lone: list[int] = []
        self.together: list[int] = []
        self.each: list[int] = []
        self._wrap("insert_events", self._lone)
        self._wrap("insert_together", self._together)
        self._wrap("insert_each", self._each)

    def _wrap(self, name: str, hook: Callable[..., Any]) -> None:
        real = getattr(self.recorder, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            hook(*args)
            return real(*args, **kwargs)

        setattr(self.recorder, name, wrapped)

    def _lone(self, events: Any) -> None:
        self.lone.append(len(events))
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(WAIT)

    def _together(self, saves: Any) -> None:
        self.together.append(len(saves))

    def _each(self, saves: Any) -> None:
        self.each.append(len(saves))

    def queue_behind_held(
        self, pool: concurrent.futures.Executor, saves: list[Callable[[], Any]]
    ) -> list[concurrent.futures.Future[Any]]:
        """Runs the first save and holds it in the writer; queues the rest."""
        first = pool.submit(saves[0])
        assert self.entered.wait(WAIT)
        rest = [pool.submit(save) for save in saves[1:]]
        writer = self.store._writer
        assert writer.wait_for_queue(len(rest), WAIT)
        return [first, *rest]


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    store = Store(store_url)
    yield store
    store.close()


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        yield pool


def test_saves_queued_meanwhile_commit_in_one_transaction(
    store: Store, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    held = HeldWriter(store)
    sessions = [new_session(f"s{n}") for n in range(6)]
    futures = held.queue_behind_held(
        pool, [lambda s=s: store.save(s) for s in sessions]
    )
    held.release.set()
    recordings = [future.result(WAIT) for future in futures]
    assert held.lone == [1]  # the first save, alone
    assert held.together == [5]  # the five queued behind it: one transaction
    assert held.each == []
    positions = [r.notification.id for rs in recordings for r in rs]
    assert len(set(positions)) == len(positions) == 6
    for session in sessions:
        assert store.get(session.id) is not None


def test_a_save_is_not_reported_before_its_batch_commits(
    store: Store, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    held = HeldWriter(store)
    committing = threading.Event()
    commit = threading.Event()
    real = held.recorder.insert_together

    def slow_together(saves: Any) -> Any:
        committing.set()
        assert commit.wait(WAIT)
        return real(saves)

    held.recorder.insert_together = slow_together
    sessions = [new_session(f"s{n}") for n in range(3)]
    futures = held.queue_behind_held(
        pool, [lambda s=s: store.save(s) for s in sessions]
    )
    held.release.set()
    assert futures[0].result(WAIT)  # the lone save, committed
    assert committing.wait(WAIT)  # the batch of the other two is being written
    assert not futures[1].done()
    assert not futures[2].done()
    commit.set()
    assert futures[1].result(WAIT)
    assert futures[2].result(WAIT)


def take_over(store: Store, session_id: str) -> None:
    with store.transaction() as cursor:
        cursor.execute(
            store.sql(
                f"UPDATE {store.backend.qualify(LEASE_TABLE)} "
                "SET owner = ?, epoch = epoch + 1 WHERE session_id = ?"
            ),
            ("other:1:x", session_id),
        )


def test_a_conflict_in_a_batch_fails_only_that_save(
    store_url: str, store: Store, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    # "stale": another store appends first, so this store's copy conflicts.
    stale = new_session("stale")
    store.save(stale)
    other = Store(store_url)
    try:
        theirs = other.get(session_uuid("stale"))
        theirs.update_shared_state({"by": "them"})
        other.save(theirs)
    finally:
        other.close()
    stale.update_shared_state({"by": "me"})
    # "fenced": its lease passes to another process before the batch.
    lease(store, "fenced", "me:1:x")
    fenced = new_session("fenced")
    take_over(store, "fenced")
    good = [new_session(f"good{n}") for n in range(3)]

    held = HeldWriter(store)
    saves = [lambda: store.save(good[0]), lambda: store.save(good[1])]
    saves += [lambda: store.save(stale), lambda: store.save(fenced)]
    saves += [lambda: store.save(good[2])]
    futures = held.queue_behind_held(pool, saves)
    held.release.set()

    assert futures[0].result(WAIT)
    assert futures[1].result(WAIT)
    assert futures[4].result(WAIT)
    with pytest.raises(ConcurrencyConflictError) as conflict:
        futures[2].result(WAIT)
    assert not isinstance(conflict.value, LeaseLostError)
    with pytest.raises(LeaseLostError):
        futures[3].result(WAIT)
    assert held.together == [4]
    assert held.each == [4]  # written again, a savepoint each
    for session in good:
        assert store.get(session.id) is not None
    assert store.get(session_uuid("fenced")) is None
    assert store.get(session_uuid("stale")).shared_state == {"by": "them"}
