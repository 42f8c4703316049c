"""Fenced saves: a save commits only while its lease still holds.

The lease table is edited directly here, as another process taking the
session over would; the fence itself is checked by the log, in the same
transaction as the insert.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from store_support import lease, new_session, outcome_behind_takeover

from turnlog.domain.errors import ConcurrencyConflictError, LeaseLostError
from turnlog.domain.ids import session_uuid
from turnlog.store.fencing import LEASE_TABLE, Fence
from turnlog.store.log import Store
from turnlog.store.verify import verify_session


def lease_table(store: Store) -> str:
    return store.backend.qualify(LEASE_TABLE)


def take_over(store: Store, session_id: str, owner: str = "other:1:x") -> None:
    with store.transaction() as cursor:
        cursor.execute(
            store.sql(
                f"UPDATE {lease_table(store)} SET owner = ?, epoch = epoch + 1 "
                "WHERE session_id = ?"
            ),
            (owner, session_id),
        )


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    store = Store(store_url)
    yield store
    store.close()


def test_after_a_conflict_the_chain_head_is_read_again(store_url: str) -> None:
    mine, theirs = Store(store_url), Store(store_url)
    try:
        session = new_session()
        mine.save(session)  # ``mine`` now caches the chain head at seq 1
        other = theirs.get(session_uuid("s1"))
        other.update_shared_state({"by": "them"})
        theirs.save(other)  # seq 2, unknown to ``mine``
        session.update_shared_state({"by": "me"})
        with pytest.raises(ConcurrencyConflictError):
            mine.save(session)
        fresh = mine.get(session_uuid("s1"))
        fresh.update_shared_state({"by": "me"})
        mine.save(fresh)  # must be seq 3, not a second seq 2
        report = verify_session(mine, "s1")
        assert report.ok, report.problem
        assert report.events == 3
    finally:
        mine.close()
        theirs.close()


def test_a_fenced_save_commits_while_the_lease_holds(store: Store) -> None:
    lease(store, "s1", "me:1:a", 1)
    store.save(new_session())
    assert [type(e).__name__ for e in store.events(session_uuid("s1"))] == [
        "SessionCreated"
    ]


def test_a_save_after_a_takeover_is_refused_whole(store: Store) -> None:
    lease(store, "s1", "me:1:a", 1)
    session = new_session()
    store.save(session)
    take_over(store, "s1")
    before = store.max_position()
    session.update_shared_state({"late": True})
    with pytest.raises(LeaseLostError, match="taken over by another process"):
        store.save(session)
    assert store.max_position() == before
    # Every later save of the session is refused too, even one that would
    # not clash with the new owner's events.
    fresh = store.get(session_uuid("s1"))
    fresh.update_shared_state({"again": True})
    with pytest.raises(LeaseLostError):
        store.save(fresh)
    assert store.max_position() == before


def test_a_save_with_an_older_epoch_of_the_same_owner_is_refused(store: Store) -> None:
    lease(store, "s1", "me:1:a", 1)
    take_over(store, "s1", owner="me:1:a")  # re-acquired: epoch 2
    with pytest.raises(LeaseLostError):
        store.save(new_session())
    assert store.max_position() == 0


def test_other_sessions_and_unfenced_saves_are_not_affected(store: Store) -> None:
    lease(store, "s1", "me:1:a", 1)
    take_over(store, "s1")
    store.save(new_session("s2"))  # not fenced: nothing to check
    assert store.get(session_uuid("s2")) is not None


def test_a_lost_lease_refuses_saves_without_asking_the_log(store: Store) -> None:
    lease(store, "s1", "me:1:a", 1)
    store.lose_fence("s1")  # the lease row still names us: only the mark refuses
    with pytest.raises(LeaseLostError):
        store.save(new_session())
    store.fence(Fence("s1", "me:1:a", 1))  # acquired again
    store.save(new_session())


@pytest.mark.postgres
def test_a_takeover_in_flight_holds_the_save_until_it_commits(
    postgres_schema_url: str,
) -> None:
    store = Store(postgres_schema_url)
    try:
        lease(store, "s1", "me:1:a", 1)
        outcome = outcome_behind_takeover(
            postgres_schema_url,
            f"UPDATE {lease_table(store)} SET owner = 'other', "
            "epoch = epoch + 1 WHERE session_id = 's1'",
            lambda: store.save(new_session()),
        )
        assert isinstance(outcome, LeaseLostError)
        assert store.max_position() == 0
    finally:
        store.close()


def test_an_older_lease_table_gets_its_epoch_column(store_url: str) -> None:
    store = Store(store_url)
    try:
        table = lease_table(store)
        with store.transaction() as cursor:  # the table as turnlog 0.1 made it
            cursor.execute(
                f"CREATE TABLE {table} (session_id TEXT PRIMARY KEY,"
                " owner TEXT NOT NULL, renewed DOUBLE PRECISION NOT NULL)"
            )
            cursor.execute(
                store.sql(f"INSERT INTO {table} VALUES (?, ?, ?)"),
                ("old", "elsewhere:1:x", 1.0),
            )
        store.prepare_leases()
        store.prepare_leases()  # idempotent
        with store.transaction() as cursor:
            cursor.execute(f"SELECT session_id, owner, epoch FROM {table}")
            rows = [
                tuple(row) if not isinstance(row, dict) else tuple(row.values())
                for row in cursor.fetchall()
            ]
        assert rows == [("old", "elsewhere:1:x", 0)]
    finally:
        store.close()


def test_the_lease_table_of_a_memory_store_fences_too() -> None:
    store = Store("memory://")
    try:
        lease(store, "s1", "me:1:a", 1)
        take_over(store, "s1")
        with pytest.raises(LeaseLostError):
            store.save(new_session())
    finally:
        store.close()
