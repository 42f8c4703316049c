"""A log written by a newer turnlog is refused clearly, and nothing changes."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from uuid import UUID

import pytest

from turnlog import Agent, ReplayError, Runtime, ScriptedModel
from turnlog.projections.readers import TranscriptItem


def make_log(url: str) -> Path:
    with Runtime.open(url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["hi"])), session_id="s"
        )
        session.prompt("hello", timeout=10)
    return Path(url.removeprefix("sqlite:///"))


def count_events(db: Path) -> int:
    with closing(sqlite3.connect(db)) as connection:
        return int(
            connection.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0]
        )


def rewrite(db: Path, topic: str, edit) -> None:
    with closing(sqlite3.connect(db)) as connection:
        rowid, state = connection.execute(
            "SELECT rowid, state FROM stored_events WHERE topic = ?", (topic,)
        ).fetchone()
        new_topic, new_state = edit(topic, state)
        connection.execute(
            "UPDATE stored_events SET topic = ?, state = ? WHERE rowid = ?",
            (new_topic, new_state, rowid),
        )
        connection.commit()


@pytest.mark.parametrize(
    ("edit", "complaint"),
    [
        (
            lambda topic, state: (
                topic,
                state.replace(b"{", b'{"class_version":7,', 1),
            ),
            "has class version 7; this turnlog reads up to 1: upgrade turnlog",
        ),
        (
            lambda topic, state: ("turnlog:SomethingFromTheFuture", state),
            "unknown event 'turnlog:SomethingFromTheFuture'",
        ),
    ],
)
def test_an_event_from_a_newer_turnlog_is_refused(
    sqlite_url: str, edit, complaint: str
) -> None:
    db = make_log(sqlite_url)
    rewrite(db, "turnlog:TurnStarted", edit)
    before = count_events(db)
    with Runtime.open(sqlite_url) as rt:
        agent = Agent("a", model=ScriptedModel(["again"]))
        with pytest.raises(ReplayError, match=complaint):
            rt.create_session(agent, session_id="s")
        with pytest.raises(ReplayError, match=complaint):
            rt.replay_events("s")
    assert count_events(db) == before  # the refused opening appended nothing


def test_a_transcript_item_from_a_newer_turnlog_is_refused(sqlite_url: str) -> None:
    # The views' items decode with the store's own guarded mapper, so an
    # event a newer turnlog wrote is refused there too, not half-read.
    db = make_log(sqlite_url)
    rewrite(
        db,
        "turnlog:TurnStarted",
        lambda topic, state: (
            topic,
            state.replace(b"{", b'{"class_version":7,', 1),
        ),
    )
    with closing(sqlite3.connect(db)) as connection:
        row = connection.execute(
            "SELECT rowid, originator_id, originator_version, topic, state "
            "FROM stored_events WHERE topic = 'turnlog:TurnStarted'"
        ).fetchone()
    position, originator, version, topic, state = row
    item = TranscriptItem(position, topic, str(UUID(originator)), version, state)
    with pytest.raises(ReplayError, match="has class version 7; this turnlog reads"):
        item.event()
