"""The final_answer hook: a guardrail on the answer, before the turn completes.

It sees the text (and the typed object with an ``output_type``) and may
accept it, send it back with feedback (counted against ``output_retries``)
or stop the turn; a refused answer is recorded as rejected, with the
hook's name and reason, and never delivered. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import pydantic

from turnlog import (
    Agent,
    AnswerInfo,
    HookResult,
    Middleware,
    Runtime,
    ScriptedModel,
)
from turnlog.events import AnswerRejectedMsg, TurnAbortedMsg


class Verdict(pydantic.BaseModel):
    answer: str
    confidence: float


class Guard(Middleware):
    """Refuses answers below a confidence (typed) or with a banned word (text)."""

    name = "guard"

    def __init__(self, *, stop_on: str | None = None) -> None:
        self.seen: list[AnswerInfo] = []
        self.stop_on = stop_on

    def final_answer(self, info: AnswerInfo) -> HookResult | None:
        self.seen.append(info)
        if self.stop_on is not None and self.stop_on in info.text:
            return HookResult.stop_turn("that answer must not reach the user")
        if isinstance(info.output, Verdict) and info.output.confidence < 0.5:
            return HookResult.reject_answer("be surer, or say you do not know")
        if "darn" in info.text:
            return HookResult.reject_answer("no cursing")
        return None


class AsyncGuard(Middleware):
    name = "async-guard"

    async def final_answer(self, info: AnswerInfo) -> HookResult | None:
        return HookResult.reject_answer("never good enough")


def rejections(rt: Runtime, session_id: str) -> list[AnswerRejectedMsg]:
    return [
        e.msg
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, AnswerRejectedMsg)
    ]


def test_an_accepted_answer_is_delivered_and_the_hook_saw_it_typed(
    store_url: str,
) -> None:
    guard = Guard()
    verdict = Verdict(answer="yes", confidence=0.9)
    agent = Agent(
        "guarded",
        model=ScriptedModel([verdict]),
        output_type=Verdict,
        middleware=[guard],
    )
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("is it?", timeout=20)
        assert result.output == verdict
        (info,) = guard.seen
        assert info.output == verdict
        assert info.text == verdict.model_dump_json()
        assert info.session_id == session.session_id
        assert info.turn_id == result.turn_ids[0]
        assert rejections(rt, session.session_id) == []


def test_a_hook_sends_the_answer_back_with_feedback(store_url: str) -> None:
    guard = Guard()
    unsure = Verdict(answer="maybe", confidence=0.2)
    sure = Verdict(answer="no", confidence=0.8)
    model = ScriptedModel([unsure, sure])
    agent = Agent("guarded", model=model, output_type=Verdict, middleware=[guard])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("is it?", timeout=20)
        assert result.status == "completed"
        assert result.output == sure
        (rejected,) = rejections(rt, session.session_id)
        assert rejected.rejected_by == "guard"
        assert rejected.reason == "be surer, or say you do not know"
        assert not rejected.final
        assert "be surer" in model.requests[1].items[-1]["content"]
        checkpoint = rt.checkpoints.load(session.session_id)
        assert checkpoint is not None
        assert checkpoint.output == sure.model_dump(mode="json")


def test_hook_rejections_count_against_output_retries(store_url: str) -> None:
    model = ScriptedModel(["first", "second", "third"])
    agent = Agent("never", model=model, middleware=[AsyncGuard()], output_retries=1)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("try", timeout=20)
        assert result.status == "failed"
        assert result.final_output is None  # the refused text is not the result
        assert result.error == "OutputValidationError: never good enough"
        assert model.remaining == 1
        spent = rejections(rt, session.session_id)
        assert [(r.attempt, r.final, r.rejected_by) for r in spent] == [
            (1, False, "async-guard"),
            (2, True, "async-guard"),
        ]


def test_a_hook_on_a_text_agent_sees_the_text_only(store_url: str) -> None:
    guard = Guard()
    agent = Agent("text", model=ScriptedModel(["darn it", "fine"]), middleware=[guard])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("say", timeout=20)
        assert result.output == result.final_output == "fine"
        assert [(i.text, i.output) for i in guard.seen] == [
            ("darn it", None),
            ("fine", None),
        ]
        names = [item.name for item in rt.transcript.all(session.session_id)]
        assert "AnswerAccepted" not in names  # no output type: nothing to record
        assert names.count("AnswerRejected") == 1


def test_a_hook_that_stops_the_turn_delivers_nothing(store_url: str) -> None:
    guard = Guard(stop_on="secret")
    agent = Agent(
        "stopper", model=ScriptedModel(["the secret is 42"]), middleware=[guard]
    )
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("tell", timeout=20)
        assert result.status == "aborted"
        assert result.final_output is None
        assert result.output is None
        (rejected,) = rejections(rt, session.session_id)
        assert (rejected.rejected_by, rejected.final) == ("guard", True)
        assert rejected.reason == "that answer must not reach the user"
        (aborted,) = [
            e.msg
            for e in rt.replay_events(session.session_id)
            if isinstance(e.msg, TurnAbortedMsg)
        ]
        assert aborted.reason == "answer stopped: that answer must not reach the user"
        assert not aborted.failed


def test_a_hook_that_raises_fails_the_turn_by_name(store_url: str) -> None:
    class Broken(Middleware):
        name = "broken"

        def final_answer(self, info: AnswerInfo) -> HookResult | None:
            raise RuntimeError("boom")

    agent = Agent("broken", model=ScriptedModel(["hi"]), middleware=[Broken()])
    with Runtime.open(store_url) as rt:
        result = rt.create_session(agent).prompt("x", timeout=20)
        assert result.status == "failed"
        assert result.error is not None
        assert "final_answer hook of broken failed: RuntimeError: boom" in result.error
