"""One live writer per session, across processes (leases in the log's database)."""

from __future__ import annotations

import pickle
import socket
import time

import pytest

from turnlog import Agent, Runtime, ScriptedModel, SessionBusyError
from turnlog.store.ownership import LEASE_SECONDS


def agent(*answers: str) -> Agent:
    return Agent("a", model=ScriptedModel(list(answers)))


def test_a_session_open_in_one_runtime_is_refused_by_another(store_url: str) -> None:
    with Runtime.open(store_url) as first:
        session = first.create_session(agent("one"), session_id="owned")
        session.prompt("hi", timeout=10)
        with Runtime.open(store_url) as second:
            position = second.store.max_position()
            with pytest.raises(SessionBusyError, match="open in another process"):
                second.create_session(agent("two"), session_id="owned")
            assert second.store.max_position() == position
            # other sessions are free to open meanwhile
            other = second.create_session(agent("three"), session_id="free")
            assert other.prompt("hi", timeout=10).final_output == "three"
        assert session.prompt("again", timeout=10).status == "failed"  # script ran out
    with Runtime.open(store_url) as third:
        reopened = third.create_session(agent("four"), session_id="owned")
        assert reopened.prompt("back", timeout=10).final_output == "four"


def test_a_lease_of_a_process_that_is_gone_is_taken_over(sqlite_url: str) -> None:
    with Runtime.open(sqlite_url) as rt:
        ownership = rt.ownership
        dead = f"{socket.gethostname()}:999999999:deadbeef"
        with rt.store.transaction() as cursor:
            cursor.execute(
                f"INSERT INTO {ownership.table} (session_id, owner, renewed)"
                " VALUES (?, ?, ?)",
                ("orphan", dead, time.time()),
            )
        session = rt.create_session(agent("taken over"), session_id="orphan")
        assert session.prompt("hi", timeout=10).final_output == "taken over"


def test_an_expired_lease_of_another_host_is_taken_over(sqlite_url: str) -> None:
    with Runtime.open(sqlite_url) as rt:
        table = rt.ownership.table
        with rt.store.transaction() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (session_id, owner, renewed) VALUES (?, ?, ?)",
                ("stale", "elsewhere:1:x", time.time() - LEASE_SECONDS - 1),
            )
            cursor.execute(
                f"INSERT INTO {table} (session_id, owner, renewed) VALUES (?, ?, ?)",
                ("fresh", "elsewhere:1:x", time.time()),
            )
        rt.create_session(agent(), session_id="stale")
        with pytest.raises(SessionBusyError):
            rt.create_session(agent(), session_id="fresh")


def test_a_refusal_says_when_the_holders_lease_runs_out(sqlite_url: str) -> None:
    with Runtime.open(sqlite_url) as rt:
        renewed = time.time() - 10  # renewed 10 s ago, on another host
        with rt.store.transaction() as cursor:
            cursor.execute(
                f"INSERT INTO {rt.ownership.table} (session_id, owner, renewed)"
                " VALUES (?, ?, ?)",
                ("held", "elsewhere:1:x", renewed),
            )
        with pytest.raises(SessionBusyError, match="unless renewed") as refused:
            rt.create_session(agent(), session_id="held")
        expected = renewed + LEASE_SECONDS - time.time()
        retry_after = refused.value.retry_after
        assert retry_after is not None
        assert expected <= retry_after <= LEASE_SECONDS - 10 + 1
        # It survives the trip through a future or to another process.
        again = pickle.loads(pickle.dumps(refused.value))
        assert (str(again), again.retry_after) == (str(refused.value), retry_after)
