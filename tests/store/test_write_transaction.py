"""A save's write transaction on SQLite: all of it or none, and the pool free after."""

from __future__ import annotations

import uuid

import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from turnlog.store.sqlite import SQLiteLogRecorder


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
