"""Opening a session the log does not hold yet: one commit, chained from nothing."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from turnlog import (
    Agent,
    ConcurrencyConflictError,
    Runtime,
    ScriptedModel,
    SessionBusyError,
)
from turnlog.domain.session import Session
from turnlog.store.log import Store
from turnlog.store.verify import verify_session


def agent(*answers: str) -> Agent:
    return Agent("a", model=ScriptedModel(list(answers)))


def count_event_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Records the aggregate id of every events-table read of ``store``."""
    recorder: Any = store._app.recorder
    reads: list[Any] = []
    select = recorder.select_events

    def counted(originator_id: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append(originator_id)
        return select(originator_id, *args, **kwargs)

    monkeypatch.setattr(recorder, "select_events", counted)
    return reads


def test_a_new_session_is_one_commit_and_no_read(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Runtime.open(store_url) as rt:
        reads = count_event_reads(rt.store, monkeypatch)
        acquired: list[str] = []
        acquire = rt.ownership.acquire
        monkeypatch.setattr(
            rt.ownership, "acquire", lambda sid: (acquired.append(sid), acquire(sid))
        )
        commits = rt.store._writer.commits
        session = rt.create_session(agent("hello"), session_id="brand-new")
        # Its first save takes the lease in the same transaction (a claim):
        # no lease transaction of its own, and no read to find that the log
        # has no such session (the save would clash if it had).
        assert (reads, acquired, rt.store._writer.commits - commits) == ([], [], 1)
        assert session.prompt("hi", timeout=10).final_output == "hello"
        report = verify_session(rt.store, "brand-new")
        assert report.problem is None
        assert report.events > 1


def test_a_session_in_the_log_is_leased_first_then_read(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        rt.create_session(agent("one"), session_id="kept").prompt("a", timeout=10)
    with Runtime.open(store_url) as rt:
        # Its claim clashes with the log and records nothing; the session
        # in the log is opened, under a lease of its own.
        before = rt.store.max_position()
        session = rt.create_session(agent("two"), session_id="kept")
        assert rt.store.max_position() == before
        assert session.prompt("b", timeout=10).final_output == "two"
        assert len(session.messages()) == 4
        assert verify_session(rt.store, "kept").problem is None


def test_a_session_created_twice_conflicts_and_the_log_keeps_the_first(
    store_url: str,
) -> None:
    with Runtime.open(store_url) as rt:
        rt.create_session(agent("first"), session_id="twice").prompt("a", timeout=10)
        store = rt.store
        before = store.max_position()
        # A second creation of the same id (a writer that skipped the
        # lease) is refused by the log, and records nothing.
        with pytest.raises(ConcurrencyConflictError):
            store.save(
                Session.create(
                    "twice",
                    agent_name="a",
                    agent_digest="x",
                    shared_state={},
                    model_route="default",
                )
            )
        assert store.max_position() == before
        again = rt.create_session(agent("unused"), session_id="twice")
        assert again.prompt("b", timeout=10).status == "failed"  # script ran out
        assert verify_session(store, "twice").problem is None


def test_two_runtimes_racing_to_create_one_session_leave_one_owner(
    store_url: str,
) -> None:
    with Runtime.open(store_url) as first, Runtime.open(store_url) as second:
        barrier = threading.Barrier(2)

        def create(rt: Runtime, answer: str) -> Any:
            barrier.wait(timeout=10)
            try:
                return rt.create_session(agent(answer), session_id="contested")
            except SessionBusyError as error:
                return error

        with ThreadPoolExecutor(2) as pool:
            outcomes = list(
                pool.map(create, [first, second], ["first", "second"], timeout=30)
            )
        won = [o for o in outcomes if not isinstance(o, SessionBusyError)]
        assert len(won) == 1
        answer = "first" if won[0] is outcomes[0] else "second"
        assert won[0].prompt("hi", timeout=10).final_output == answer
        report = verify_session(first.store, "contested")
        assert report.problem is None
        assert report.events == verify_session(second.store, "contested").events
