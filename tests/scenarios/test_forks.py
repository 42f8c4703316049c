"""Forks: a new session whose history up to a quiet point is its source's.

Every test runs on both stores. A fork is one event; its history up to the
fork point is read from the source, so the fork's model context, the
checkpoint and the replayed stream equal the source's at that point.
"""

from __future__ import annotations

import threading

import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    Compaction,
    InvalidInputError,
    Runtime,
    ScriptedModel,
    UsageError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.domain.ids import session_uuid
from turnlog.domain.run import RunEvent
from turnlog.store.verify import verify_session
from turnlog.testing import wait_for


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploys (needs approval)."""
    return f"deployed {target}"


def talk(rt: Runtime, session_id: str, turns: int, *, tools: bool = False):
    model = ScriptedModel()
    for n in range(turns):
        if tools:
            model.add(calls(tool_call("lookup", {"key": f"k{n}"})))
        model.add(f"answer {n}")
    model.add(*[f"later {n}" for n in range(10)])
    agent = Agent("a", model=model, tools=[lookup])
    session = rt.create_session(agent, session_id=session_id)
    for n in range(turns):
        session.prompt(f"question {n}", timeout=10)
    return agent, session


def context_at(rt: Runtime, session_id: str, turn: int):
    checkpoint = rt.checkpoints.at(session_id, turn=turn)
    assert checkpoint is not None
    return checkpoint.context


def own_events(rt: Runtime, session_id: str) -> int:
    return len(rt.store.stored_rows([session_uuid(session_id)]))


def test_a_fork_after_a_turn_with_tool_calls_has_the_source_context(
    store_url: str,
) -> None:
    with Runtime.open(store_url) as rt:
        _, source = talk(rt, "src", 3, tools=True)
        before = rt.store.max_position()
        fork = rt.fork_session("src", after_turn=2, session_id="f")
        # One event, no copy of messages or tool outputs.
        assert rt.store.max_position() == before + 1
        assert own_events(rt, "f") == 1
        expected = context_at(rt, "src", 2)
        assert any(item.get("type") == "function_call_output" for item in expected)
        checkpoint = rt.checkpoints.load("f")
        assert checkpoint.context == expected
        assert checkpoint.turn_count == 2
        assert checkpoint.forked_from["session_id"] == "src"
        assert [m.content for m in fork.messages()] == [
            m.content for m in checkpoint.messages()
        ]
        # The source is untouched; the fork goes on on its own.
        assert fork.prompt("new", timeout=10).final_output == "later 0"
        assert len(source.messages()) == 6
        assert [m.content for m in fork.messages()][-2:] == ["new", "later 0"]
        assert rt.checkpoints.load("f").turn_count == 3
        assert verify_session(rt.store, "f").ok
        assert verify_session(rt.store, "src").ok


def test_a_fork_before_the_first_input_starts_empty(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        talk(rt, "src", 2)
        fork = rt.fork_session("src", before_input=1, session_id="f")
        assert fork.messages() == []
        assert rt.checkpoints.load("f").context == ()
        assert fork.prompt("first", timeout=10).final_output == "later 0"
        assert [m.content for m in fork.messages()] == ["first", "later 0"]


def test_before_input_and_after_turn_name_the_same_points(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        talk(rt, "src", 3)
        points = rt.history("src")
        assert [(pt.after_turn, pt.input) for pt in points] == [
            (0, 1),
            (1, 2),
            (2, 3),
            (3, None),
        ]
        assert points[1].preview == "question 1"
        a = rt.fork_session("src", before_input=3, session_id="a")
        b = rt.fork_session("src", after_turn=2, session_id="b")
        assert (
            a.messages() == b.messages() == rt.checkpoints.at("src", turn=2).messages()
        )


def test_a_fork_after_a_compaction_keeps_the_compacted_context(store_url: str) -> None:
    model = ScriptedModel(
        ["SUMMARY one", "answer one", "SUMMARY two", "answer two", "x", "after"]
    )
    agent = Agent("a", model=model, middleware=[Compaction(1)])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="src")
        session.prompt("hello", timeout=10)
        session.prompt("again", timeout=10)
        fork = rt.fork_session("src", after_turn=1, session_id="f")
        at_one = rt.checkpoints.at("src", turn=1)
        checkpoint = rt.checkpoints.load("f")
        assert checkpoint.compaction_count == at_one.compaction_count == 1
        assert checkpoint.context == at_one.context
        assert "SUMMARY one" in str(checkpoint.context)
        assert [m.content for m in fork.messages()] == [
            m.content for m in at_one.messages()
        ]


def test_what_a_fork_carries_after_an_approval(store_url: str) -> None:
    model = ScriptedModel(
        [calls(tool_call("deploy", {"target": "prod"})), "done", "x", "y"]
    )
    agent = Agent("a", model=model, tools=[deploy])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="src")
        events = session.subscribe()
        worker = threading.Thread(target=lambda: session.prompt("deploy"))
        worker.start()
        request, _ = wait_for(events, lambda m: isinstance(m, p.ApprovalRequestedMsg))
        # A fork of a session waiting on an approval forks its last finished
        # turn and starts quiet: no pending approval, no running turn.
        quiet = rt.fork_session("src", session_id="quiet")
        assert quiet.pending_approvals() == []
        checkpoint = rt.checkpoints.load("quiet")
        assert checkpoint.pending_approval is None
        assert (checkpoint.turn_count, checkpoint.running_turn) == (0, None)
        session.approve(request.event.msg.request_id, ApprovalDecision.allow_session())
        wait_for(events, lambda m: isinstance(m, p.TurnCompletedMsg))
        worker.join(10)
        events.close()
        plain = rt.fork_session("src", session_id="plain")
        again = ScriptedModel([calls(tool_call("deploy", {"target": "b"})), "ok"])
        kept = rt.fork_session(
            "src",
            session_id="kept",
            keep_allowances=True,
            agent=Agent("a", model=again, tools=[deploy]),
        )
        assert rt.store.get_session("plain").allowed_tools == frozenset()
        assert rt.store.get_session("kept").allowed_tools == {"deploy"}
        assert [m.content for m in plain.messages()] == ["deploy", "done"]
        # The allowance carried over works: no approval is asked for.
        assert kept.prompt("deploy again", timeout=10).final_output == "ok"
        assert "deployed b" in str(rt.checkpoints.load("kept").context)


def test_points_that_are_not_quiet_or_not_there_are_refused(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        agent, _ = talk(rt, "src", 2)
        before = rt.store.max_position()
        for kwargs, error in [
            ({"before_input": 9}, InvalidInputError),
            ({"after_turn": 7}, InvalidInputError),
            ({"before_input": 0}, InvalidInputError),
            ({"after_turn": -1}, InvalidInputError),
            ({"before_input": 1, "after_turn": 0}, InvalidInputError),
            ({"at": rt.checkpoints.at("src", position=3)}, InvalidInputError),
            ({"session_id": "src"}, UsageError),
        ]:
            with pytest.raises(error):
                rt.fork_session("src", agent=agent, **kwargs)
        with pytest.raises(InvalidInputError, match="no session"):
            rt.fork_session("nobody", agent=agent)
        assert rt.store.max_position() == before


def test_a_steer_is_not_a_quiet_point(store_url: str) -> None:
    gate = threading.Event()

    @function_tool
    def slow(key: str) -> str:
        """Waits for the test."""
        gate.wait(10)
        return key

    model = ScriptedModel([calls(tool_call("slow", {"key": "a"})), "done", "x"])
    agent = Agent("a", model=model, tools=[slow])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="src")
        events = session.subscribe()
        worker = threading.Thread(target=lambda: session.prompt("go"))
        worker.start()
        wait_for(events, lambda m: isinstance(m, p.ToolCallStartedMsg))
        session.steer("also this")
        gate.set()
        wait_for(events, lambda m: isinstance(m, p.TurnCompletedMsg))
        worker.join(10)
        events.close()
        assert [pt.input for pt in rt.history("src")] == [1, None]
        with pytest.raises(InvalidInputError, match="steered"):
            rt.fork_session("src", before_input=2)


def test_a_fork_of_a_fork(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        talk(rt, "src", 3)
        first = rt.fork_session("src", after_turn=2, session_id="f1")
        first.prompt("in f1", timeout=10)
        second = rt.fork_session("f1", after_turn=3, session_id="f2")
        third = rt.fork_session("f1", after_turn=1, session_id="f3")
        assert [m.content for m in second.messages()] == [
            "question 0",
            "answer 0",
            "question 1",
            "answer 1",
            "in f1",
            "later 0",
        ]
        assert [m.content for m in third.messages()] == ["question 0", "answer 0"]
        second.prompt("in f2", timeout=10)
        assert rt.checkpoints.load("f2").messages() == second.messages()
        for session_id in ("src", "f1", "f2", "f3"):
            assert verify_session(rt.store, session_id).ok
        assert rt.checkpoints.load("f3").forked_from["session_id"] == "f1"


def test_a_fork_reopens_after_a_restart(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        talk(rt, "src", 2, tools=True)
        rt.fork_session("src", after_turn=1, session_id="f")
        expected = rt.checkpoints.load("f").messages()
    with Runtime.open(store_url) as rt:
        model = ScriptedModel(["again"])
        fork = rt.create_session(
            Agent("a", model=model, tools=[lookup]), session_id="f"
        )
        assert fork.messages() == expected
        fork.prompt("more", timeout=10)
        sent = [
            i.get("content") for i in model.requests[0].items if i["type"] == "message"
        ]
        assert sent[-1] == "more"
        assert "question 0" in sent
        assert "question 1" not in sent


def test_the_fork_replays_as_the_source_then_its_own_stream(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        _, source = talk(rt, "src", 2, tools=True)
        fork = rt.fork_session("src", after_turn=1, session_id="f")
        with fork.subscribe() as live:
            fork.prompt("mine", timeout=10)
            own = live.drain()
        own_events_live = [
            e.event for e in own if isinstance(e, RunEvent) and e.event.sequence
        ]
        replayed = rt.replay_events("f")
        point = rt.checkpoints.load("f").forked_from["seq"]
        prefix = [e for e in rt.replay_events("src") if e.sequence <= point]
        shared = [e for e in replayed if e.sequence <= point]
        assert [(e.sequence, e.msg) for e in shared] == [
            (e.sequence, e.msg) for e in prefix
        ]
        assert [e for e in replayed if e.sequence > point] == own_events_live
        del source


def test_an_unknown_agent_is_asked_for(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        talk(rt, "src", 1)
    with Runtime.open(store_url) as rt, pytest.raises(UsageError, match="agent="):
        rt.fork_session("src")


def test_a_point_named_by_turn_or_by_input_is_the_same_fork(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        talk(rt, "src", 3, tools=True)
        for point in (1, 2, 3):
            by_turn = rt.fork_session("src", after_turn=point, session_id=f"t{point}")
            if point < 3:
                by_input = rt.fork_session(
                    "src", before_input=point + 1, session_id=f"i{point}"
                )
            else:  # the end has no input after it: name it by its checkpoint
                by_input = rt.fork_session(
                    "src", at=rt.checkpoints.load("src"), session_id=f"i{point}"
                )
            quick, scanned = (
                rt.store.get_session(s.session_id) for s in (by_turn, by_input)
            )
            assert quick.turn_owners == scanned.turn_owners
            for name in (
                "turn_count",
                "usage_totals",
                "shared_state",
                "context_start_turn",
            ):
                assert getattr(quick, name) == getattr(scanned, name)
            assert (
                rt.checkpoints.load(f"t{point}").forked_from
                == rt.checkpoints.load(f"i{point}").forked_from
            )
            assert by_turn.messages() == by_input.messages()
