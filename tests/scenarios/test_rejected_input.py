"""Input a user_prompt hook rejects is stored nowhere, however it arrives."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing

import pytest

from turnlog import (
    Agent,
    HookResult,
    InputRejectedError,
    Middleware,
    RunFinished,
    Runtime,
    ScriptedModel,
)
from turnlog.events import WarningRaisedMsg
from turnlog.testing import HeldModel, wait_for

MARKER = "sekrit-7f3a9c"


class RejectMarked(Middleware):
    """Rejects any input carrying the marker; records what it reviewed."""

    def __init__(self) -> None:
        self.reviewed: list[tuple[str, str | None]] = []

    def user_prompt(self, info):
        self.reviewed.append((info.kind, info.turn_id))
        if MARKER in info.text:
            return HookResult.reject_prompt("marked input is refused")
        return HookResult.add_context(f"reviewed {info.kind}")


def tables_holding(database: str, marker: str) -> list[str]:
    """The tables of the SQLite file with the marker's bytes in any row."""
    needle = marker.encode()
    found = []
    with closing(sqlite3.connect(database)) as connection:
        tables = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type='table'"
            )
        ]
        for table in tables:
            for row in connection.execute(f"SELECT * FROM {table}"):
                cells = [c if isinstance(c, bytes) else str(c).encode() for c in row]
                if any(needle in cell for cell in cells):
                    found.append(table)
                    break
    return found


def test_rejected_input_leaves_no_byte_in_any_table(rt: Runtime) -> None:
    hook = RejectMarked()
    model = HeldModel(ScriptedModel(["first", "second", "third"]))
    session = rt.create_session(
        Agent("a", model=model, middleware=[hook]), session_id="guarded"
    )
    refused = session.prompt(f"prompt {MARKER}", timeout=30)
    assert (refused.status, refused.error) == ("aborted", "marked input is refused")

    results: list = []
    worker = threading.Thread(
        target=lambda: results.append(session.prompt("go", timeout=30))
    )
    worker.start()
    assert model.entered.wait(10)  # a turn runs: what follows is queued input
    with pytest.raises(InputRejectedError, match="marked input is refused"):
        session.follow_up(f"follow-up {MARKER}")
    with pytest.raises(InputRejectedError):
        session.steer(f"steer {MARKER}")
    with pytest.raises(InputRejectedError):
        session.send_input(f"peer {MARKER}")
    accepted = session.follow_up("then this")
    # Accepted queued input is recorded before follow_up returns.
    assert [q.submission_id for q in session.queued()] == [accepted]
    model.release()
    worker.join(30)
    assert results[0].completed
    assert results[0].final_output == "second"  # the follow-up ran behind "go"
    assert tables_holding(rt.store.location, MARKER) == []
    assert tables_holding(rt.store.location, "then this") != []  # the scan works
    kinds = [kind for kind, _ in hook.reviewed]
    assert kinds == ["prompt", "prompt", "follow_up", "steer", "peer", "follow_up"]
    # Queued input is reviewed before its turn exists; each is reviewed once.
    assert [turn for kind, turn in hook.reviewed[2:]] == [None] * 4
    contexts = [m for m in model.inner.requests[1].items if "reviewed follow" in str(m)]
    assert len(contexts) == 1  # the follow-up's hook context reached the model


def test_a_queued_submission_runs_even_if_the_run_ended_during_review(
    rt: Runtime,
) -> None:
    release = threading.Event()
    entered = threading.Event()

    class SlowOnPeers(Middleware):
        def user_prompt(self, info):
            if info.kind == "peer":
                entered.set()
                release.wait(10)

    model = HeldModel(ScriptedModel(["first", "peer answered"]))
    session = rt.create_session(
        Agent("a", model=model, middleware=[SlowOnPeers()]), session_id="late"
    )
    worker = threading.Thread(target=lambda: session.prompt("go", timeout=30))
    worker.start()
    assert model.entered.wait(10)
    sent: list[str] = []
    sender = threading.Thread(target=lambda: sent.append(session.send_input("hi")))
    sender.start()
    assert entered.wait(10)
    events = session.subscribe()
    model.release()
    worker.join(30)  # the first run ended while the peer input was reviewed
    release.set()
    sender.join(30)

    finished, _ = wait_for(
        events,
        lambda m: isinstance(m, RunFinished) and m.result.submission_id == sent[0],
    )
    assert finished.result.submission_id == sent[0]
    assert finished.result.final_output == "peer answered"


def test_a_stop_from_the_review_of_queued_input_applies_when_it_runs(
    rt: Runtime,
) -> None:
    class StopFollowUps(Middleware):
        def user_prompt(self, info):
            if info.kind == "follow_up":
                return HookResult.stop_turn("follow-ups wait for a human")
            return None

    model = HeldModel(ScriptedModel(["first"]))
    session = rt.create_session(
        Agent("a", model=model, middleware=[StopFollowUps()]), session_id="stop"
    )
    results: list = []
    worker = threading.Thread(
        target=lambda: results.append(session.prompt("go", timeout=30))
    )
    worker.start()
    assert model.entered.wait(10)
    session.follow_up("and then?")
    model.release()
    worker.join(30)
    assert results[0].completed
    assert len(results[0].turn_ids) == 2  # the follow-up's turn ran, and stopped
    assert model.calls == 1  # no model call for it
    warnings = [
        e.msg.message
        for e in rt.replay_events("stop")
        if isinstance(e.msg, WarningRaisedMsg)
    ]
    assert warnings == ["follow-ups wait for a human"]
