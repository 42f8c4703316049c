"""Passivation: an idle session gives back its thread and lease, and comes back.

Each test runs with a tiny ``idle_timeout`` and waits for the session to
passivate (``session.wait_passivated``), never for a fixed time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import pykka
import pytest

from turnlog import (
    Agent,
    AgentSession,
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
WAIT = 10.0
"""Seconds a test waits for a session that should passivate in 0.2."""


def passivated(rt: Runtime, session: AgentSession) -> None:
    """Waits for ``session``, the runtime's only one, to passivate."""
    assert session.wait_passivated(WAIT), f"not passivated within {WAIT} s"
    assert rt.live_sessions() == 0
    assert session_actors() == 0  # the wait returns once the actor stopped


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
        passivated(rt, session)
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
        assert quick.wait_passivated(WAIT)
        assert rt.live_sessions() == 1
        assert lease_rows(rt) == [kept.session_id]


def test_queued_input_survives_passivation(sqlite_url: str) -> None:
    model = ScriptedModel(["first", "second"])
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=model))
        session.follow_up("queued while idle")
        passivated(rt, session)
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
            passivated(rt, session)
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
            passivated(rt, session)
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
        passivated(rt, session)
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
            passivated(rt, session)
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
            assert idle.wait_passivated(WAIT)
            assert rt.live_sessions() == 1
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
            assert idle.wait_passivated(WAIT)
            assert rt.live_sessions() == 1
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
        passivated(rt, session)
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
            passivated(rt, session)
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
        passivated(rt, session)
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
            with pytest.raises(TimeoutError):  # the close is due after the turn,
                session.close(timeout=0)  # which waits for a decision
            idle.prompt("hi", timeout=10)
            assert idle.wait_passivated(WAIT)
            assert rt.live_sessions() == 1
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


def test_wait_passivated_wakes_a_waiter_when_the_session_lets_go(
    sqlite_url: str,
) -> None:
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=ScriptedModel(["one"])))
        session.prompt("hi", timeout=10)
        woke: list[bool] = []
        waiter = threading.Thread(target=lambda: woke.append(session.wait_passivated()))
        waiter.start()  # with no timeout: only the passivation can end it
        waiter.join(WAIT)
        assert woke == [True]
        assert lease_rows(rt) == []  # the lease went back before it woke
        assert session_actors() == 0
        assert session.wait_passivated(0)  # passive now: True at once
        session.messages()  # revives it
        assert rt.live_sessions() == 1
        assert not session.wait_passivated(0)


def test_wait_passivated_is_false_for_a_session_that_never_idles_out(
    sqlite_url: str,
) -> None:
    config = RunConfig(idle_timeout=None)
    with Runtime.open(sqlite_url, run_config=config) as rt:
        session = rt.create_session(Agent("a", model=ScriptedModel(["one"])))
        session.prompt("hi", timeout=10)
        assert not session.wait_passivated(0.3)
        assert rt.live_sessions() == 1


def test_wait_passivated_returns_at_once_when_the_runtime_closes(
    sqlite_url: str,
) -> None:
    rt = Runtime.open(sqlite_url, run_config=RunConfig(idle_timeout=None))
    session = rt.create_session(Agent("a", model=ScriptedModel([])))
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(session.wait_passivated()))
    waiter.start()
    rt.close()
    waiter.join(WAIT)
    assert woke == [False]  # it will never passivate: the waiter is let go
    assert session.wait_passivated() is False


@pytest.mark.parametrize("bad", [-1, float("nan"), "soon", True])
def test_a_bad_wait_passivated_timeout_is_refused(sqlite_url: str, bad: object) -> None:
    with Runtime.open(sqlite_url, run_config=TINY) as rt:
        session = rt.create_session(Agent("a", model=ScriptedModel([])))
        with pytest.raises(InvalidInputError, match="timeout"):
            session.wait_passivated(bad)  # type: ignore[arg-type]
