"""The interactive surface: steer, interrupt and its queue, close, handles."""

from __future__ import annotations

import threading

import pytest

from turnlog import (
    Agent,
    InvalidInputError,
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


def start(session, text: str) -> tuple[threading.Thread, list]:
    results: list = []
    worker = threading.Thread(
        target=lambda: results.append(session.prompt(text, timeout=10))
    )
    worker.start()
    return worker, results


def test_a_steer_reaches_the_model_at_its_next_step(rt: Runtime) -> None:
    gate = threading.Event()

    @function_tool
    def wait_a_bit() -> str:
        """Waits for the test."""
        gate.wait(10)
        return "waited"

    model = ScriptedModel([calls(tool_call("wait_a_bit")), "steered answer"])
    session = rt.create_session(
        Agent("a", model=model, tools=[wait_a_bit]), session_id="s"
    )
    events = session.subscribe()
    worker, results = start(session, "do the thing")
    wait_for(events, lambda m: isinstance(m, p.ToolCallStartedMsg))
    session.steer("use the blue one")
    gate.set()
    worker.join(10)
    assert results[0].final_output == "steered answer"
    second = model.requests[1].items
    kinds = [(i["type"], i.get("content") or i.get("output")) for i in second]
    assert kinds[-2:] == [
        ("function_call_output", "waited"),
        ("message", "use the blue one"),
    ]
    assert session.queued() == []


def test_interrupt_keeps_queued_follow_ups_and_they_run_next(rt: Runtime) -> None:
    held = HeldModel(ScriptedModel(["never used", "follow-up answer"]), hold_all=True)
    session = rt.create_session(Agent("a", model=held), session_id="s")
    events = session.subscribe()
    worker, results = start(session, "long job")
    assert held.entered.wait(10)
    session.follow_up("afterwards")
    held.entered.clear()
    session.interrupt()
    aborted, _ = wait_for(events, lambda m: isinstance(m, p.TurnAbortedMsg))
    assert aborted.event.msg.reason == "interrupted"
    assert held.entered.wait(10)  # the follow-up's model call
    held.hold_all = False
    held.release()
    worker.join(10)
    assert results[0].final_output == "never used"
    assert [m.content for m in session.messages()] == [
        "long job",
        "afterwards",
        "never used",
    ]


def test_interrupt_with_clear_queue_drops_queued_input_recorded(rt: Runtime) -> None:
    held = HeldModel(ScriptedModel([]), hold_all=True)
    session = rt.create_session(Agent("a", model=held), session_id="s")
    worker, results = start(session, "long job")
    assert held.entered.wait(10)
    session.follow_up("not any more")
    session.interrupt(clear_queue=True)
    worker.join(10)
    assert results[0].status == "aborted"
    assert session.queued() == []
    dropped = [
        e.msg
        for e in rt.replay_events("s")
        if isinstance(e.msg, p.QueuedInputDroppedMsg)
    ]
    assert [d.reason for d in dropped] == ["interrupted"]
    assert held.cancelled.wait(10)


def test_a_closed_session_refuses_everything_and_records_nothing(rt: Runtime) -> None:
    session = rt.create_session(Agent("a", model=ScriptedModel(["hi"])), session_id="s")
    session.prompt("hello", timeout=10)
    session.close()
    position = rt.store.max_position()
    for call in (
        lambda: session.prompt("again", timeout=10),
        lambda: session.follow_up("later"),
        lambda: session.steer("left"),
        lambda: session.update_shared_state(x=1),
        session.close,
    ):
        with pytest.raises(SessionClosedError):
            call()
    assert rt.store.max_position() == position
    assert session.messages()[-1].content == "hi"  # still readable
    with pytest.raises(SessionClosedError):
        rt.create_session(Agent("a", model=ScriptedModel()), session_id="s")
    assert [type(e.msg).__name__ for e in rt.replay_events("s")][
        -1
    ] == "SessionClosedMsg"


def test_close_during_a_run_waits_for_the_run_to_end(rt: Runtime) -> None:
    held = HeldModel(ScriptedModel(["last words"]))
    session = rt.create_session(Agent("a", model=held), session_id="s")
    events = session.subscribe()
    worker, results = start(session, "finish this")
    assert held.entered.wait(10)
    # close() now returns once closed: it waits for the turn, so from a thread.
    closer = threading.Thread(target=session.close)
    closer.start()
    held.release()
    worker.join(10)
    closer.join(10)
    assert results[0].final_output == "last words"
    wait_for(events, lambda m: isinstance(m, p.SessionClosedMsg))


def test_run_events_are_tagged_and_every_subscriber_gets_them(rt: Runtime) -> None:
    session = rt.create_session(
        Agent("a", model=ScriptedModel(["one"])), session_id="tag"
    )
    first, second = session.subscribe(), session.subscribe()
    session.prompt("x", timeout=10)
    a, b = first.drain(), second.drain()
    assert a == b
    assert all(item.session_id == "tag" for item in a)
    assert isinstance(a[-1], RunFinished)
    handle = session.active_run_handle()
    assert handle is None


def test_the_active_run_handle_names_the_running_turn(rt: Runtime) -> None:
    held = HeldModel(ScriptedModel(["ok"]))
    session = rt.create_session(Agent("a", model=held), session_id="s")
    events = session.subscribe()
    worker, _ = start(session, "go")
    started, _ = wait_for(events, lambda m: isinstance(m, p.TurnStartedMsg))
    handle = session.active_run_handle()
    assert handle is not None
    assert handle.turn_id == started.event.msg.turn_id
    assert session.running()
    held.release()
    worker.join(10)
    assert not session.running()


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.steer(3),
        lambda s: s.interrupt(clear_queue="yes"),
        lambda s: s.follow_up("x", attachments=[{"id": "f"}]),
        lambda s: s.update_shared_state(bad=object()),
    ],
)
def test_wrong_types_raise_clear_errors_and_record_nothing(rt: Runtime, call) -> None:
    session = rt.create_session(
        Agent("a", model=ScriptedModel(["fine"])), session_id="s"
    )
    position = rt.store.max_position()
    with pytest.raises(InvalidInputError):
        call(session)
    assert rt.store.max_position() == position
    assert session.prompt("still usable", timeout=10).final_output == "fine"


def test_a_prompt_waiting_when_the_runtime_closes_gets_an_error(
    sqlite_url: str,
) -> None:
    rt = Runtime.open(sqlite_url)
    held = HeldModel(ScriptedModel(["never"]))
    session = rt.create_session(Agent("a", model=held), session_id="s")
    errors: list[BaseException] = []

    def prompt() -> None:
        try:
            session.prompt("go")
        except SessionClosedError as error:
            errors.append(error)

    worker = threading.Thread(target=prompt)
    worker.start()
    assert held.entered.wait(10)
    rt.close()
    worker.join(10)
    assert not worker.is_alive()
    assert "stopped before the run ended" in str(errors[0])
    with pytest.raises(SessionClosedError):
        session.prompt("after close", timeout=10)
