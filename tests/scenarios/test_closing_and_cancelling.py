"""Close and cancel keep their word (issue 23, item 4), on every store.

close() drops queued input (recorded), a subscriber that comes after the
close is told at once, a running turn either finishes first or is
interrupted, cancelling the task that awaits prompt_async interrupts its
run unless the caller detached it, and an approval provider that fails
has decided nothing: the tool does not run and the turn fails.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    RunConfig,
    RunEvent,
    RunFinished,
    Runtime,
    ScriptedModel,
    SessionClosedError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.testing import HeldModel, wait_for


def names(rt: Runtime, session_id: str) -> list[str]:
    return [type(e.msg).__name__ for e in rt.replay_events(session_id)]


def start(session, text: str) -> tuple[threading.Thread, list]:
    results: list = []
    worker = threading.Thread(
        target=lambda: results.append(session.prompt(text, timeout=10))
    )
    worker.start()
    return worker, results


def test_close_drops_queued_input_recorded_and_it_stays_dropped(
    store_url: str,
) -> None:
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["never"])), session_id="s"
        )
        first = session.follow_up("later")  # an idle session queues it
        second = session.follow_up("and this")
        assert [q.text for q in session.queued()] == ["later", "and this"]
        session.close()
        assert session.queued() == []
        dropped = [
            e.msg
            for e in rt.replay_events("s")
            if isinstance(e.msg, p.QueuedInputDroppedMsg)
        ]
        assert [(d.submission_ids, d.reason) for d in dropped] == [
            ([first, second], "session closed")
        ]
        assert names(rt, "s")[-2:] == ["QueuedInputDroppedMsg", "SessionClosedMsg"]
    with Runtime.open(store_url) as rt:  # the log says so after a restart
        assert names(rt, "s")[-2:] == ["QueuedInputDroppedMsg", "SessionClosedMsg"]
        stored = rt.store.get_session("s")
        assert stored is not None
        assert stored.queued == ()  # empty (session_snapshot.EMPTY_AS_TUPLE)
        assert stored.closed


def test_a_subscriber_after_close_is_told_at_once_and_ends(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["hi"])), session_id="s"
        )
        session.prompt("hello", timeout=10)
        session.close()
        closed = list(rt.replay_events("s"))[-1]
        late = session.subscribe()
        item = late.get(timeout=5)  # a regression times out here, never hangs
        assert isinstance(item, RunEvent)
        assert item.event == closed
        with pytest.raises(SessionClosedError):
            late.get(timeout=5)
        # Iteration ends too (in a thread, so a regression fails the join).
        seen: list = []
        reader = threading.Thread(target=lambda: seen.extend(session.subscribe()))
        reader.start()
        reader.join(10)
        assert not reader.is_alive()
        assert [type(i.event.msg).__name__ for i in seen] == ["SessionClosedMsg"]


def test_a_subscriber_of_a_closed_passivated_session_is_told_at_once(
    store_url: str,
) -> None:
    config = RunConfig(idle_timeout=0.01)
    with Runtime.open(store_url, run_config=config) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["hi"])), session_id="s"
        )
        session.close()
        assert session.wait_passivated(10)
        late = session.subscribe()
        item = late.get(timeout=5)
        assert isinstance(item, RunEvent)
        assert isinstance(item.event.msg, p.SessionClosedMsg)
        assert item.event == list(rt.replay_events("s"))[-1]
        with pytest.raises(SessionClosedError):
            late.get(timeout=5)


def test_close_lets_the_running_turn_finish_then_closes(store_url: str) -> None:
    held = HeldModel(ScriptedModel(["last words", "never"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=held), session_id="s")
        events = session.subscribe()
        worker, results = start(session, "finish this")
        assert held.entered.wait(10)
        queued = session.follow_up("never runs")
        with pytest.raises(TimeoutError):
            session.close(timeout=0)  # the turn is held: it cannot have ended
        position = rt.store.max_position()
        with pytest.raises(SessionClosedError, match="closing"):
            session.follow_up("too late")
        with pytest.raises(SessionClosedError, match="closing"):
            session.steer("too late")
        assert rt.store.max_position() == position  # refused, recorded nowhere
        held.release()
        worker.join(10)
        assert results[0].status == "completed"
        assert results[0].final_output == "last words"
        wait_for(events, lambda m: isinstance(m, p.SessionClosedMsg))
        assert names(rt, "s")[-3:] == [
            "TurnCompletedMsg",
            "QueuedInputDroppedMsg",
            "SessionClosedMsg",
        ]
        dropped = [
            e.msg
            for e in rt.replay_events("s")
            if isinstance(e.msg, p.QueuedInputDroppedMsg)
        ]
        assert dropped[0].submission_ids == [queued]
        assert held.calls == 1  # the queued follow-up never ran
        assert session.queued() == []
        with pytest.raises(SessionClosedError):
            session.close()


def test_close_waits_for_the_turn_from_another_thread(store_url: str) -> None:
    held = HeldModel(ScriptedModel(["done"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=held), session_id="s")
        worker, results = start(session, "go")
        assert held.entered.wait(10)
        closed = threading.Event()

        def close() -> None:
            session.close(timeout=10)
            closed.set()

        closer = threading.Thread(target=close)
        closer.start()
        held.release()
        closer.join(10)
        worker.join(10)
        assert closed.is_set()
        assert results[0].final_output == "done"
        # close() returned once the close was recorded
        assert names(rt, "s")[-2:] == ["TurnCompletedMsg", "SessionClosedMsg"]


def test_close_with_abort_interrupts_the_running_turn(store_url: str) -> None:
    held = HeldModel(ScriptedModel(["never"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=held), session_id="s")
        worker, results = start(session, "long job")
        assert held.entered.wait(10)
        session.follow_up("never runs either")
        session.close(abort=True)  # returns closed: no release needed
        worker.join(10)
        assert results[0].status == "aborted"
        events = list(rt.replay_events("s"))
        aborted = [e.msg for e in events if isinstance(e.msg, p.TurnAbortedMsg)]
        assert [(a.reason, a.failed) for a in aborted] == [("interrupted", False)]
        assert names(rt, "s")[-3:] == [
            "TurnAbortedMsg",
            "QueuedInputDroppedMsg",
            "SessionClosedMsg",
        ]
        assert held.cancelled.wait(10)
        assert session.queued() == []
        assert not session.running()


def test_cancelling_prompt_async_interrupts_its_run(store_url: str) -> None:
    held = HeldModel(ScriptedModel(["never"]))

    async def scenario(rt: Runtime) -> None:
        session = rt.create_session(Agent("a", model=held), session_id="s")
        task = asyncio.create_task(session.prompt_async("long job"))
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        # The cancellation arrives once the interrupt is recorded.
        aborted = [
            e.msg for e in rt.replay_events("s") if isinstance(e.msg, p.TurnAbortedMsg)
        ]
        assert [(a.reason, a.failed) for a in aborted] == [("interrupted", False)]
        assert not await asyncio.to_thread(session.running)
        latest = await asyncio.to_thread(session.latest_run)
        assert latest is not None
        assert latest.status == "aborted"

    with Runtime.open(store_url) as rt:
        asyncio.run(scenario(rt))
    assert held.cancelled.wait(10)


def test_prompt_async_detached_on_cancel_runs_to_its_end(store_url: str) -> None:
    held = HeldModel(ScriptedModel(["finished anyway"]))

    async def scenario(rt: Runtime) -> RunFinished:
        session = rt.create_session(Agent("a", model=held), session_id="s")
        events = await asyncio.to_thread(session.subscribe)
        task = asyncio.create_task(
            session.prompt_async("long job", detach_on_cancel=True)
        )
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        held.release()
        finished, _ = await asyncio.to_thread(
            wait_for, events, lambda m: isinstance(m, RunFinished)
        )
        assert isinstance(finished, RunFinished)
        return finished

    with Runtime.open(store_url) as rt:
        finished = asyncio.run(scenario(rt))
        assert finished.result.final_output == "finished anyway"
        assert "TurnAbortedMsg" not in names(rt, "s")
        assert names(rt, "s")[-1] == "TurnCompletedMsg"
    assert not held.cancelled.is_set()


class FailingProvider:
    """An approval provider that fails instead of deciding."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.asked = 0

    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        self.asked += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (RuntimeError("policy service down"), "RuntimeError: policy service down"),
        ("yes", "it returned 'yes', not an ApprovalDecision or None"),
    ],
    ids=["raises", "returns-no-decision"],
)
def test_a_failing_approval_provider_fails_the_turn_and_the_tool_never_runs(
    store_url: str, answer: object, error: str
) -> None:
    ran: list[str] = []

    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploys."""
        ran.append(target)
        return f"deployed {target}"

    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "never"])
    provider = FailingProvider(answer)
    config = RunConfig(approval_provider=provider)
    with Runtime.open(store_url, run_config=config) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy]), session_id="s"
        )
        result = session.prompt("deploy it", timeout=10)
        assert result.status == "failed"
        assert result.error == f"approval provider failed: {error}"
        assert ran == []
        assert len(model.requests) == 1  # the model never saw a "denied" output
        events = [e.msg for e in rt.replay_events("s")]
        assert not any(isinstance(m, p.ApprovalDecidedMsg) for m in events)
        [failed] = [m for m in events if isinstance(m, p.ApprovalFailedMsg)]
        assert failed.error == error
        [finished] = [m for m in events if isinstance(m, p.ToolCallFinishedMsg)]
        assert finished.is_error
        assert not any(isinstance(m, p.ToolCallStartedMsg) for m in events)
        [aborted] = [m for m in events if isinstance(m, p.TurnAbortedMsg)]
        assert (aborted.reason, aborted.failed) == (result.error, True)
        checkpoint = rt.checkpoints.load("s")
        assert checkpoint is not None
        assert checkpoint.pending_approval is None
        assert provider.asked == 1


def test_a_session_closed_by_another_runtime_tells_subscribers_here(
    store_url: str,
) -> None:
    agent = Agent("a", model=ScriptedModel(["hi"]))
    with Runtime.open(store_url, run_config=RunConfig(idle_timeout=0.01)) as here:
        session = here.create_session(agent, session_id="s")
        assert session.wait_passivated(10)  # its lease is free for another
        waiting = session.subscribe()  # a passive session is not woken for it
        with Runtime.open(store_url) as there:
            there.create_session(agent, session_id="s").close()
        assert session.queued() == []  # revived here, from the log: closed
        closed = list(here.replay_events("s"))[-1]
        assert isinstance(closed.msg, p.SessionClosedMsg)
        for subscription in (waiting, session.subscribe()):
            item = subscription.get(timeout=5)
            assert isinstance(item, RunEvent)
            assert item.event == closed
            with pytest.raises(SessionClosedError):
                subscription.get(timeout=5)
