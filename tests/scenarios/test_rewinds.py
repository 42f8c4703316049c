"""Rewinds in place: later turns set aside, nothing deleted, on both stores."""

from __future__ import annotations

import threading

import pytest

from turnlog import (
    Agent,
    Compaction,
    InvalidInputError,
    Runtime,
    ScriptedModel,
    SessionBusyError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.store.verify import verify_session
from turnlog.testing import wait_for


def three_turns(rt: Runtime, model: ScriptedModel | None = None):
    model = model or ScriptedModel([f"answer {n}" for n in range(10)])
    session = rt.create_session(Agent("a", model=model), session_id="s")
    for n in range(3):
        session.prompt(f"question {n}", timeout=10)
    return session, model


def contents(messages) -> list[str]:
    return [m.content for m in messages]


def test_edit_and_resend(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session, model = three_turns(rt)
        events_before = len(rt.transcript.all("s"))
        assert session.rewind(before_input=2) == [2, 3]
        assert contents(session.messages()) == ["question 0", "answer 0"]
        session.prompt("question 1, edited", timeout=10)
        expected = ["question 0", "answer 0", "question 1, edited", "answer 3"]
        assert contents(session.messages()) == expected
        # The model saw the rewound turns no more.
        sent = [
            i.get("content") for i in model.requests[-1].items if i["type"] == "message"
        ]
        assert "question 2" not in sent
        assert "question 1" not in sent
        # Nothing was deleted: every event is in the log and the replay.
        assert len(rt.transcript.all("s")) > events_before
        replayed = [
            e.msg.text
            for e in rt.replay_events("s")
            if isinstance(e.msg, p.InputAcceptedMsg)
        ]
        assert replayed == ["question 0", "question 1", "question 2", expected[2]]
        checkpoint = rt.checkpoints.load("s")
        assert contents(checkpoint.messages()) == expected
        assert checkpoint.rewound_turns == (2, 3)
        assert checkpoint.turn_count == 4
        current = {item.position for item in rt.transcript.current("s")}
        every = {item.position for item in rt.transcript.all("s")}
        assert current < every
        assert verify_session(rt.store, "s").ok
        points = rt.history("s")
        assert [(pt.after_turn, pt.rewound) for pt in points] == [
            (0, False),
            (1, False),
            (2, True),
            (3, True),
            (4, False),
        ]


def test_a_rewound_session_reopens_without_the_rewound_turns(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session, _ = three_turns(rt)
        session.rewind(after_turn=1)
        shown = contents(session.messages())
    with Runtime.open(store_url) as rt:
        model = ScriptedModel(["fresh"])
        session = rt.create_session(Agent("a", model=model), session_id="s")
        assert contents(session.messages()) == shown == ["question 0", "answer 0"]
        session.prompt("next", timeout=10)
        sent = [
            i.get("content") for i in model.requests[0].items if i["type"] == "message"
        ]
        assert sent[-3:] == ["question 0", "answer 0", "next"]


def test_rewinding_restores_the_shared_state(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session, _ = three_turns(rt)
        session.update_shared_state(plan="pro")
        session.prompt("more", timeout=10)
        session.rewind(after_turn=3)
        assert "plan" in session.shared_state()
        session.rewind(after_turn=1)
        assert "plan" not in session.shared_state()
        assert "plan" not in rt.checkpoints.load("s").shared_state


def test_a_rewind_behind_a_compaction_brings_back_the_full_context(
    store_url: str,
) -> None:
    model = ScriptedModel(["answer one", "SUMMARY", "answer two", "after"])

    class CompactSecond(Compaction):
        pass

    agent = Agent("a", model=model)
    compacting = Agent("a", model=model, middleware=[CompactSecond(1)])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="s")
        session.prompt("hello", timeout=10)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(compacting, session_id="s")
        session.prompt("again", timeout=10)
        assert rt.checkpoints.load("s").compaction_count == 1
        assert "SUMMARY" in str(rt.checkpoints.load("s").context)
        session.rewind(after_turn=1)
        assert contents(session.messages()) == ["hello", "answer one"]
        checkpoint = rt.checkpoints.load("s")
        assert "SUMMARY" not in str(checkpoint.context)
        assert contents(checkpoint.messages()) == ["hello", "answer one"]


def test_rewinding_while_a_turn_runs_is_refused(store_url: str) -> None:
    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploys."""
        return target

    model = ScriptedModel(["one", calls(tool_call("deploy", {"target": "x"})), "z"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy]), session_id="s"
        )
        session.prompt("first", timeout=10)
        events = session.subscribe()
        worker = threading.Thread(target=lambda: session.prompt("second"))
        worker.start()
        wait_for(events, lambda m: isinstance(m, p.ApprovalRequestedMsg))
        before = rt.store.max_position()
        with pytest.raises(SessionBusyError, match="interrupt"):
            session.rewind(after_turn=1)
        assert rt.store.max_position() == before
        session.interrupt()
        wait_for(events, lambda m: isinstance(m, p.TurnAbortedMsg))
        worker.join(10)
        events.close()
        assert session.pending_approvals() == []
        assert session.rewind(after_turn=1) == [2]
        assert contents(session.messages()) == ["first", "one"]
        assert rt.checkpoints.load("s").pending_approval is None


def test_bad_rewinds_are_refused_and_record_nothing(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session, _ = three_turns(rt)
        session.rewind(after_turn=1)
        before = rt.store.max_position()
        for kwargs in [
            {},
            {"after_turn": 2},  # rewound already
            {"after_turn": 9},
            {"before_input": 0},
            {"before_input": 1, "after_turn": 0},
            {"after_turn": 3},  # nothing after it that is not rewound
        ]:
            with pytest.raises(InvalidInputError):
                session.rewind(**kwargs)
        assert rt.store.max_position() == before


def test_a_fork_of_a_rewound_session_keeps_its_turns_set_aside(
    store_url: str,
) -> None:
    with Runtime.open(store_url) as rt:
        session, _ = three_turns(rt)
        session.rewind(after_turn=1)
        session.prompt("instead", timeout=10)
        fork = rt.fork_session("s", session_id="f")
        assert contents(fork.messages()) == contents(session.messages())
        assert rt.checkpoints.load("f").rewound_turns == (2, 3)
        # Forking from before the rewind travels back in time: turn 2 was
        # not rewound then.
        then = rt.fork_session("s", after_turn=2, session_id="then")
        assert contents(then.messages()) == [
            "question 0",
            "answer 0",
            "question 1",
            "answer 1",
        ]
        assert verify_session(rt.store, "f").ok


def test_a_rewind_to_before_the_first_input_empties_the_context(
    store_url: str,
) -> None:
    with Runtime.open(store_url) as rt:
        session, model = three_turns(rt)
        assert session.rewind(before_input=1) == [1, 2, 3]
        assert session.messages() == []
        assert rt.checkpoints.load("s").context == ()
        session.prompt("fresh start", timeout=10)
        sent = [
            i.get("content") for i in model.requests[-1].items if i["type"] == "message"
        ]
        assert sent[-1] == "fresh start"
        assert "question 0" not in sent


def test_a_rewind_after_a_turn_with_tool_calls_keeps_its_outputs(
    store_url: str,
) -> None:
    @function_tool
    def lookup(key: str) -> str:
        """Looks a key up."""
        return f"value of {key}"

    model = ScriptedModel(
        [calls(tool_call("lookup", {"key": "a"})), "found a", "two", "three", "after"]
    )
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[lookup]), session_id="s"
        )
        for text in ("find a", "second", "third"):
            session.prompt(text, timeout=10)
        expected = rt.checkpoints.at("s", turn=1).context
        session.rewind(after_turn=1)
        assert rt.checkpoints.load("s").context == expected
        outputs = [i for i in expected if i.get("type") == "function_call_output"]
        assert outputs[0]["output"] == "value of a"
        session.prompt("next", timeout=10)
        sent = model.requests[-1].items
        assert any(i.get("output") == "value of a" for i in sent)
        assert not any(i.get("content") == "second" for i in sent)
