"""A save's write transaction on SQLite: all of it or none, and the pool free after."""

from __future__ import annotations

import sqlite3
import uuid

import pytest
from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent
from eventsourcing.sqlite import SQLiteTransaction

from turnlog.store.sqlite import SQLiteLogRecorder
from turnlog.store.sqlite_pool import WriteTransaction, persistence_error


def _event(aggregate: uuid.UUID, version: int) -> StoredEvent:
    return StoredEvent(aggregate, version, "turnlog:Probe", b"{}")


def test_a_failed_insert_leaves_nothing_and_frees_the_writer(
    sqlite_recorder: SQLiteLogRecorder,
) -> None:
    recorder = sqlite_recorder
    aggregate = uuid.uuid4()
    assert len(recorder.insert_events([_event(aggregate, 1)]) or []) == 1
    # The second row clashes with the first: the error is eventsourcing's,
    # and the row before it in the same save is rolled back with it.
    with pytest.raises(IntegrityError):
        recorder.insert_events([_event(aggregate, 2), _event(aggregate, 1)])
    assert [e.originator_version for e in recorder.select_events(aggregate)] == [1]
    # The writer's connection went back to the pool: the next save (and a
    # reader, which memory:// keeps apart from writers) gets one at once.
    ids = recorder.insert_events([_event(aggregate, 2), _event(aggregate, 3)])
    assert ids is not None
    assert len(ids) == 2
    assert ids[1] == ids[0] + 1
    assert [e.originator_version for e in recorder.select_events(aggregate)] == [
        1,
        2,
        3,
    ]


def test_an_error_of_the_body_passes_through_and_rolls_back(
    sqlite_recorder: SQLiteLogRecorder,
) -> None:
    recorder = sqlite_recorder
    aggregate = uuid.uuid4()

    class Refused(Exception):
        pass

    def refused_after_a_row() -> None:
        with WriteTransaction(recorder.datastore.pool) as cursor:
            recorder._insert_rows(cursor, [_event(aggregate, 1)])
            raise Refused

    with pytest.raises(Refused):
        refused_after_a_row()
    assert list(recorder.select_events(aggregate)) == []
    assert len(recorder.insert_events([_event(aggregate, 1)]) or []) == 1


class _RolledBack:
    """What eventsourcing's SQLiteTransaction calls on a failed body."""

    def rollback(self) -> None:
        pass


@pytest.mark.parametrize(
    "sqlite_error",
    [
        sqlite3.InterfaceError,
        sqlite3.DataError,
        sqlite3.OperationalError,
        sqlite3.IntegrityError,
        sqlite3.InternalError,
        sqlite3.ProgrammingError,
        sqlite3.NotSupportedError,
        sqlite3.DatabaseError,
        sqlite3.Error,
    ],
)
def test_sqlite_errors_become_the_persistence_errors_eventsourcing_raises(
    sqlite_error: type[sqlite3.Error],
) -> None:
    # eventsourcing's own transaction, ending with the error, is the reference.
    transaction = SQLiteTransaction(_RolledBack(), commit=True)  # type: ignore[arg-type]
    error = sqlite_error("probe")
    with pytest.raises(PersistenceError) as raised:
        transaction.__exit__(sqlite_error, error, None)
    ours = persistence_error(error)
    assert type(ours) is type(raised.value)
    assert ours.args == (error,)
