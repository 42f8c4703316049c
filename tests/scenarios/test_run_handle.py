"""The run handle steers, follows up and interrupts its own run only
(README, "Steering"; issue 23, item 3)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from turnlog import (
    Agent,
    Middleware,
    RunEndedError,
    Runtime,
    ScriptedModel,
    UsageError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.testing import HeldModel


def user_texts(request: Any) -> list[str]:
    return [
        item["content"]
        for item in request.items
        if item.get("type") == "message" and item.get("role") == "user"
    ]


def test_the_handle_steers_and_follows_up_on_its_run(store_url: str) -> None:
    entered, release = threading.Event(), threading.Event()

    @function_tool
    def slow() -> str:
        """Blocks until the test releases it."""
        entered.set()
        assert release.wait(10)
        return "slow done"

    model = ScriptedModel([calls(tool_call("slow", call_id="c1")), "one", "two"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[slow]), session_id="handle"
        )
        results: list[Any] = []
        worker = threading.Thread(
            target=lambda: results.append(session.prompt("go", timeout=20))
        )
        worker.start()
        assert entered.wait(10)
        handle = session.active_run_handle()
        assert handle is not None
        steer_id = handle.steer("mind the tests")
        follow_id = handle.follow_up("then summarise")
        assert [q.submission_id for q in session.queued()] == [steer_id, follow_id]
        release.set()
        worker.join(20)
        result = results[0]
        assert result.submission_id == handle.submission_id
        # The steer reached the running turn's next step; the follow-up ran
        # as a second turn of the same run.
        assert user_texts(model.requests[1])[-1] == "mind the tests"
        assert user_texts(model.requests[2])[-1] == "then summarise"
        assert len(result.turn_ids) == 2
        assert result.final_output == "two"


@pytest.mark.parametrize(
    "call",
    [
        lambda handle: handle.steer("too late"),
        lambda handle: handle.follow_up("too late"),
        lambda handle: handle.interrupt(),
    ],
    ids=["steer", "follow_up", "interrupt"],
)
def test_the_handle_of_an_ended_run_refuses_and_records_nothing(
    store_url: str, call: Any
) -> None:
    held = HeldModel(ScriptedModel(["first", "second"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=held), session_id="ended")
        results: list[Any] = []
        worker = threading.Thread(
            target=lambda: results.append(session.prompt("go", timeout=20))
        )
        worker.start()
        assert held.entered.wait(10)
        handle = session.active_run_handle()
        assert handle is not None
        held.release()
        worker.join(20)
        assert results[0].final_output == "first"
        before = len(list(rt.replay_events("ended")))
        with pytest.raises(RunEndedError, match=handle.submission_id) as refused:
            call(handle)
        assert isinstance(refused.value, UsageError)
        assert "ended" in str(refused.value)
        assert session.queued() == []
        assert len(list(rt.replay_events("ended"))) == before
        # Nor does it reach a later run of the session.
        later = session.prompt("again", timeout=20)
        assert later.final_output == "second"
        with pytest.raises(RunEndedError):
            call(handle)
        kinds = [type(e.msg) for e in rt.replay_events("ended")]
        assert p.InputQueuedMsg not in kinds
        assert p.TurnAbortedMsg not in kinds


class HeldReview(Middleware):
    """A user_prompt hook that holds follow-ups under review until told."""

    def __init__(self) -> None:
        self.reviewing, self.go = threading.Event(), threading.Event()

    def user_prompt(self, info: Any) -> None:
        if info.kind == "follow_up":
            self.reviewing.set()
            assert self.go.wait(10)


def test_a_follow_up_whose_run_ended_under_review_is_refused(store_url: str) -> None:
    hook = HeldReview()
    held = HeldModel(ScriptedModel(["first"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=held, middleware=[hook]), session_id="late"
        )
        results: list[Any] = []
        worker = threading.Thread(
            target=lambda: results.append(session.prompt("go", timeout=20))
        )
        worker.start()
        assert held.entered.wait(10)
        handle = session.active_run_handle()
        assert handle is not None
        refused: list[BaseException] = []

        def follow_up() -> None:
            try:
                handle.follow_up("too late by the time it is accepted")
            except RunEndedError as error:
                refused.append(error)

        asking = threading.Thread(target=follow_up)
        asking.start()
        assert hook.reviewing.wait(10)
        held.release()
        worker.join(20)  # the run ended while the hook reviewed the input
        assert results[0].final_output == "first"
        hook.go.set()
        asking.join(20)
        assert len(refused) == 1
        assert session.queued() == []
