"""The sessions view keeps each session's chain head, and never lets it
move to a chain that does not follow on from it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from turnlog.domain.chain import CHAIN_FIELD, SEQ_FIELD
from turnlog.domain.session import SharedStateUpdated
from turnlog.projections.sessions import SessionIndexProjection, SessionSummary


class Docs(dict):
    def get(self, part: str, position: int) -> Any:  # type: ignore[override]
        return super().get((part, position))

    def put(self, part: str, position: int, doc: Any) -> None:
        self[(part, position)] = doc


def event(seq: int, chain: str) -> Any:
    made = SharedStateUpdated.__new__(SharedStateUpdated)
    object.__setattr__(made, "session_id", "s")
    object.__setattr__(made, "timestamp", datetime(2025, 1, 1, tzinfo=UTC))
    object.__setattr__(made, SEQ_FIELD, seq)
    object.__setattr__(made, CHAIN_FIELD, chain)
    return made


def head(docs: Docs) -> tuple[int, str, int]:
    summary: SessionSummary = docs.get("s", 0)
    return summary.head_seq, summary.head_sha256, summary.head_held_at


def test_the_head_follows_the_chain() -> None:
    docs, fold = Docs(), SessionIndexProjection().fold
    fold(docs, "s", [(1, event(1, "a")), (2, event(2, "b"))])
    fold(docs, "s", [(5, event(3, "c"))])
    assert head(docs) == (3, "c", 0)


def test_a_seq_that_steps_back_holds_the_head_where_it_was() -> None:
    docs, fold = Docs(), SessionIndexProjection().fold
    fold(docs, "s", [(1, event(1, "a")), (2, event(2, "b")), (3, event(3, "c"))])
    # events 2 and 3 were removed; the session went on from seq 1
    fold(docs, "s", [(4, event(2, "x")), (5, event(3, "y")), (6, event(4, "z"))])
    assert head(docs) == (3, "c", 4)


def test_a_seq_that_skips_ahead_holds_the_head_too() -> None:
    docs, fold = Docs(), SessionIndexProjection().fold
    fold(docs, "s", [(1, event(1, "a")), (3, event(3, "c")), (4, event(4, "d"))])
    assert head(docs) == (1, "a", 3)
