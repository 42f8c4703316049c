"""Middleware, compaction and routes when things go wrong (and a few when
they go right that the seeds do not cover)."""

from __future__ import annotations

import pytest

from turnlog import (
    Agent,
    Compaction,
    HookResult,
    InvalidInputError,
    Message,
    Middleware,
    ModelRequest,
    ModelResponse,
    ModelRouter,
    Runtime,
    ScriptedModel,
    UsageError,
    calls,
    function_tool,
    reply,
    tool_call,
)
from turnlog.domain import protocol as p


@function_tool
def echo(text: str) -> str:
    """Echoes."""
    return text


class FailsOnce(Middleware):
    """Raises in one hook, the first time only."""

    def __init__(self, hook: str) -> None:
        self.hook = hook
        self.failed = False
        setattr(self, hook, self._maybe_fail)

    def _maybe_fail(self, info):
        if not self.failed:
            self.failed = True
            msg = f"{self.hook} broke"
            raise RuntimeError(msg)


@pytest.mark.parametrize(
    "hook",
    [
        "session_start",
        "user_prompt",
        "pre_model",
        "model_request",
        "pre_tool",
        "post_tool",
        "pre_compact",
        "post_compact",
    ],
)
def test_a_raising_hook_fails_the_turn_cleanly_and_the_session_goes_on(
    rt: Runtime, hook: str
) -> None:
    class Compacting(ScriptedModel):
        async def compact(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(({"type": "compaction", "encrypted_content": "x"},))

    model = Compacting(
        [
            calls(tool_call("echo", {"text": "hi"})),
            "first answer",
            calls(tool_call("echo", {"text": "again"})),
            "second answer",
        ]
    )
    layers = [FailsOnce(hook)]
    if "compact" in hook:
        layers.insert(0, Compaction(1))
    session = rt.create_session(
        Agent("a", model=model, tools=[echo], middleware=layers), session_id="h"
    )
    first = session.prompt("one", timeout=10)
    assert first.status == "failed"
    assert f"{hook} hook of middleware failed: RuntimeError: {hook} broke" in (
        first.error or ""
    )
    aborted = [
        e.msg for e in rt.replay_events("h") if isinstance(e.msg, p.TurnAbortedMsg)
    ]
    assert [a.failed for a in aborted] == [True]
    second = session.prompt("two", timeout=10)
    assert second.status == "completed"
    # every call the model made was answered before the next request
    for request in model.requests:
        items = request.items
        made = {i["call_id"] for i in items if i["type"] == "function_call"}
        answered = {i["call_id"] for i in items if i["type"] == "function_call_output"}
        assert made <= answered


def test_a_compaction_endpoint_returning_garbage_is_a_recorded_failure(
    rt: Runtime,
) -> None:
    class Garbage(ScriptedModel):
        async def compact(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(("not an item",))  # type: ignore[arg-type]

    session = rt.create_session(
        Agent("a", model=Garbage(["fine"]), middleware=[Compaction(1)]),
        session_id="g",
    )
    result = session.prompt("hi", timeout=10)
    assert result.status == "failed"
    assert "compaction item 0 is not an item" in (result.error or "")
    blocks = [
        e.msg.block for e in rt.replay_events("g") if isinstance(e.msg, p.FrontendMsg)
    ]
    assert [(b.state, b.title) for b in blocks] == [
        ("pending", "Context compacting"),
        ("complete", "Context compaction failed"),
    ]
    assert rt.checkpoints.load("g").compaction_count == 0


def test_without_a_native_endpoint_compaction_summarises(rt: Runtime) -> None:
    model = ScriptedModel(["SUMMARY: the user said hello", "answer after summary"])
    compaction = Compaction(1, keep_user_tokens=100)
    session = rt.create_session(
        Agent("a", model=model, middleware=[compaction]), session_id="s"
    )
    assert session.prompt("hello there", timeout=10).final_output == (
        "answer after summary"
    )
    summary_request, answer_request = model.requests
    assert summary_request.items[-1]["content"] == "Summarise the conversation so far."
    messages = [i for i in answer_request.items if i["type"] == "message"]
    # The user's question stays verbatim; the summary follows, as a summary.
    assert (messages[0]["role"], messages[0]["content"]) == ("user", "hello there")
    assert messages[1]["turnlog_kind"] == "compaction_summary"
    assert messages[1]["role"] == "developer"
    assert messages[1]["content"].endswith("\nSUMMARY: the user said hello")
    checkpoint = rt.checkpoints.load("s")
    assert (checkpoint.compaction_count, checkpoint.context_epoch) == (1, 1)


def test_a_stop_from_pre_model_completes_the_turn_without_a_model_call(
    rt: Runtime,
) -> None:
    class Budget(Middleware):
        def pre_model(self, info):
            return HookResult.stop_turn("out of budget")

    model = ScriptedModel(["never"])
    session = rt.create_session(
        Agent("a", model=model, middleware=[Budget()]), session_id="b"
    )
    result = session.prompt("hi", timeout=10)
    assert (result.status, result.final_output) == ("completed", None)
    assert model.requests == []
    warnings = [
        e.msg.message
        for e in rt.replay_events("b")
        if isinstance(e.msg, p.WarningRaisedMsg)
    ]
    assert warnings == ["out of budget"]


def test_unknown_routes_are_refused_and_switching_is_recorded(rt: Runtime) -> None:
    main = ScriptedModel([reply("from main")])
    other = ScriptedModel([reply("from other")])
    router = ModelRouter("main", main).register("other", other)
    with pytest.raises(
        UsageError, match="no model route 'nope'; known routes: main, other"
    ):
        Agent("a", model=router, model_route="nope")
    with pytest.raises(UsageError, match="already registered"):
        router.register("main", other)
    with pytest.raises(InvalidInputError):
        router.register("third", object())  # type: ignore[arg-type]
    session = rt.create_session(Agent("a", model=router), session_id="r")
    position = rt.store.max_position()
    with pytest.raises(UsageError, match="known routes: main, other"):
        session.set_model_route("nope")
    assert rt.store.max_position() == position
    session.set_model_route("other")
    assert session.prompt("hi", timeout=10).final_output == "from other"
    assert main.requests == []
    assert other.requests[0].route == "other"
    assert rt.checkpoints.load("r").model_route == "other"
    started = [
        e.msg for e in rt.replay_events("r") if isinstance(e.msg, p.ModelStepStartedMsg)
    ]
    assert [s.route for s in started] == ["other"]


def test_peer_and_system_input_start_turns_without_being_user_prompts(
    rt: Runtime,
) -> None:
    seen: list[str] = []

    class NoPrompts(Middleware):
        def user_prompt(self, info):
            # Every input is reviewed; ``kind`` tells a user's from the rest.
            seen.append(info.kind)
            if info.kind in ("peer", "system"):
                return None
            return HookResult.reject_prompt("no user prompts here")

    model = ScriptedModel(["noted"])
    session = rt.create_session(
        Agent("a", model=model, middleware=[NoPrompts()]), session_id="peer"
    )
    events = session.subscribe()
    session.send_input("build finished: 3 failures", kind="system")
    from turnlog import RunFinished
    from turnlog.testing import wait_for

    finished, _ = wait_for(events, lambda m: isinstance(m, RunFinished))
    assert finished.result.final_output == "noted"
    (item,) = [i for i in model.requests[0].items if i["type"] == "message"]
    assert (item["role"], item["input_kind"]) == ("developer", "system")
    assert session.messages() == [Message.assistant("noted")]  # no user message
    assert seen == ["system"]
    with pytest.raises(InvalidInputError):
        session.send_input("x", kind="user")
