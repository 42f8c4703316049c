"""The SessionActor's promises, observed through the public API.

- events are durable before their EventMsg is delivered;
- a read after an event was delivered sees it (read-your-writes);
- the live stream minus transient events equals the replay of the log;
- the protocol face queues input that arrives while a turn runs;
- an interrupt ends the running turn at once and the session goes on;
- a slow subscriber is told what it missed and never stalls the session.
"""

from __future__ import annotations

import threading

import msgspec
import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    EventsMissed,
    RunConfig,
    RunEvent,
    RunFinished,
    Runtime,
    ScriptedModel,
    UserInput,
    calls,
    function_tool,
    tool_call,
)
from turnlog.actors.actor_pool import POOL
from turnlog.domain import protocol as p
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.testing import HeldModel, wait_for


@pytest.fixture
def rt(store_url: str):
    runtime = Runtime.open(store_url)
    yield runtime
    runtime.close()


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


def tool_model(answer: str = "done") -> ScriptedModel:
    return ScriptedModel([calls(tool_call("lookup", {"key": "k"})), answer])


def test_every_event_is_durable_before_it_is_delivered(rt: Runtime) -> None:
    session = rt.create_session(
        Agent("a", model=tool_model(), tools=[lookup]), session_id="d"
    )
    subscription = session.subscribe()
    checked: list[tuple[int, bool]] = []
    aggregates = [session_uuid("d"), turn_uuid("d", 1)]

    def stored_seqs() -> set[int]:
        return {
            msgspec.json.decode(state)["session_seq"]
            for *_, state in rt.store.stored_rows(aggregates)
        }

    def watch() -> None:
        for item in subscription:
            if isinstance(item, RunEvent):
                # read the log the moment the event arrives
                checked.append(
                    (item.event.sequence, item.event.sequence in stored_seqs())
                )
            if isinstance(item, RunFinished):
                return

    watcher = threading.Thread(target=watch)
    watcher.start()
    session.prompt("go", timeout=10)
    watcher.join(10)
    assert len(checked) > 5
    assert all(durable for _, durable in checked), checked


def test_a_read_after_an_event_sees_that_event(rt: Runtime) -> None:
    session = rt.create_session(
        Agent("a", model=tool_model(), tools=[lookup]), session_id="r"
    )
    subscription = session.subscribe()
    held = threading.Event()

    def reader() -> None:
        wait_for(subscription, lambda m: isinstance(m, p.ToolCallFinishedMsg))
        checkpoint = rt.checkpoints.load("r")
        assert checkpoint is not None
        outputs = [
            i["output"]
            for i in checkpoint.context
            if i["type"] == "function_call_output"
        ]
        assert outputs == ["value of k"]
        held.set()

    thread = threading.Thread(target=reader)
    thread.start()
    session.prompt("go", timeout=10)
    thread.join(10)
    assert held.is_set()


def test_the_live_stream_equals_the_replay_of_the_log(rt: Runtime) -> None:
    agent = Agent("a", model=tool_model("first"), tools=[lookup])
    session = rt.create_session(agent, session_id="live")
    subscription = session.subscribe()
    session.prompt("one", timeout=10)
    session.update_shared_state(mood="good")
    live = [i.event for i in subscription.drain() if isinstance(i, RunEvent)]
    live = [event for event in live if not event.transient]
    replayed = rt.replay_events("live")
    # the replay also holds what happened before this subscription began
    assert replayed[-len(live) :] == live
    assert isinstance(replayed[0].msg, p.SessionCreatedMsg)
    assert isinstance(live[-1].msg, p.SharedStateUpdatedMsg)


def test_input_submitted_while_a_turn_runs_is_queued_and_runs_next(rt: Runtime) -> None:
    held = HeldModel(ScriptedModel(["answer one", "answer two"]))
    handle = rt.create_agent(Agent("a", model=held), session_id="q")
    first = handle.submit(UserInput("one"))
    assert held.entered.wait(10)
    second = handle.submit(UserInput("two"))
    held.release()
    completed: list[tuple[str | None, str | None]] = []
    while len(completed) < 2:
        event = handle.next_event(timeout=10)
        if isinstance(event.msg, p.TurnCompletedMsg):
            completed.append((event.submission_id, event.msg.last_agent_message))
    assert completed == [(first, "answer one"), (second, "answer two")]
    assert [m.content for m in handle.session.messages()] == [
        "one",
        "answer one",
        "two",
        "answer two",
    ]
    handle.close()


def test_an_interrupt_ends_the_running_turn_and_cancels_the_model_call(
    rt: Runtime,
) -> None:
    held = HeldModel(ScriptedModel(["never seen", "after"]), hold_all=True)
    handle = rt.create_agent(Agent("a", model=held), session_id="i")
    handle.submit(UserInput("long task"))
    started = wait_next(handle, p.TurnStartedMsg)
    assert held.entered.wait(10)
    handle.submit(p.Interrupt(started.msg.turn_id))
    aborted = wait_next(handle, p.TurnAbortedMsg)
    assert (aborted.msg.reason, aborted.msg.failed) == ("interrupted", False)
    assert held.cancelled.wait(10)
    held.hold_all = False
    held.release()
    assert handle.session.prompt("next", timeout=10).final_output == "never seen"
    handle.close()


def wait_next(handle, kind):
    while True:
        event = handle.next_event(timeout=10)
        if isinstance(event.msg, kind):
            return event


def test_a_slow_subscriber_is_told_how_many_events_it_missed(rt: Runtime) -> None:
    session = rt.create_session(
        Agent("a", model=ScriptedModel(["one", "two"])), session_id="slow"
    )
    everything = session.subscribe()
    slow = session.subscribe(buffer=3)
    session.prompt("first", timeout=10)
    offered = everything.drain()
    kept = slow.drain()
    # The oldest were dropped; the reader meets the gap first, then the
    # newest events, and the run's end is never dropped.
    assert kept[0] == EventsMissed("slow", len(offered) - 3)
    assert kept[1:] == offered[-3:]
    assert isinstance(kept[-1], RunFinished)
    session.prompt("second", timeout=10)
    after = slow.drain()
    assert isinstance(after[0], EventsMissed)
    assert after[-1].result.final_output == "two"


def test_approval_policy_ask_waits_for_the_caller_and_records_the_decision(
    store_url: str,
) -> None:
    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploys."""
        return f"deployed {target}"

    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "shipped"])
    with Runtime.open(store_url, run_config=RunConfig(approval_policy="ask")) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy]), session_id="ap"
        )
        subscription = session.subscribe()
        results = []
        worker = threading.Thread(
            target=lambda: results.append(session.prompt("go", timeout=10))
        )
        worker.start()
        request, _ = wait_for(
            subscription, lambda m: isinstance(m, p.ApprovalRequestedMsg)
        )
        checkpoint = rt.checkpoints.load("ap")
        assert checkpoint.pending_approval["name"] == "deploy"
        session.approve(request.event.msg.request_id, ApprovalDecision.allow())
        worker.join(10)
        assert results[0].final_output == "shipped"
        decided = [
            e.msg
            for e in rt.replay_events("ap")
            if isinstance(e.msg, p.ApprovalDecidedMsg)
        ]
        assert [(d.decision, d.decided_by) for d in decided] == [("allow", "user")]
        assert rt.checkpoints.load("ap").pending_approval is None
        # The same answer again is a retry: a no-op (issue 23); another is refused.
        session.approve(request.event.msg.request_id, ApprovalDecision.allow())
        with pytest.raises(Exception, match="already decided 'allow'"):
            session.approve(request.event.msg.request_id, ApprovalDecision.deny())
        assert len([e for e in rt.replay_events("ap") if e.msg == decided[0]]) == 1


@pytest.mark.parametrize(
    ("policy", "expected"), [("allow", "deployed prod"), ("deny", None)]
)
def test_approval_policies_allow_and_deny_decide_without_asking(
    sqlite_url: str, policy: str, expected: str | None
) -> None:
    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploys."""
        return f"deployed {target}"

    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "ok"])
    with Runtime.open(sqlite_url, run_config=RunConfig(approval_policy=policy)) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy]), session_id="p"
        )
        session.prompt("go", timeout=10)
        outputs = [
            i["output"]
            for i in model.requests[1].items
            if i["type"] == "function_call_output"
        ]
        if expected is None:
            assert outputs == ["the call was denied approval and was not run"]
        else:
            assert outputs == [expected]


def test_streamed_text_reaches_subscribers_but_never_the_log(rt: Runtime) -> None:
    model = ScriptedModel(["streaming answer"], stream_chunk=4)
    session = rt.create_session(Agent("a", model=model), session_id="stream")
    subscription = session.subscribe()
    session.prompt("go", timeout=10)
    live = [i.event for i in subscription.drain() if isinstance(i, RunEvent)]
    deltas = [e.msg.delta for e in live if isinstance(e.msg, p.AgentMessageDeltaMsg)]
    assert "".join(deltas) == "streaming answer"
    assert len(deltas) == 4
    first_delta = next(i for i, e in enumerate(live) if e.transient)
    answer = next(i for i, e in enumerate(live) if isinstance(e.msg, p.AgentMessageMsg))
    assert first_delta < answer  # fragments arrive before the completed step
    assert all(e.sequence == 0 for e in live if e.transient)
    durable = [e for e in live if not e.transient]
    assert rt.replay_events("stream")[-len(durable) :] == durable


def test_sessions_waiting_on_their_model_hold_no_thread(sqlite_url: str) -> None:
    # A session's actor borrows a worker of the pool only while it has
    # messages (actors.actor_pool), and the TurnActor's mailbox is drained
    # by the I/O loop: twenty sessions waiting on their model need no more
    # threads than one, and none of them holds one.
    model = HeldModel(ScriptedModel(["hi"] * 20))
    prompting: list[threading.Thread] = []
    answers: list[str] = []
    with Runtime.open(sqlite_url) as rt:
        sessions = [
            rt.create_session(Agent("a", model=model), session_id=f"waiting-{n}")
            for n in range(20)
        ]
        assert POOL.wait_until_quiet(10)
        workers_before = POOL.threads_started
        try:
            for session in sessions:
                model.entered.clear()
                thread = threading.Thread(
                    target=lambda s=session: answers.append(
                        s.prompt("hello", timeout=10).final_output
                    )
                )
                prompting.append(thread)
                thread.start()
                assert model.entered.wait(10)  # its model call is in flight
                assert POOL.wait_until_quiet(10)  # and its actor runs nowhere
            assert model.calls == 20
            # Each prompt found the worker the one before had left idle.
            assert POOL.threads_started - workers_before <= 1
        finally:
            model.release()
            for thread in prompting:
                thread.join(10)
    assert answers == ["hi"] * 20


def test_a_turn_actor_is_sent_only_its_model_calls(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every message is a hand-over between threads: tool calls with no
    # post_tool hook go straight to the executor, and a turn that ended on
    # its own is not told to end.
    from turnlog.actors import turn_actor

    @function_tool
    def double(n: int) -> int:
        """Doubles n."""
        return 2 * n

    received: list[str] = []
    handle = turn_actor.TurnActor.on_receive

    def recording(self: turn_actor.TurnActor, message: object) -> object:
        received.append(type(message).__name__)
        return handle(self, message)

    monkeypatch.setattr(turn_actor.TurnActor, "on_receive", recording)
    model = ScriptedModel()
    for n in (1, 2):
        model.add(calls(tool_call("double", {"n": n})), f"doubled {n}")
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(Agent("d", model=model, tools=[double]))
        assert session.prompt("first", timeout=10).final_output == "doubled 1"
        assert received == ["CallModel", "CallModel"]
        received.clear()
        assert session.prompt("second", timeout=10).final_output == "doubled 2"
        assert received == ["CallModel", "CallModel"]
        assert [
            e.msg.output
            for e in rt.replay_events(session.session_id)
            if isinstance(e.msg, p.ToolCallFinishedMsg)
        ] == ["2", "4"]
