"""Passivation: an idle session gives back its thread and lease, and comes back.

Each test runs with a tiny ``idle_timeout`` and waits on what it can
observe (the runtime's count of live session actors, the lease table),
never for a fixed time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

import pykka
import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    InvalidInputError,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.domain.run import RunEvent, RunFinished
from turnlog.testing import HeldModel

TINY = RunConfig(idle_timeout=0.2)


def eventually(condition: Callable[[], bool], what: str, seconds: float = 10) -> None:
    """Waits for ``condition`` (polled: it is state, not an event we can await)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds} s")
        time.sleep(0.01)


def passivated(rt: Runtime) -> None:
    eventually(lambda: rt.live_sessions() == 0, "every session passivated")
    # The actor stops just after it lets go of the session.
    eventually(lambda: session_actors() == 0, "every session actor stopped")


def first_approval_request(events: Iterable[object]) -> p.ApprovalRequestedMsg:
    """The first approval request a subscription reports."""
    return next(
        item.event.msg
        for item in events
        if isinstance(item, RunEvent)
        and isinstance(item.event.msg, p.ApprovalRequestedMsg)
    )


def lease_rows(rt: Runtime) -> list[str]:
    with rt.store.transaction() as cursor:
        cursor.execute(f"SELECT session_id FROM {rt.ownership.table}")
        return [str(row["session_id"]) for row in cursor.fetchall()]


def session_actors() -> int:
    return len(pykka.ActorRegistry.get_by_class_name("SessionActor"))


def deploy_tool(ran: list[str]):
    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploys (always asks first)."""
        ran.append(target)
        return f"deployed {target}"

    return deploy


def test_an_idle_session_stops_its_actor_gives_back_its_lease_and_revives(
    store_url: str,
) -> None:
    with Runtime.open(store_url, run_config=TINY) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["one", "two"])), session_id="s1"
        )
        assert session.prompt("hi", timeout=10).final_output == "one"
        passivated(rt)
        assert lease_rows(rt) == []
        assert session.prompt("again", timeout=10).final_output == "two"
        assert rt.live_sessions() == 1
        assert lease_rows(rt) == ["s1"]
        assert [m.content for m in session.messages()] == ["hi", "one", "again", "two"]


def test_no_idle_timeout_keeps_the_actor(sqlite_url: str) -> None:
    config = RunConfig(idle_timeout=None)
    with Runtime.open(sqlite_url, run_config=config) as rt:
        quick = rt.create_session(
            Agent("a", model=ScriptedModel(["q"])),
            session_id="quick",
            run_config=TINY,
        )
        kept = rt.create_session(Agent("a", model=ScriptedModel(["k"])))
        kept.prompt("hi", timeout=10)
        quick.prompt("hi", timeout=10)
        # The session that does passivate idled no longer than the other.
        eventually(lambda: rt.live_sessions() == 1, "the quick session passivated")
        assert lease_rows(rt) == [kept.session_id]


def test_queued_input_survives_passivation(sqlite_url: str) -> None:
    model = ScriptedModel(["first", "second"])
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=model))
        session.follow_up("queued while idle")
        passivated(rt)
        assert [q.text for q in session.queued()] == ["queued while idle"]
        result = session.prompt("now", timeout=10)
        assert [m.content for m in session.messages()] == [
            "now",
            "first",
            "queued while idle",
            "second",
        ]
        assert result.final_output == "second"


def test_a_pending_approval_survives_and_is_decided_after_revival(
    sqlite_url: str,
) -> None:
    ran: list[str] = []
    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "done"])
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=model, tools=[deploy_tool(ran)]))
        waiter = threading.Thread(target=lambda: results.append(session.prompt("go")))
        results: list[object] = []
        with session.subscribe() as events:
            waiter.start()
            for item in events:
                if isinstance(item, RunEvent) and isinstance(
                    item.event.msg, p.ApprovalRequestedMsg
                ):
                    break
            # Waiting for a person is idle: the actor goes, the run stays.
            passivated(rt)
            assert lease_rows(rt) == []
            (request,) = session.pending_approvals()
            assert rt.live_sessions() == 1  # asking revived it
            session.approve(request.request_id, ApprovalDecision.allow())
            waiter.join(timeout=10)
        assert ran == ["prod"]
        (result,) = results
        assert result.final_output == "done"  # type: ignore[attr-defined]


def test_a_broker_decision_revives_a_passivated_session(sqlite_url: str) -> None:
    ran: list[str] = []
    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "done"])
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=model, tools=[deploy_tool(ran)]))
        with session.subscribe() as events:
            session.send_input("go")
            request = first_approval_request(events)
            passivated(rt)
            rt.approvals.resolve(request.request_id, ApprovalDecision.allow())
            finished = next(item for item in events if isinstance(item, RunFinished))
        assert finished.result.final_output == "done"
        assert ran == ["prod"]


def test_a_session_allowance_survives_passivation(sqlite_url: str) -> None:
    ran: list[str] = []
    model = ScriptedModel(
        [
            calls(tool_call("deploy", {"target": "a"})),
            "first",
            calls(tool_call("deploy", {"target": "b"})),
            "second",
        ]
    )
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=model, tools=[deploy_tool(ran)]))
        with session.subscribe() as events:
            session.send_input("go")
            request = first_approval_request(events)
            session.approve(request.request_id, ApprovalDecision.allow_session())
            next(item for item in events if isinstance(item, RunFinished))
        passivated(rt)
        # No approval is asked: the allowance came back from the log.
        assert session.prompt("again", timeout=10).final_output == "second"
        assert ran == ["a", "b"]


def test_a_subscriber_from_before_gets_the_next_run_after_revival(
    sqlite_url: str,
) -> None:
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=ScriptedModel(["one", "two"])))
        session.prompt("hi", timeout=10)
        with session.subscribe() as events:
            passivated(rt)
            late = session.subscribe()  # subscribing does not wake it
            assert rt.live_sessions() == 0
            session.prompt("again", timeout=10)
            for subscription in (events, late):
                finished = next(i for i in subscription if isinstance(i, RunFinished))
                assert finished.result.final_output == "two"
            late.close()


def test_a_running_tool_never_passivates(sqlite_url: str) -> None:
    release = threading.Event()
    started = threading.Event()

    @function_tool
    def slow() -> str:
        """Waits to be released."""
        started.set()
        release.wait(10)
        return "slow done"

    model = ScriptedModel([calls(tool_call("slow", {})), "after"])
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        busy = rt.create_session(Agent("a", model=model, tools=[slow]))
        idle = rt.create_session(Agent("b", model=ScriptedModel(["x"])))
        with busy.subscribe() as events:
            busy.send_input("go")
            assert started.wait(10)
            idle.prompt("hi", timeout=10)
            # The idle one passivated well after the tool started.
            eventually(lambda: rt.live_sessions() == 1, "the idle session passivated")
            assert lease_rows(rt) == [busy.session_id]
            release.set()
            finished = next(item for item in events if isinstance(item, RunFinished))
        assert finished.result.final_output == "after"


def test_a_running_model_call_never_passivates(sqlite_url: str) -> None:
    held = HeldModel(ScriptedModel(["answer"]))
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        busy = rt.create_session(Agent("a", model=held))
        idle = rt.create_session(Agent("b", model=ScriptedModel(["x"])))
        with busy.subscribe() as events:
            busy.send_input("go")
            assert held.entered.wait(10)
            idle.prompt("hi", timeout=10)
            eventually(lambda: rt.live_sessions() == 1, "the idle session passivated")
            assert busy.running()
            held.release()
            finished = next(item for item in events if isinstance(item, RunFinished))
        assert finished.result.final_output == "answer"


def test_revival_is_refused_if_another_runtime_took_the_session(
    store_url: str,
) -> None:
    with Runtime.open(store_url, run_config=TINY) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["one"])), session_id="s1"
        )
        session.prompt("hi", timeout=10)
        passivated(rt)
        with Runtime.open(store_url, run_config=RunConfig(idle_timeout=None)) as other:
            other.create_session(Agent("a", model=ScriptedModel([])), session_id="s1")
            with pytest.raises(Exception, match="open in another process") as raised:
                session.messages()
            assert type(raised.value).__name__ == "SessionBusyError"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "soon"])
def test_a_bad_idle_timeout_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="idle_timeout"):
        RunConfig(idle_timeout=bad)  # type: ignore[arg-type]


def test_calls_at_once_on_a_passivated_session_revive_one_actor(
    sqlite_url: str,
) -> None:
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=ScriptedModel(["one"])))
        session.prompt("hi", timeout=10)
        answers: list[int] = []

        def ask() -> None:
            answers.append(len(session.messages()))

        for _ in range(3):
            passivated(rt)
            answers.clear()
            callers = [threading.Thread(target=ask) for _ in range(8)]
            for caller in callers:
                caller.start()
            for caller in callers:
                caller.join(timeout=10)
            assert answers == [2] * 8
            assert session_actors() == 1
            assert lease_rows(rt) == [session.session_id]


def test_closing_the_runtime_ends_a_passivated_sessions_subscriptions(
    sqlite_url: str,
) -> None:
    rt = Runtime.open(sqlite_url, run_config=TINY)
    try:
        session = rt.create_session(Agent("a", model=ScriptedModel(["one"])))
        events = session.subscribe()
        passivated(rt)
    finally:
        rt.close()
    assert list(events) == []  # the iteration ends instead of waiting forever


def test_a_session_closing_after_its_turn_keeps_its_actor(sqlite_url: str) -> None:
    ran: list[str] = []
    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "done"])
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=model, tools=[deploy_tool(ran)]))
        idle = rt.create_session(Agent("b", model=ScriptedModel(["x"])))
        with session.subscribe() as events:
            session.send_input("go")
            request = first_approval_request(events)
            session.close()  # waits for the turn, which waits for a decision
            idle.prompt("hi", timeout=10)
            eventually(lambda: rt.live_sessions() == 1, "the idle session passivated")
            assert lease_rows(rt) == [session.session_id]
            session.approve(request.request_id, ApprovalDecision.allow())
            closed = next(
                item
                for item in events
                if isinstance(item, RunEvent)
                and isinstance(item.event.msg, p.SessionClosedMsg)
            )
        assert closed.event.session_id == session.session_id
        assert ran == ["prod"]
