"""Offline rebuilds: equal to the live views, blue/green, resumable, verifiable."""

from __future__ import annotations

import pytest

from turnlog import (
    Agent,
    Runtime,
    ScriptedModel,
    UsageError,
)
from turnlog.projections.rebuild import NEXT_SUFFIX, rebuild
from turnlog.projections.tables import ViewTables
from turnlog.store.log import Store


def snapshot(url: str) -> dict:
    store = Store(url)
    try:
        tables = ViewTables(store)
        return {
            (view, part): tables.range(view, part)
            for view in ("checkpoints", "transcript", "executions", "sessions")
            for part in tables.parts(view)
        }
    finally:
        store.close()


def test_a_rebuild_equals_the_live_views(store_url: str, filled) -> None:
    filled(store_url)
    live = snapshot(store_url)
    store = Store(store_url)
    try:
        reports = rebuild(store)
    finally:
        store.close()
    assert [(r.view, r.swapped) for r in reports] == [
        ("checkpoints", True),
        ("transcript", True),
        ("executions", True),
        ("sessions", True),
    ]
    assert snapshot(store_url) == live


def test_verify_names_a_corrupted_document_and_a_rebuild_repairs_it(
    sqlite_url: str, filled
) -> None:
    filled(sqlite_url, sessions=2, turns=1)
    store = Store(sqlite_url)
    try:
        assert all(r.differences == [] for r in rebuild(store, verify=True))
        tables = ViewTables(store)
        with store.transaction() as cursor:
            cursor.execute(
                f"UPDATE {tables.docs} SET doc = ? "
                f"WHERE gen = {store.backend.tables.generation_of} AND part = 's1'",
                (b'{"session_id": "s1", "turn_count": 99}', "checkpoints"),
            )
        (report,) = rebuild(store, ["checkpoints"], verify=True)
        assert not report.swapped
        ((difference),) = report.differences
        assert (difference.part, difference.live["turn_count"]) == ("s1", 99)
        assert difference.rebuilt["turn_count"] == 1
        assert tables.parts("checkpoints" + NEXT_SUFFIX) == []  # nothing left behind
        rebuild(store, ["checkpoints"])
        assert tables.get("checkpoints", "s1", 0)["turn_count"] == 1
    finally:
        store.close()


def test_an_interrupted_rebuild_resumes_where_it_stopped(
    sqlite_url: str, filled
) -> None:
    filled(sqlite_url)
    live = snapshot(sqlite_url)
    store = Store(sqlite_url)
    batches: list[int] = []

    def stop_after_two(progress) -> None:
        batches.append(progress.done)
        if len(batches) == 2:
            raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            rebuild(store, ["transcript"], progress=stop_after_two, batch=10)
        tables = ViewTables(store)
        assert tables.tracking_of("transcript" + NEXT_SUFFIX)[0] == batches[-1]
        (report,) = rebuild(store, ["transcript"], batch=10)
        assert report.events == store.max_position() - batches[-1]
    finally:
        store.close()
    assert snapshot(sqlite_url) == live


def test_a_live_runtime_keeps_serving_across_a_swap(sqlite_url: str) -> None:
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["one", "two"])), session_id="live"
        )
        session.prompt("first", timeout=10)
        assert rt.checkpoints.load("live").turn_count == 1
        other = Store(sqlite_url)
        try:
            rebuild(other)
        finally:
            other.close()
        session.prompt("second", timeout=10)
        checkpoint = rt.checkpoints.load("live")
        assert checkpoint.turn_count == 2
        assert [m.content for m in checkpoint.messages()] == [
            "first",
            "one",
            "second",
            "two",
        ]


def test_a_repair_swapped_in_is_not_overwritten_by_a_live_runtime(
    sqlite_url: str,
) -> None:
    """A live runtime that read a damaged document before a rebuild must not
    write it back over the repaired view after the swap, even when both
    stand at the same log position."""
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["one", "two", "three"])),
            session_id="live",
        )
        session.prompt("first", timeout=10)
    store = Store(sqlite_url)
    try:
        tables = ViewTables(store)
        with store.transaction() as cursor:
            # Damage a field that only SessionCreated sets.
            cursor.execute(
                f"UPDATE {tables.docs} SET doc = CAST(replace(doc, '\"a\"', "
                f"'\"forged\"') AS BLOB) WHERE gen = "
                f"{store.backend.tables.generation_of} AND part = 'live'",
                ("checkpoints",),
            )
    finally:
        store.close()
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["two", "three"])), session_id="live"
        )
        session.prompt("second", timeout=10)  # the runtime reads the damage
        assert rt.checkpoints.load("live").agent_name == "forged"
        other = Store(sqlite_url)
        try:
            rebuild(other)
        finally:
            other.close()
        assert rt.checkpoints.load("live").agent_name == "a"  # repaired
        session.prompt("third", timeout=10)
        checkpoint = rt.checkpoints.load("live")
        assert checkpoint.turn_count == 3
        assert checkpoint.agent_name == "a"


def test_an_unknown_view_is_refused(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    try:
        with pytest.raises(
            UsageError, match="views: checkpoints, executions, sessions, transcript"
        ):
            rebuild(store, ["nope"])
    finally:
        store.close()
