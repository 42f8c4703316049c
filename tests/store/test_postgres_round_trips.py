"""PostgreSQL: a save, and a group commit of many, is one round trip.

Round trips are counted, not timed: libpq's trace of every connection the
log takes from its pool records each message sent (F) and received (B),
and a round trip is a run of sent messages answered by a run of received
ones (the server holds its answers until the Sync that ends a pipeline,
unless a statement fails). The events table is locked from the
transaction's first statement to its COMMIT, so every round trip inside
it is time that no other process can save; one round trip carries the
whole transaction.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg.pq import Trace
from store_support import lease, new_session

from turnlog.domain.errors import ConcurrencyConflictError, LeaseLostError
from turnlog.domain.ids import session_uuid
from turnlog.store.fencing import LEASE_TABLE, Claim
from turnlog.store.group_commit import PendingSave
from turnlog.store.log import Store


class RoundTrips:
    """Traces the connections a store takes from its pool; counts round trips."""

    def __init__(self, store: Store, folder: Path) -> None:
        self._folder = folder
        self._traces: list[Path] = []
        datastore = store.datastore
        real = datastore.get_connection

        @contextlib.contextmanager
        def traced() -> Iterator[Any]:
            with real() as conn:
                path = folder / f"trace-{len(self._traces)}.txt"
                self._traces.append(path)
                with path.open("w") as trace:
                    conn.pgconn.trace(trace.fileno())
                    conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
                    try:
                        yield conn
                    finally:
                        conn.pgconn.untrace()

        datastore.get_connection = traced

    def count(self) -> int:
        """Round trips since the last count (on every connection taken)."""
        trips = 0
        for path in self._traces:
            sent = False
            for line in path.read_text().splitlines():
                if line.startswith("F\t"):
                    sent = True
                elif line.startswith("B\t") and sent:
                    trips += 1
                    sent = False
        self._traces.clear()
        return trips


@pytest.fixture
def store(postgres_schema_url: str) -> Iterator[Store]:
    store = Store(postgres_schema_url)
    store.prepare_leases()
    store.save(new_session("warm"))  # the pool and its type adapters are ready
    yield store
    store.close()


@pytest.fixture
def trips(store: Store, tmp_path: Path) -> RoundTrips:
    return RoundTrips(store, tmp_path)


def pending(store: Store, session_id: str, **kwargs: Any) -> PendingSave:
    """A save of a new session, as the group commit queues it."""
    session = new_session(session_id)
    stored = [store._mapper.to_stored_event(e) for e in session.collect_events()]
    return PendingSave(stored, kwargs.get("fence"), kwargs.get("claim"))


def take_over(store: Store, session_id: str) -> None:
    with store.transaction() as cursor:
        cursor.execute(
            f"UPDATE {store.backend.qualify(LEASE_TABLE)} "
            "SET owner = 'other:1:x', epoch = epoch + 1 WHERE session_id = %s",
            (session_id,),
        )


def test_a_lone_save_is_one_round_trip(store: Store, trips: RoundTrips) -> None:
    store.save(new_session("plain"))
    assert trips.count() == 1
    store.save(new_session("claimed"), claim=Claim("claimed", "me:1:x", time.time()))
    assert trips.count() == 1
    lease(store, "fenced", "me:1:x")
    trips.count()
    store.save(new_session("fenced"))
    assert trips.count() == 1


def test_a_group_commit_is_one_round_trip(store: Store, trips: RoundTrips) -> None:
    saves = []
    for n in range(10):
        fence = lease(store, f"fenced{n}", "me:1:x")
        saves += [
            pending(store, f"plain{n}"),
            pending(store, f"claimed{n}", claim=Claim(f"claimed{n}", "me:1:x", 0.0)),
            pending(store, f"fenced{n}", fence=fence),
        ]
    trips.count()
    store.backend.insert_together(saves)  # type: ignore[attr-defined]
    assert trips.count() == 1
    ids = [position for save in saves for position in save.ids or ()]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(saves)
    for save in saves:
        assert save.error is None
        assert store.get(save.events[0].originator_id) is not None


def test_a_lost_fence_fails_its_batch_and_alone_on_its_own(
    store: Store, trips: RoundTrips
) -> None:
    held = lease(store, "held", "me:1:x")
    lost = lease(store, "lost", "me:1:x")
    take_over(store, "lost")
    store.save(new_session("stale"))
    saves = [
        pending(store, "good"),
        pending(store, "lost", fence=lost),
        pending(store, "stale"),  # its creation is in the log already
        pending(store, "held", fence=held),
    ]
    with pytest.raises(LeaseLostError):
        store.backend.insert_together(saves)  # type: ignore[attr-defined]
    trips.count()
    store.backend.insert_each(saves)  # type: ignore[attr-defined]
    assert saves[0].error is None
    assert isinstance(saves[1].error, LeaseLostError)
    assert saves[2].error is not None
    assert saves[3].error is None
    assert store.get(session_uuid("good")) is not None
    assert store.get(session_uuid("held")) is not None
    assert store.get(session_uuid("lost")) is None
    # The failed transactions were rolled back (a round trip more, on
    # failure only): their connections serve on, a round trip a save.
    trips.count()
    for n in range(6):
        store.save(new_session(f"after{n}"))
        assert trips.count() == 1


def test_a_conflict_through_the_store_fails_alone(store: Store) -> None:
    store.save(new_session("stale"))
    with pytest.raises(ConcurrencyConflictError):
        store.save(new_session("stale"))
    store.save(new_session("fresh"))
    assert store.get(session_uuid("fresh")) is not None
