"""Claims: a new session's lease, taken in the transaction of its first save.

The lease table is read and edited directly here, as another process
would; the claim itself is written by the log, in the insert's own
transaction (turnlog.store.fencing).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from store_support import new_session, outcome_behind_takeover, write_lease

from turnlog.domain.errors import ConcurrencyConflictError, LeaseLostError
from turnlog.domain.ids import session_uuid
from turnlog.store.fencing import LEASE_TABLE, Claim
from turnlog.store.log import Store
from turnlog.store.ownership import SessionOwnership

WAIT = 10.0
ME = "me:1:a"


def claim(session_id: str = "s1", owner: str = ME) -> Claim:
    return Claim(session_id, owner, time.time())


def leases(store: Store) -> dict[str, tuple[str, int]]:
    """The lease table: session id -> (owner, epoch)."""
    with store.reading() as cursor:
        cursor.execute(
            f"SELECT session_id, owner, epoch FROM {store.backend.qualify(LEASE_TABLE)}"
        )
        rows = [
            tuple(row.values()) if isinstance(row, dict) else tuple(row)
            for row in cursor.fetchall()
        ]
    return {str(s): (str(owner), int(epoch)) for s, owner, epoch in rows}


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    store = Store(store_url)
    store.prepare_leases()
    yield store
    store.close()


def test_a_claim_commits_the_session_and_its_lease_together(store: Store) -> None:
    store.save(new_session(), claim=claim())
    assert leases(store) == {"s1": (ME, 1)}
    assert store.get(session_uuid("s1")) is not None
    # The store is fenced by the claimed lease from then on.
    with store.transaction() as cursor:
        cursor.execute(
            store.sql(
                f"UPDATE {store.backend.qualify(LEASE_TABLE)} SET owner = 'other', "
                "epoch = epoch + 1 WHERE session_id = ?"
            ),
            ("s1",),
        )
    session = store.get(session_uuid("s1"))
    session.update_shared_state({"late": True})
    with pytest.raises(LeaseLostError):
        store.save(session)


def test_a_claim_where_a_lease_is_held_is_refused_whole(store: Store) -> None:
    write_lease(store, "s1", "other:2:b", 3)
    with pytest.raises(LeaseLostError):
        store.save(new_session(), claim=claim())
    assert store.max_position() == 0
    assert leases(store) == {"s1": ("other:2:b", 3)}  # left as it was
    # A claim refused lost nothing this store held: the session is not
    # marked lost here, so a lease acquired afterwards saves at once.
    assert store.refusal("s1") is None


def test_a_claim_of_a_session_in_the_log_leaves_no_lease(store: Store) -> None:
    store.save(new_session())
    before = store.max_position()
    with pytest.raises(ConcurrencyConflictError) as conflict:
        store.save(new_session(), claim=claim())
    assert not isinstance(conflict.value, LeaseLostError)
    assert store.max_position() == before
    assert leases(store) == {}


def test_claims_in_one_batch_fail_alone(store: Store) -> None:
    """Claims queued behind a held save commit together; a refused one alone."""
    write_lease(store, "held", "other:2:b", 3)
    recorder: Any = store._app.recorder
    real = recorder.insert_events
    entered, release = threading.Event(), threading.Event()

    def held_lone_save(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            assert release.wait(WAIT)
        return real(*args, **kwargs)

    recorder.insert_events = held_lone_save
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        first = pool.submit(store.save, new_session("first"))
        assert entered.wait(WAIT)
        names = ["a", "held", "b"]
        claims = [
            pool.submit(store.save, new_session(n), claim=claim(n)) for n in names
        ]
        assert store._writer.wait_for_queue(3, WAIT)
        release.set()
        assert first.result(WAIT)
        assert claims[0].result(WAIT)
        assert claims[2].result(WAIT)
        with pytest.raises(LeaseLostError):
            claims[1].result(WAIT)
    assert leases(store) == {"a": (ME, 1), "b": (ME, 1), "held": ("other:2:b", 3)}
    assert store.get(session_uuid("held")) is None


def test_a_claimed_lease_is_renewed_and_released(store: Store) -> None:
    ownership = SessionOwnership(store, lease_seconds=60)
    try:
        session = new_session()
        assert ownership.claim_new("s1", lambda c: store.save(session, claim=c))
        assert leases(store) == {"s1": (ownership.owner, 1)}
        assert ownership.renew() == []  # held: not taken for lost
        ownership.release("s1")
        assert leases(store) == {}
        # Held by another now: refused, nothing recorded, and no error.
        write_lease(store, "s2", "other:2:b", 3)
        before = store.max_position()
        again = new_session("s2")
        assert not ownership.claim_new("s2", lambda c: store.save(again, claim=c))
        assert store.max_position() == before
    finally:
        ownership.release_all()


@pytest.mark.postgres
def test_a_takeover_in_flight_holds_a_claim_until_it_commits(
    postgres_schema_url: str,
) -> None:
    """The claim waits for the events table's lock, then finds the lease taken."""
    store = Store(postgres_schema_url)
    store.prepare_leases()
    try:
        outcome = outcome_behind_takeover(
            postgres_schema_url,  # an acquire(), as it does it
            f"INSERT INTO {store.backend.qualify(LEASE_TABLE)} "
            "VALUES ('s1', 'other', 0, 1)",
            lambda: store.save(new_session(), claim=claim()),
        )
        assert isinstance(outcome, LeaseLostError)
        assert store.max_position() == 0
        assert leases(store) == {"s1": ("other", 1)}
    finally:
        store.close()
