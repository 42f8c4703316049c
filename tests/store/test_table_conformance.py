"""The statements on turnlog's own tables, alike on every backend.

The storage mark, the views' documents and tracking rows, the service's
session owners and the raw read of the events table are written once
(turnlog.store.log_tables.LogTables) and run in each backend's dialect;
these tests hold both backends to the same answers, in plain values.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from eventsourcing.persistence import IntegrityError

from turnlog.domain.ids import session_uuid
from turnlog.domain.session import Session
from turnlog.store.backend import ViewWrite
from turnlog.store.log import Store
from turnlog.store.log_tables import LogTables, OwnedSession
from turnlog.store.marker import SCHEMA_VERSION

GENERATION = 7
OTHER_GENERATION = 8


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    store = Store(store_url)
    yield store
    store.close()


@pytest.fixture
def tables(store: Store) -> LogTables:
    tables = store.backend.tables
    with store.transaction() as cursor:
        tables.create_view_tables(cursor)
        tables.create_owner_table(cursor)
    return tables


def test_the_storage_mark_is_read_and_written_as_text(
    store: Store, tables: LogTables
) -> None:
    with store.transaction() as cursor:
        assert tables.read_meta(cursor, "schema_version") == str(SCHEMA_VERSION)
        assert tables.read_meta(cursor, "colour") is None
        tables.insert_meta(cursor, "colour", "blue")
        tables.update_meta(cursor, "colour", "green")
    with store.reading() as cursor:
        assert tables.read_meta(cursor, "colour") == "green"


def test_a_tracking_row_moves_only_from_where_it_was_read(
    store: Store, tables: LogTables
) -> None:
    with store.transaction() as cursor:
        tables.insert_tracking(cursor, "v", 3, GENERATION)
        assert tables.tracking_row(cursor, "v") == (0, 3, GENERATION)
        assert tables.advance_tracking(cursor, "v", 0, 10, GENERATION)
        # Read before that advance: refused, the row left as it is.
        assert not tables.advance_tracking(cursor, "v", 0, 20, GENERATION)
        # The right position, but a generation swapped in meanwhile.
        assert not tables.advance_tracking(cursor, "v", 10, 20, OTHER_GENERATION)
        assert not tables.advance_tracking(cursor, "nothing", 0, 1, GENERATION)
    with store.reading() as cursor:
        assert tables.tracking_row(cursor, "v") == (10, 3, GENERATION)
        assert tables.tracking_row(cursor, "nothing") is None


def test_a_views_commit_moves_every_tracking_row_or_writes_nothing(
    store: Store, tables: LogTables
) -> None:
    with store.transaction() as cursor:
        tables.insert_tracking(cursor, "v", 1, GENERATION)
        tables.insert_tracking(cursor, "w", 1, OTHER_GENERATION)
    assert (
        store.write_views(
            [
                ViewWrite("v", 0, 5, GENERATION, [("a", 1), ("a", 2)], [b"a1", b"a2"]),
                ViewWrite("w", 0, 5, OTHER_GENERATION, [], []),
            ]
        )
        is None
    )
    # "w" was read at 0, but is at 5 now: nothing of this commit is kept,
    # not even "v"'s row or documents, which were where they were read.
    moved = store.write_views(
        [
            ViewWrite("v", 5, 9, GENERATION, [("a", 1)], [b"a1!"]),
            ViewWrite("w", 0, 9, OTHER_GENERATION, [("z", 1)], [b"z1"]),
        ]
    )
    assert moved is not None
    assert "w" in moved
    with store.reading() as cursor:
        assert tables.tracking_row(cursor, "v") == (5, 1, GENERATION)
        assert tables.tracking_row(cursor, "w") == (5, 1, OTHER_GENERATION)
        assert tables.document(cursor, "v", "a", 1) == b"a1"
        assert tables.document(cursor, "v", "a", 2) == b"a2"
        assert tables.document(cursor, "w", "z", 1) is None
    # From where they are, both move, and a document is replaced.
    assert (
        store.write_views(
            [
                ViewWrite("v", 5, 9, GENERATION, [("a", 1)], [b"a1!"]),
                ViewWrite("w", 5, 9, OTHER_GENERATION, [("z", 1)], [b"z1"]),
            ]
        )
        is None
    )
    with store.reading() as cursor:
        assert tables.tracking_row(cursor, "v") == (9, 1, GENERATION)
        assert tables.document(cursor, "v", "a", 1) == b"a1!"
        assert tables.document(cursor, "w", "z", 1) == b"z1"


def write_documents(store: Store, tables: LogTables) -> None:
    with store.transaction() as cursor:
        tables.insert_tracking(cursor, "v", 1, GENERATION)
        tables.insert_tracking(cursor, "other", 1, OTHER_GENERATION)
        keys = [("b", 0)] + [("a", position) for position in range(1, 6)]
        docs = [b"b0"] + [f"a{position}".encode() for position in range(1, 6)]
        store.backend.upsert_documents(cursor, tables.docs, GENERATION, keys, docs)
        store.backend.upsert_documents(
            cursor, tables.docs, OTHER_GENERATION, [("z", 1)], [b"z1"]
        )
        # An upsert replaces the document at the same key.
        store.backend.upsert_documents(
            cursor, tables.docs, GENERATION, [("a", 5)], [b"a5!"]
        )


def test_documents_are_read_by_view_part_and_position_range(
    store: Store, tables: LogTables
) -> None:
    write_documents(store, tables)
    with store.reading() as cursor:
        assert tables.document(cursor, "v", "a", 2) == b"a2"
        assert tables.document(cursor, "v", "a", 9) is None
        assert tables.document(cursor, "other", "a", 2) is None
        assert tables.parts(cursor, "v") == ["a", "b"]
        assert tables.parts(cursor, "other") == ["z"]

        def documents(**bounds: object) -> list[tuple[int, bytes]]:
            options = {
                "from_position": 0,
                "before": None,
                "limit": None,
                "newest_first": False,
            }
            options.update(bounds)
            return tables.documents(cursor, "v", "a", **options)  # type: ignore[arg-type]

        assert [p for p, _ in documents()] == [1, 2, 3, 4, 5]
        assert documents(from_position=4) == [(4, b"a4"), (5, b"a5!")]
        assert [p for p, _ in documents(from_position=2, before=5)] == [2, 3, 4]
        assert [p for p, _ in documents(newest_first=True, limit=2)] == [5, 4]
        assert [p for p, _ in documents(before=3, limit=1)] == [1]


def test_a_view_is_renamed_and_deleted_with_its_own_documents_only(
    store: Store, tables: LogTables
) -> None:
    write_documents(store, tables)
    with store.transaction() as cursor:
        tables.delete_view(cursor, "other")
        tables.rename_view(cursor, "v", "served")
    with store.reading() as cursor:
        assert tables.tracking_row(cursor, "other") is None
        assert tables.tracking_row(cursor, "v") is None
        assert tables.tracking_row(cursor, "served") == (0, 1, GENERATION)
        assert tables.parts(cursor, "served") == ["a", "b"]
        assert tables.document(cursor, "served", "a", 1) == b"a1"
    with store.transaction() as cursor:
        tables.delete_view(cursor, "served")
    with store.reading() as cursor:
        assert tables.parts(cursor, "served") == []
        cursor.execute(f"SELECT count(*) AS n FROM {tables.docs}")
        assert cursor.fetchone()["n"] == 0


def test_session_owners_come_back_as_they_were_claimed(
    store: Store, tables: LogTables
) -> None:
    first = OwnedSession("s1", "acme", "helper", 1.5)
    with store.transaction() as cursor:
        tables.insert_owner(cursor, first)
        tables.insert_owner(cursor, OwnedSession("s0", "acme", "helper", 1.5))
        tables.insert_owner(cursor, OwnedSession("s2", "other", "helper", 0.5))
    with pytest.raises(IntegrityError), store.transaction() as cursor:
        tables.insert_owner(cursor, OwnedSession("s1", "other", "x", 2.0))
    with store.transaction() as cursor:
        late = OwnedSession("s1", "other", "x", 2.0)
        assert tables.insert_owner_unless_taken(cursor, late) == first
        new = OwnedSession("s3", "other", "x", 2.0)
        assert tables.insert_owner_unless_taken(cursor, new) == new
    with store.reading() as cursor:
        owner = tables.owner(cursor, "s1", "acme")
        assert owner == first
        assert isinstance(owner, OwnedSession)
        assert tables.owner(cursor, "s1", "other") is None
        # Oldest first, then by id.
        assert [o.session_id for o in tables.owned_by(cursor, "acme")] == ["s0", "s1"]
        assert [o.session_id for o in tables.owned_by(cursor, "other")] == ["s2", "s3"]


def test_stored_rows_are_plain_tuples_by_aggregate_and_by_position(
    store: Store,
) -> None:
    session = Session.create(
        "s1",
        agent_name="a",
        agent_digest="d",
        shared_state={},
        model_route="default",
    )
    store.save(session)
    rows = store.stored_rows([session_uuid("s1"), uuid.uuid4()])
    assert len(rows) == 1
    position, aggregate, version, topic, state = rows[0]
    assert (type(position), aggregate, version) == (int, session_uuid("s1"), 1)
    assert topic == "turnlog:SessionCreated"
    assert isinstance(state, bytes)
    assert store.stored_at([position, position + 100]) == {
        position: (aggregate, version, topic, state)
    }


def test_a_lease_passes_only_when_expired_or_taken_over(store: Store) -> None:
    store.prepare_leases()
    tables = store.backend.tables
    with store.transaction() as cursor:
        assert tables.take_lease(cursor, "s1", "a", 100.0, 50.0) == ("a", 1, 100.0)
        # Renewed at 100, so not expired before 90: still a's.
        assert tables.take_lease(cursor, "s1", "b", 120.0, 90.0) == ("a", 1, 100.0)
        # Its holder again: renewed, and a new epoch.
        assert tables.take_lease(cursor, "s1", "a", 130.0, 90.0) == ("a", 2, 130.0)
        assert tables.take_lease(cursor, "s1", "b", 200.0, 140.0) == ("b", 3, 200.0)
        assert tables.take_over_lease(cursor, "s1", "c", 210.0, "a") is None
        assert tables.take_over_lease(cursor, "s1", "c", 210.0, "b") == 4
        tables.take_lease(cursor, "s2", "c", 210.0, 0.0)
        tables.take_lease(cursor, "s3", "d", 210.0, 0.0)
        assert tables.renew_leases(cursor, "c", 220.0) == {("s1", 4), ("s2", 1)}
        tables.release_lease(cursor, "s1", "c", 3)  # an older epoch: kept
        assert tables.renew_leases(cursor, "c", 230.0) == {("s1", 4), ("s2", 1)}
        tables.release_lease(cursor, "s1", "c", 4)
        assert tables.renew_leases(cursor, "c", 240.0) == {("s2", 1)}
        tables.release_leases(cursor, "c")
        assert tables.renew_leases(cursor, "c", 250.0) == set()
        assert tables.renew_leases(cursor, "d", 250.0) == {("s3", 1)}
