"""The one reader of a session's history: every aggregate, few queries.

Exporting, verifying, following and reopening a session all read through
``turnlog.store.history.SessionHistory``; these tests pin what it reads
and what it costs.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.domain.protocol import SessionClosedMsg, TurnCompletedMsg
from turnlog.projections.follower import SessionFollower
from turnlog.store.history import SessionHistory, StoredRow
from turnlog.store.log import Store

TURNS = 12


def fill(url: str) -> None:
    """Session "s" with ``TURNS`` turns, then closed; session "o" with one."""
    with Runtime.open(url) as rt:
        model = ScriptedModel([f"answer {n}" for n in range(TURNS)])
        session = rt.create_session(Agent("a", model=model), session_id="s")
        other = rt.create_session(
            Agent("a", model=ScriptedModel(["x"])), session_id="o"
        )
        for n in range(TURNS):
            session.prompt(f"question {n}", timeout=10)
        other.prompt("hello", timeout=10)
        session.close()


class CountingStore(Store):
    """A Store that counts its reads of stored rows and of aggregates."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.reads = 0

    def stored_rows(self, aggregate_ids: Sequence[uuid.UUID]) -> list[StoredRow]:
        self.reads += 1
        return super().stored_rows(aggregate_ids)

    def events(self, aggregate_id: uuid.UUID, *, gt: int | None = None) -> list:
        self.reads += 1
        return super().events(aggregate_id, gt=gt)

    def get(self, aggregate_id: uuid.UUID):
        self.reads += 1
        return super().get(aggregate_id)


def test_rows_are_the_session_and_each_of_its_turns_in_log_order(
    store_url: str,
) -> None:
    fill(store_url)
    store = Store(store_url)
    try:
        ids = [session_uuid("s")] + [turn_uuid("s", n) for n in range(1, TURNS + 1)]
        expected = sorted(store.stored_rows(ids))
        rows = SessionHistory(store).rows("s")
        assert rows == expected
        assert {row[1] for row in rows} == set(ids)  # nothing of session "o"
        assert SessionHistory(store).rows("nobody") == []
    finally:
        store.close()


def test_turn_events_are_those_turns_turn_by_turn(sqlite_url: str) -> None:
    fill(sqlite_url)
    store = Store(sqlite_url)
    try:
        events = SessionHistory(store).turn_events("s", 3, 5)
        expected = [
            event for n in range(3, 6) for event in store.events(turn_uuid("s", n))
        ]
        assert [(e.originator_id, e.originator_version) for e in events] == [
            (e.originator_id, e.originator_version) for e in expected
        ]
    finally:
        store.close()


def test_following_a_long_session_reads_its_history_in_a_few_queries(
    sqlite_url: str,
) -> None:
    # Each turn read on its own made opening a follower cost a query a
    # turn; the history is read a batch of turns at a time.
    fill(sqlite_url)
    store = CountingStore(sqlite_url)
    try:
        follower = SessionFollower(store, "s")
        assert store.reads <= 3
        with follower:
            events = list(follower)
        assert isinstance(events[-1].msg, SessionClosedMsg)
        sequences = [e.sequence for e in events]
        assert sequences == sorted(sequences)
        assert sum(isinstance(e.msg, TurnCompletedMsg) for e in events) == TURNS
    finally:
        store.close()


@pytest.mark.parametrize("first", [1, 7])
def test_reopening_folds_the_same_context_as_the_log_holds(
    sqlite_url: str, first: int
) -> None:
    from turnlog.domain.context import fold_context

    fill(sqlite_url)
    store = Store(sqlite_url)
    try:
        folded = fold_context(SessionHistory(store).turn_events("s", first, TURNS))
        by_turn: list = []
        for n in range(first, TURNS + 1):
            fold_context(store.events(turn_uuid("s", n)), by_turn)
        assert folded == by_turn
        assert len(folded) == 2 * (TURNS - first + 1)
    finally:
        store.close()
