"""Retried inputs are recorded once (issue 23, item 1).

A client that retries after a lost response sends the same input with the
same id: the session answers with the original submission and records
nothing more, in this process or another one after a restart. The same id
with other content is refused, recording nothing. A repeated approval
answer is a no-op; a different decision for a decided request is refused.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kill_support import kill_when

from turnlog import (
    Agent,
    InputConflictError,
    InvalidInputError,
    Middleware,
    Runtime,
    ScriptedModel,
    UsageError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.testing import HeldModel, wait_for

CHILD = Path(__file__).with_name("retry_child.py")


def user_inputs(rt: Runtime, session_id: str) -> list[tuple[str, str]]:
    return [
        (e.msg.kind, e.msg.text)
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, p.InputAcceptedMsg)
    ]


def decisions(rt: Runtime, session_id: str) -> list[tuple[str, str]]:
    return [
        (e.msg.decision, e.msg.decided_by)
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, p.ApprovalDecidedMsg)
    ]


def test_a_retried_prompt_is_recorded_once_and_answered_with_its_run(
    store_url: str,
) -> None:
    model = ScriptedModel(["first answer", "never asked for"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="s")
        first = session.prompt("hello", input_id="req-1", timeout=10)
        again = session.prompt("hello", input_id="req-1", timeout=10)
        assert again.submission_id == first.submission_id
        assert again.final_output == "first answer"
        assert again.turn_ids == first.turn_ids
        assert len(model.requests) == 1
        assert user_inputs(rt, "s") == [("prompt", "hello")]
        assert [m.content for m in session.messages()] == ["hello", "first answer"]


def test_the_same_id_for_other_text_is_a_conflict_that_records_nothing(
    store_url: str,
) -> None:
    model = ScriptedModel(["one", "two"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="s")
        session.prompt("hello", input_id="req-1", timeout=10)
        recorded = rt.replay_events("s")
        with pytest.raises(InputConflictError, match="'req-1'") as refused:
            session.prompt("something else", input_id="req-1", timeout=10)
        assert refused.value.input_id == "req-1"
        with pytest.raises(InputConflictError, match="'req-1'"):
            session.follow_up("hello", input_id="req-1")  # a prompt's id
        assert rt.replay_events("s") == recorded
        assert session.queued() == []
        # A new id is new input.
        assert (
            session.prompt("hello", input_id="req-2", timeout=10).final_output == "two"
        )


def test_a_bad_input_id_is_refused_at_the_boundary(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=ScriptedModel([])), session_id="s")
        for bad in ("", 7, "x" * 201):
            with pytest.raises(InvalidInputError, match="input_id"):
                session.prompt("hello", input_id=bad, timeout=10)  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError, match="input_id"):
                session.follow_up("hello", input_id=bad)  # type: ignore[arg-type]
        assert user_inputs(rt, "s") == []


def test_a_retry_while_the_run_goes_on_waits_for_the_same_run(
    store_url: str,
) -> None:
    model = HeldModel(ScriptedModel(["slow answer", "never asked for"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="s")
        results = []
        worker = threading.Thread(
            target=lambda: results.append(session.prompt("hi", input_id="k"))
        )
        worker.start()
        assert model.entered.wait(10)
        retried = []
        retry = threading.Thread(
            target=lambda: retried.append(session.prompt("hi", input_id="k"))
        )
        retry.start()
        model.release()
        worker.join(10)
        retry.join(10)
        assert retried[0] == results[0]
        assert model.calls == 1
        assert user_inputs(rt, "s") == [("prompt", "hi")]


def test_a_retry_after_a_restart_is_answered_from_the_log(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["from the first process"])),
            session_id="s",
        )
        session.update_shared_state(mood="calm")
        first = session.prompt("hello", input_id="req-1", timeout=10)
        session.follow_up("later", input_id="f-1")
    model = ScriptedModel(["never asked for"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="s")
        again = session.prompt("hello", input_id="req-1", timeout=10)
        assert again == first
        assert (
            session.follow_up("later", input_id="f-1")
            == session.queued()[0].submission_id
        )
        assert len(session.queued()) == 1
        with pytest.raises(InputConflictError, match="'req-1'"):
            session.prompt("other", input_id="req-1", timeout=10)
        assert model.requests == []
        assert user_inputs(rt, "s") == [("prompt", "hello")]


def test_follow_ups_and_steers_retried_are_queued_once(store_url: str) -> None:
    model = HeldModel(ScriptedModel(["one", "two", "three"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="s")
        worker = threading.Thread(target=lambda: session.prompt("go"))
        worker.start()
        assert model.entered.wait(10)
        follow = session.follow_up("next", input_id="f")
        assert session.follow_up("next", input_id="f") == follow
        steer = session.steer("faster", input_id="st")
        assert session.steer("faster", input_id="st") == steer
        with pytest.raises(InputConflictError, match="'st'"):
            session.steer("slower", input_id="st")
        assert [q.submission_id for q in session.queued()] == [follow, steer]
        model.release()
        worker.join(10)
        assert session.follow_up("next", input_id="f") == follow  # after it ran
        assert sorted(user_inputs(rt, "s")) == [
            ("follow_up", "next"),
            ("prompt", "go"),
            ("steer", "faster"),
        ]


def test_the_protocol_face_replays_an_op_with_its_id(store_url: str) -> None:
    model = ScriptedModel(["one", "never asked for"])
    with Runtime.open(store_url) as rt:
        handle = rt.create_agent(Agent("a", model=model), session_id="s")
        submitted = handle.submit(p.UserInput("hi", input_id="op-1"))
        while not isinstance(handle.next_event(10).msg, p.TurnCompletedMsg):
            pass
        assert handle.submit(p.UserInput("hi", input_id="op-1")) == submitted
        with pytest.raises(InputConflictError):
            handle.submit(p.Steer("hi", input_id="op-1"))
        assert user_inputs(rt, "s") == [("prompt", "hi")]
        assert len(model.requests) == 1
        handle.close()


def deploy_tool(ran: list[str]):
    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploys."""
        ran.append(target)
        return f"deployed {target}"

    return deploy


def approve_once(store_url: str, ran: list[str]) -> str:
    """Runs a turn whose call waits for approval; the user allows it."""
    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "done"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy_tool(ran)]), session_id="s"
        )
        events = session.subscribe()
        results = []
        worker = threading.Thread(target=lambda: results.append(session.prompt("go")))
        worker.start()
        request, _ = wait_for(events, lambda m: isinstance(m, p.ApprovalRequestedMsg))
        request_id = request.event.msg.request_id
        session.approve(request_id, "allow", input_id="answer-1")
        session.approve(request_id, "allow")  # the retry, as the turn goes on
        worker.join(10)
        assert results[0].final_output == "done"
        session.approve(request_id, "allow")  # the retry, after the turn
        with pytest.raises(InputConflictError, match=request_id):
            session.approve(request_id, "deny")
        assert decisions(rt, "s") == [("allow", "user")]
        return request_id


def test_an_approval_answered_twice_is_decided_once(store_url: str) -> None:
    ran: list[str] = []
    request_id = approve_once(store_url, ran)
    with Runtime.open(store_url) as rt:  # another process, after a restart
        session = rt.create_session(
            Agent("a", model=ScriptedModel([]), tools=[deploy_tool(ran)]),
            session_id="s",
        )
        session.approve(request_id, "allow")
        with pytest.raises(InputConflictError, match="already decided 'allow'"):
            session.approve(request_id, "abort")
        with pytest.raises(UsageError, match="not pending"):
            session.approve("no-such-request", "allow")
        assert decisions(rt, "s") == [("allow", "user")]
    assert ran == ["prod"]


def test_a_retry_after_the_process_was_killed_is_a_no_op(store_url: str) -> None:
    kill_when(CHILD, "RECORDED", store_url, "killed")
    model = ScriptedModel(["never asked for"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="killed")
        queued = session.queued()
        assert [q.text for q in queued] == ["and then this"]
        assert session.follow_up("and then this", input_id="f-1") == (
            queued[0].submission_id
        )
        # The run the kill cut off ended as failed; the retry gets that
        # result, and runs nothing again.
        result = session.prompt("write the report", input_id="req-1", timeout=10)
        assert result.status == "failed"
        assert result.error == "the process stopped while this turn was running"
        assert model.requests == []
        assert user_inputs(rt, "killed") == [("prompt", "write the report")]
        assert len(session.queued()) == 1


class HoldFirstReview(Middleware):
    """Holds the first review of input until ``gate`` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.reviewed: list[str] = []

    def user_prompt(self, info):
        self.reviewed.append(info.text)
        if len(self.reviewed) == 1:
            self.entered.set()
            assert self.gate.wait(10)


@pytest.mark.parametrize("retried_text", ["later", "other"])
def test_a_retry_during_the_hooks_review_is_recorded_once(
    store_url: str, retried_text: str
) -> None:
    hook = HoldFirstReview()
    agent = Agent("a", model=ScriptedModel([]), middleware=[hook])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="s")
        answers: dict[str, object] = {}

        def submit(name: str, text: str) -> None:
            try:
                answers[name] = session.follow_up(text, input_id="f")
            except InputConflictError as error:
                answers[name] = error

        first = threading.Thread(target=submit, args=("first", "later"))
        first.start()
        assert hook.entered.wait(10)
        retry = threading.Thread(target=submit, args=("retry", retried_text))
        retry.start()
        hook.gate.set()
        first.join(10)
        retry.join(10)
        queued = session.queued()
        assert [q.text for q in queued] == ["later"]
        assert answers["first"] == queued[0].submission_id
        if retried_text == "later":
            assert answers["retry"] == queued[0].submission_id
        else:
            assert isinstance(answers["retry"], InputConflictError)
        # The retry is reviewed too if it came while the first was (it
        # usually does); if it came after, the recorded id answered it.
        assert hook.reviewed in (["later"], ["later", retried_text])
