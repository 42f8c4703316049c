"""Views follow the log exactly once, resume where they stopped, and a view
built in one pass equals one built in chunks or by two followers at once."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing

import pytest

import turnlog.projections.runner as runner_module
from turnlog import ReplayError
from turnlog.domain.session import Session
from turnlog.projections.checkpoints import CheckpointProjection
from turnlog.projections.rebuild import default_projections
from turnlog.projections.runner import ProjectionRunner
from turnlog.projections.tables import ViewTables
from turnlog.projections.transcript import TranscriptProjection
from turnlog.store.log import Store


def projections() -> list:
    return default_projections()


def dump(runner: ProjectionRunner) -> dict:
    """Every row of the runner's views, keyed by (view, part) without the
    suffix that ``fresh_runner`` gave the view's name."""
    rows = {}
    for projection in runner.projections:
        view = projection.name.split("_")[0]
        for part in runner.tables.parts(projection.name):
            rows[(view, part)] = runner.tables.range(projection.name, part)
    return rows


def fresh_runner(url: str, view_suffix: str) -> tuple[Store, ProjectionRunner]:
    store = Store(url)
    views = projections()
    for view in views:
        view.name = f"{view.name}{view_suffix}"
    return store, ProjectionRunner(store, views)


def built_in_one_pass(url: str, view_suffix: str) -> dict:
    """``dump`` of the views built from the whole log by a fresh runner."""
    store, runner = fresh_runner(url, view_suffix)
    try:
        runner.catch_up()
        return dump(runner)
    finally:
        store.close()


def test_a_view_built_in_chunks_equals_one_built_in_one_pass(
    store_url: str, filled
) -> None:
    # Sessions long enough that the transcript files chunks across batches.
    filled(store_url, sessions=2, turns=12)
    one_store, one_pass = fresh_runner(store_url, "_one")
    chunk_store, chunked = fresh_runner(store_url, "_chunked")
    try:
        end = one_pass.catch_up()
        position = 0
        while position < end:
            position = chunked.catch_up(until=position + 7)
        views = dump(one_pass)
        filed = [key for key in views if key[0] == "transcript" and len(views[key]) > 2]
        assert filed, "no session filed two transcript chunks"
        assert views == dump(chunked)
    finally:
        one_store.close()
        chunk_store.close()


def test_catching_up_again_changes_nothing(sqlite_url: str, filled) -> None:
    filled(sqlite_url)
    store, runner = fresh_runner(sqlite_url, "_again")
    try:
        end = runner.catch_up()
        before = dump(runner)
        assert runner.catch_up() == end
        assert dump(runner) == before
    finally:
        store.close()


def test_a_restarted_follower_resumes_from_its_tracking_position(
    sqlite_url: str, filled
) -> None:
    filled(sqlite_url)
    store, runner = fresh_runner(sqlite_url, "_resume")
    reference_store, reference = fresh_runner(sqlite_url, "_reference")
    try:
        runner.catch_up(until=20)
        assert runner.position("checkpoints_resume") == 20
        store.close()
        store, runner = fresh_runner(sqlite_url, "_resume")
        assert runner.position("checkpoints_resume") == 20
        runner.catch_up()
        reference.catch_up()
        assert dump(runner) == dump(reference)
    finally:
        store.close()
        reference_store.close()


def test_two_followers_of_one_database_fold_each_event_once(
    store_url: str, filled
) -> None:
    filled(store_url, sessions=4, turns=2)
    first_store, first = fresh_runner(store_url, "")
    second_store, second = fresh_runner(store_url, "")
    reference_store, reference = fresh_runner(store_url, "_ref")
    try:
        threads = [
            threading.Thread(target=runner.catch_up) for runner in (first, second)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        reference.catch_up()
        assert dump(first) == dump(reference)
    finally:
        first_store.close()
        second_store.close()
        reference_store.close()


def test_a_new_fold_version_rebuilds_the_view_from_the_log(
    sqlite_url: str, filled
) -> None:
    filled(sqlite_url, sessions=1, turns=1)
    store, runner = fresh_runner(sqlite_url, "")
    runner.catch_up()
    store.close()

    class NextCheckpoints(CheckpointProjection):
        version = 99

    store = Store(sqlite_url)
    try:
        rebuilt = ProjectionRunner(store, [NextCheckpoints()])
        assert rebuilt.position("checkpoints") == 0
        end = rebuilt.catch_up()
        assert end == store.max_position()
        assert rebuilt.tables.get("checkpoints", "s0", 0)["turn_count"] == 1
    finally:
        store.close()


class Fussy(CheckpointProjection):
    """Checkpoints that cannot fold a UsageRecorded after log position
    ``after``: a poison event."""

    name = "fussy"

    def __init__(self, after: int) -> None:
        self.after = after

    def fold(self, rows, session_id, entries):
        for position, event in entries:
            if type(event).__name__ == "UsageRecorded" and position > self.after:
                raise ValueError("cannot digest this")
        super().fold(rows, session_id, entries)


def refusal(runner: ProjectionRunner) -> tuple[str, int]:
    """The ReplayError message a catch-up stops with, and the log position
    it names."""
    with pytest.raises(ReplayError) as raised:
        runner.catch_up()
    message = str(raised.value)
    return message, int(message.split("log entry ")[1].split(" ", maxsplit=1)[0])


def test_a_poison_event_stops_the_view_at_that_event_and_names_it(
    sqlite_url: str, filled
) -> None:
    filled(sqlite_url, sessions=1, turns=2)
    store = Store(sqlite_url)
    try:
        runner = ProjectionRunner(store, [Fussy(after=15)])
        message, poison = refusal(runner)
        assert "cannot digest this" in message
        assert f"view 'fussy' cannot fold log entry {poison} " in message
        assert "(turnlog:UsageRecorded)" in message
        # everything before the poison entry is in; the view and its tracking agree
        assert runner.position("fussy") == poison - 1
        assert runner.tables.tracking_of("fussy") == (poison - 1, Fussy.version)
        with pytest.raises(ReplayError):
            runner.catch_up()  # it stays stopped at that entry
        # the writer is not affected by a view that cannot fold
        fresh = Store(sqlite_url)
        try:
            fresh.save(
                Session.create(
                    "new",
                    agent_name="a",
                    agent_digest="d",
                    shared_state={},
                    model_route="r",
                )
            )
        finally:
            fresh.close()
    finally:
        store.close()


def test_a_batch_that_cannot_be_written_advances_no_view(
    sqlite_url: str, filled
) -> None:
    """Every view folded from one read commits together or not at all."""
    filled(sqlite_url, sessions=1, turns=1)

    class Unwritable(TranscriptProjection):
        name = "unwritable"

        def fold(self, rows, session_id, entries):
            rows.put(session_id, entries[0][0], {"not json": object()})

    store = Store(sqlite_url)
    try:
        checkpoints = CheckpointProjection()
        checkpoints.name = "checkpoints_fresh"
        runner = ProjectionRunner(store, [checkpoints, Unwritable()])
        with pytest.raises(TypeError):
            runner.catch_up()
        assert runner.tables.tracking_of("checkpoints_fresh")[0] == 0
        assert runner.tables.tracking_of("unwritable")[0] == 0
        assert runner.tables.parts("checkpoints_fresh") == []
        assert runner.position("checkpoints_fresh") == 0
    finally:
        store.close()


def test_a_runner_that_outgrows_its_cache_builds_the_same_views(
    sqlite_url: str, filled, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the cache limit a runner keeps only the last batch's documents and
    reads the rest back from its table: the views must not notice."""
    filled(sqlite_url, sessions=3, turns=12)
    expected = built_in_one_pass(sqlite_url, "_roomy")
    monkeypatch.setattr(runner_module, "CACHE_LIMIT", 2)
    tight_store, tight = fresh_runner(sqlite_url, "_tight")
    try:
        tight.batch_size = 5
        tight.catch_up()
        assert dump(tight) == expected
    finally:
        tight_store.close()


def test_a_fold_failure_before_an_undecodable_entry_is_the_one_named(
    sqlite_url: str, filled
) -> None:
    """Decoding comes first for the whole batch; the entry named must still
    be the first one the views cannot take, and all before it kept."""
    filled(sqlite_url, sessions=1, turns=2)
    with closing(sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))) as connection:
        connection.execute(
            "UPDATE stored_events SET topic = 'turnlog:SomethingFromTheFuture' "
            "WHERE rowid = (SELECT MAX(rowid) FROM stored_events)"
        )
        connection.commit()
    store = Store(sqlite_url)
    try:
        runner = ProjectionRunner(store, [Fussy(after=0)])
        message, poison = refusal(runner)
        assert "view 'fussy'" in message
        assert "(turnlog:UsageRecorded)" in message
        assert poison < store.max_position()
        assert runner.tables.tracking_of("fussy") == (poison - 1, Fussy.version)
    finally:
        store.close()


def test_views_from_turnlog_0_1_are_rebuilt_from_the_log(
    store_url: str, filled
) -> None:
    """Views of the 0.1 layout (documents filed by view name, tracking with
    no generation) are dropped on open and rebuilt from the log."""
    filled(store_url, sessions=2, turns=2)
    expected = built_in_one_pass(store_url, "_reference")
    store = Store(store_url)
    try:
        tables = ViewTables(store)
        prefix = tables.docs.removesuffix("turnlog_view_docs")
        blob = store.backend.blob_type
        with store.transaction() as cursor:
            cursor.execute(f"DROP TABLE {tables.docs}")
            cursor.execute(
                f"CREATE TABLE {prefix}turnlog_view_rows (view TEXT NOT NULL, "
                f"part TEXT NOT NULL, pos BIGINT NOT NULL, doc {blob} NOT NULL, "
                "PRIMARY KEY (view, part, pos))"
            )
            cursor.execute(
                store.sql(f"INSERT INTO {prefix}turnlog_view_rows VALUES (?, ?, ?, ?)"),
                ("checkpoints", "s0", 0, b'{"session_id": "s0", "turn_count": 99}'),
            )
            cursor.execute(f"ALTER TABLE {tables.tracking} DROP COLUMN generation")
    finally:
        store.close()
    store, runner = fresh_runner(store_url, "")
    try:
        assert all(runner.position(p.name) == 0 for p in runner.projections)
        runner.catch_up()
        assert dump(runner) == expected
        assert runner.tables.tracking_row("checkpoints").generation != 0
        with (
            store.datastore.transaction(commit=False) as cursor,
            pytest.raises(Exception, match="turnlog_view_rows"),
        ):
            cursor.execute(f"SELECT * FROM {prefix}turnlog_view_rows")
    finally:
        store.close()
