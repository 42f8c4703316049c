"""Transcript pages list exactly a session's events, across chunk boundaries.

The transcript view files positions in chunks of ``CHUNK``; these tests use
sessions several chunks long and compare every page with the session's
events read straight from the log.
"""

from __future__ import annotations

import pytest

from turnlog import Runtime
from turnlog.projections.rows import session_of
from turnlog.projections.transcript import CHUNK
from turnlog.store.log import Store


def positions_in_log(url: str) -> dict[str, list[int]]:
    """Every session's log positions, read and decoded entry by entry."""
    store = Store(url)
    try:
        sessions: dict[str, list[int]] = {}
        for notification in store.notifications(1, store.max_position()):
            session_id = session_of(store.decode(notification))
            if session_id is not None:
                sessions.setdefault(session_id, []).append(notification.id)
        return sessions
    finally:
        store.close()


@pytest.fixture
def long_sessions(store_url: str, filled) -> dict[str, list[int]]:
    """Two sessions of 14 tool-calling turns: several chunks each."""
    filled(store_url, sessions=2, turns=14)
    expected = positions_in_log(store_url)
    assert all(len(positions) > 2 * CHUNK for positions in expected.values())
    return expected


def test_pages_match_the_log_before_every_position(
    store_url: str, long_sessions: dict[str, list[int]]
) -> None:
    with Runtime.open(store_url) as rt:
        for session_id, positions in long_sessions.items():
            befores = [None, positions[0], positions[-1] + 1, *positions[1::5]]
            for before in befores:
                older = [p for p in positions if before is None or p < before]
                for size in (1, 7, CHUNK - 1, CHUNK, CHUNK + 1, 1000):
                    page = rt.transcript.page(
                        session_id, before_position=before, max_batches=size
                    )
                    assert [item.position for item in page.items] == older[-size:]
                    assert page.has_more == (len(older) > size)


def test_paging_back_from_the_newest_item_visits_every_event_once(
    store_url: str, long_sessions: dict[str, list[int]]
) -> None:
    with Runtime.open(store_url) as rt:
        for session_id, positions in long_sessions.items():
            seen: list[int] = []
            before = None
            while True:
                page = rt.transcript.page(session_id, before, max_batches=10)
                seen[:0] = [item.position for item in page.items]
                before = page.next_before
                if before is None:
                    break
            assert seen == positions


def test_all_from_any_position_lists_the_rest_of_the_session(
    store_url: str, long_sessions: dict[str, list[int]]
) -> None:
    with Runtime.open(store_url) as rt:
        for session_id, positions in long_sessions.items():
            starts = [0, *positions[::3], positions[-1], positions[-1] + 1]
            for start in starts:
                items = rt.transcript.all(session_id, from_position=start)
                assert [item.position for item in items] == [
                    p for p in positions if p >= start
                ]
