"""One conformance suite for every store backend (SQLite file, PostgreSQL).

The eventsourcing recorders have their own suites; this one checks what
turnlog relies on: atomic multi-aggregate saves in decision order, the
single-writer backstop, exact round-trips of awkward payloads, and the
guard that refuses databases that are not turnlog logs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import turnlog.store.log
from turnlog.domain.errors import ConcurrencyConflictError, NotATurnlogStoreError
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.store.application import TurnlogApplication
from turnlog.store.backend import LogBackend
from turnlog.store.log import Store
from turnlog.store.marker import SCHEMA_VERSION


def new_session(session_id: str = "s1", shared: dict | None = None) -> Session:
    return Session.create(
        session_id,
        agent_name="a",
        agent_digest="d",
        shared_state=shared or {},
        model_route="default",
    )


@pytest.fixture
def store(store_url: str):
    store = Store(store_url)
    yield store
    store.close()


def test_the_backend_speaks_its_dialect_through_one_interface(store: Store) -> None:
    backend = store.backend
    assert isinstance(backend, LogBackend)
    assert store.events_table.endswith(backend.events_table_name)
    # Written once with ``?`` placeholders, runnable on either backend.
    with store.transaction() as cursor:
        cursor.execute(store.sql("SELECT ? + 1 AS answer"), (41,))
        assert cursor.fetchone()["answer"] == 42
        columns = backend.table_columns(cursor, backend.events_table_name)
    assert {"originator_id", "originator_version", "topic", "state"} <= columns


def test_save_then_get_rebuilds_the_aggregate(store: Store) -> None:
    session = new_session()
    session.start_turn("sub-1")
    store.save(session)
    loaded = store.get(session_uuid("s1"))
    assert loaded is not None
    assert (loaded.session_id, loaded.active_turn, loaded.version) == ("s1", 1, 2)


def test_get_of_a_missing_aggregate_is_none(store: Store) -> None:
    assert store.get(session_uuid("nobody")) is None


def test_one_save_holds_two_aggregates_in_decision_order(store: Store) -> None:
    session = new_session()
    store.save(session)
    number = session.start_turn("sub-1")
    turn = Turn.open("s1", number, "sub-1")
    turn.accept_input("sub-1", "prompt", "hello")
    session.complete_turn(number, None)  # decided last, saved last
    recordings = store.save(turn, session)  # argument order must not matter
    names = [type(r.domain_event).__name__ for r in recordings]
    assert names == ["TurnStarted", "TurnOpened", "InputAccepted", "TurnCompleted"]
    positions = [r.notification.id for r in recordings]
    assert positions == sorted(positions)
    assert store.max_position() == positions[-1]


def test_a_second_writer_gets_a_conflict_not_a_fork(store: Store) -> None:
    store.save(new_session())
    first = store.get(session_uuid("s1"))
    second = store.get(session_uuid("s1"))
    first.start_turn("sub-1")
    store.save(first)
    second.start_turn("sub-2")
    with pytest.raises(ConcurrencyConflictError):
        store.save(second)
    events = store.events(session_uuid("s1"))
    assert [type(e).__name__ for e in events] == ["SessionCreated", "TurnStarted"]
    assert events[1].submission_id == "sub-1"


def test_a_failed_save_records_none_of_its_events(store: Store) -> None:
    store.save(new_session())
    stale = store.get(session_uuid("s1"))
    fresh = store.get(session_uuid("s1"))
    fresh.update_shared_state({"x": 1})
    store.save(fresh)
    stale.start_turn("sub-1")
    turn = Turn.open("s1", 1, "sub-1")
    before = store.max_position()
    with pytest.raises(ConcurrencyConflictError):
        store.save(stale, turn)
    assert store.max_position() == before
    assert store.get(turn_uuid("s1", 1)) is None


AWKWARD = {
    "envelope_lookalike": {"_type_": "datetime_iso", "_data_": "not a date"},
    "unicode": "naïve café — 日本語 \U0001f600",
    "nested": [[1, 2.5, None, True], {"k": []}],
    "big": 2**53 + 1,
    "empty": "",
    "quotes": 'he said "hi"\n\t\\',
}


def test_awkward_user_json_round_trips_exactly(store: Store) -> None:
    store.save(new_session(shared=AWKWARD))
    loaded = store.get(session_uuid("s1"))
    assert loaded.shared_state == AWKWARD
    (created,) = store.events(session_uuid("s1"))
    assert created.shared_state == AWKWARD
    assert created.timestamp.tzinfo is not None


def test_notifications_read_the_log_in_order_from_a_position(store: Store) -> None:
    for index in range(3):
        store.save(new_session(f"s{index}"))
    notes = store.notifications(1, 10)
    assert len(notes) == 3
    assert [store.decode(n).session_id for n in notes] == ["s0", "s1", "s2"]
    assert [n.id for n in store.notifications(notes[1].id, 10)] == [
        n.id for n in notes[1:]
    ]


def test_reopening_the_store_sees_what_was_saved(store_url: str) -> None:
    first = Store(store_url)
    first.save(new_session())
    first.close()
    second = Store(store_url)
    try:
        assert second.get(session_uuid("s1")).session_id == "s1"
    finally:
        second.close()


def applications_opened(monkeypatch: pytest.MonkeyPatch) -> list[TurnlogApplication]:
    """The applications (a log's connection pool each) a Store opens from now."""
    opened: list[TurnlogApplication] = []

    class Recorded(TurnlogApplication):
        def __init__(self, env: dict[str, str]) -> None:
            super().__init__(env)
            opened.append(self)

    monkeypatch.setattr(turnlog.store.log, "TurnlogApplication", Recorded)
    return opened


def test_a_log_from_a_newer_turnlog_is_refused(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(store_url)
    with store.transaction() as cursor:
        cursor.execute(
            store.sql(f"UPDATE {store._meta_table()} SET value = ? WHERE key = ?"),
            (str(SCHEMA_VERSION + 1), "schema_version"),
        )
    store.close()
    opened = applications_opened(monkeypatch)
    with pytest.raises(NotATurnlogStoreError, match="newer turnlog"):
        Store(store_url)
    # It read the marker through a pool, and closed it (on PostgreSQL, its
    # threads too) rather than leave it to the garbage collector.
    assert len(opened) == 1
    assert opened[0].recorder.datastore.pool.closed


def test_a_log_from_an_older_turnlog_is_marked_with_this_layout(
    store_url: str,
) -> None:
    """Once opened here, a turnlog that knows only the older layout refuses
    the log instead of misreading what this one changed (the view tables)."""
    store = Store(store_url)
    marker = store.sql(f"SELECT value FROM {store._meta_table()} WHERE key = ?")
    with store.transaction() as cursor:
        cursor.execute(
            store.sql(f"UPDATE {store._meta_table()} SET value = ? WHERE key = ?"),
            ("1", "schema_version"),
        )
    store.close()
    store = Store(store_url)
    try:
        with store.transaction() as cursor:
            cursor.execute(marker, ("schema_version",))
            row = cursor.fetchone()
        assert int(row["value"]) == SCHEMA_VERSION == 2
    finally:
        store.close()


def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite3"
    path.write_bytes(b"these are my notes, not a database\n" * 10)
    before = path.read_bytes()
    with pytest.raises(NotATurnlogStoreError, match="not an SQLite database"):
        Store(f"sqlite:///{path}")
    assert path.read_bytes() == before


def test_another_applications_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    connection.commit()
    connection.close()
    with pytest.raises(NotATurnlogStoreError, match="another application"):
        Store(f"sqlite:///{path}")
    connection = sqlite3.connect(path)
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    connection.close()
    assert tables == {"invoices"}


def test_sqlite_commits_wait_for_the_disk(sqlite_url: str) -> None:
    """The README promises WAL with synchronous=FULL for the file store."""
    store = Store(sqlite_url)
    try:
        with store.datastore.transaction(commit=False) as cursor:
            cursor.execute("PRAGMA journal_mode")
            journal = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")
            synchronous = cursor.fetchone()[0]
        assert (journal, synchronous) == ("wal", 2)  # 2 is FULL
    finally:
        store.close()


def test_a_session_loaded_from_its_snapshot_equals_one_folded_from_events(
    store: Store,
) -> None:
    from turnlog.store.snapshots import SNAPSHOT_INTERVAL

    session = new_session(shared={"k": [1, {"n": None}]})
    store.save(session)
    session.allow_tool_for_session("deploy", "r1")
    for number in range(1, SNAPSHOT_INTERVAL // 2 + 2):
        session.start_turn(f"sub-{number}")
        session.record_usage(number, 1, "default", {"input_tokens": 2})
        session.complete_turn(number, "ok")
        store.save(session)
    session.queue_input("later", "follow_up", "queued text", [])
    store.save(session)
    assert session.version > SNAPSHOT_INTERVAL
    snapshots = list(store._app.snapshots.get(session_uuid("s1")))
    assert len(snapshots) == 1
    assert SNAPSHOT_INTERVAL <= snapshots[0].originator_version < session.version
    loaded = store.get(session_uuid("s1"))
    folded = None
    for event in store.events(session_uuid("s1")):
        folded = event.mutate(folded)
    assert vars(loaded) == vars(folded)
    assert loaded.allowed_tools == frozenset({"deploy"})
    assert loaded.queued[0]["text"] == "queued text"
