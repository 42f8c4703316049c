"""Bad input and faults: each is a clear error or an error output to the
model, recorded (or not) exactly as promised, and the session goes on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from turnlog import (
    Agent,
    AgentHandle,
    InvalidInputError,
    ModelResponse,
    NotATurnlogStoreError,
    Runtime,
    ScriptedModel,
    SessionBusyError,
    StoreURLError,
    TurnlogError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.testing import HeldModel


def outputs_sent(model: ScriptedModel, request: int) -> list[str]:
    return [
        i["output"]
        for i in model.requests[request].items
        if i["type"] == "function_call_output"
    ]


def test_a_prompt_while_a_turn_runs_is_refused_and_records_nothing(rt: Runtime) -> None:
    held = HeldModel(ScriptedModel(["first", "second"]))
    session = rt.create_session(Agent("a", model=held), session_id="busy")
    done = threading.Event()
    results = []
    worker = threading.Thread(
        target=lambda: (results.append(session.prompt("one", timeout=10)), done.set())
    )
    worker.start()
    assert held.entered.wait(10)
    position = rt.store.max_position()
    with pytest.raises(SessionBusyError):
        session.prompt("two", timeout=10)
    assert rt.store.max_position() == position
    held.release()
    worker.join(10)
    assert results[0].final_output == "first"
    assert session.prompt("two", timeout=10).final_output == "second"
    assert [m.content for m in session.messages()] == ["one", "first", "two", "second"]


def test_a_raising_tool_becomes_an_error_output_for_the_model(rt: Runtime) -> None:
    @function_tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(reason)

    model = ScriptedModel(
        [calls(tool_call("explode", {"reason": "boom"})), "recovered"]
    )
    session = rt.create_session(
        Agent("a", model=model, tools=[explode]), session_id="t"
    )
    result = session.prompt("go", timeout=10)
    assert result.status == "completed"
    assert result.final_output == "recovered"
    assert outputs_sent(model, 1) == ["explode failed: ValueError: boom"]
    ends = [
        e.msg
        for e in rt.replay_events("t")
        if type(e.msg).__name__ == "ToolCallFinishedMsg"
    ]
    assert [(e.name, e.is_error) for e in ends] == [("explode", True)]


def test_a_call_to_a_tool_that_does_not_exist_is_answered_with_an_error(
    rt: Runtime,
) -> None:
    @function_tool
    def real(x: int) -> int:
        """Doubles."""
        return 2 * x

    model = ScriptedModel(
        [calls(tool_call("imaginary", {}), tool_call("real", {"x": 2})), "ok"]
    )
    session = rt.create_session(Agent("a", model=model, tools=[real]), session_id="t")
    assert session.prompt("go", timeout=10).final_output == "ok"
    assert sorted(outputs_sent(model, 1)) == [
        "4",
        "unknown tool 'imaginary'; available tools: real",
    ]


def test_arguments_that_fail_validation_never_reach_the_handler(rt: Runtime) -> None:
    seen: list[int] = []

    @function_tool
    def double(x: int) -> int:
        """Doubles."""
        seen.append(x)
        return 2 * x

    bad = tool_call("double", {"x": "not a number"})
    broken = dict(tool_call("double"), arguments="{not json")
    model = ScriptedModel([calls(bad, broken), "ok"])
    session = rt.create_session(Agent("a", model=model, tools=[double]), session_id="t")
    session.prompt("go", timeout=10)
    assert seen == []
    outputs = outputs_sent(model, 1)
    assert any("invalid arguments for double: x:" in o for o in outputs)
    assert any("arguments are not valid JSON" in o for o in outputs)


def test_a_model_failure_aborts_the_turn_as_failed_and_the_session_goes_on(
    rt: Runtime,
) -> None:
    model = ScriptedModel([RuntimeError("connection reset"), "fine now"])
    session = rt.create_session(Agent("a", model=model), session_id="t")
    failed = session.prompt("first", timeout=10)
    assert failed.status == "failed"
    assert "connection reset" in (failed.error or "")
    assert session.prompt("second", timeout=10).final_output == "fine now"
    names = [type(e.msg).__name__ for e in rt.replay_events("t")]
    assert names.count("ModelStepFailedMsg") == 1
    assert names.count("TurnAbortedMsg") == 1
    assert names.count("TurnCompletedMsg") == 1


def test_a_malformed_model_response_is_refused_not_stored(rt: Runtime) -> None:
    garbage = ModelResponse(({"type": "function_call", "name": 7},))
    model = ScriptedModel([garbage, "ok"])
    session = rt.create_session(Agent("a", model=model), session_id="t")
    result = session.prompt("go", timeout=10)
    assert result.status == "failed"
    assert "function_call output item 0 needs a string 'call_id'" in (
        result.error or ""
    )
    assert all(
        type(e.msg).__name__ != "ToolCallStartedMsg" for e in rt.replay_events("t")
    )
    assert session.prompt("again", timeout=10).final_output == "ok"


def test_a_bad_store_url_or_a_foreign_file_is_refused_by_runtime_open(
    tmp_path: Path,
) -> None:
    with pytest.raises(StoreURLError):
        Runtime.open("mysql://localhost/db")
    foreign = tmp_path / "foreign.sqlite3"
    foreign.write_text("hello")
    with pytest.raises(NotATurnlogStoreError):
        Runtime.open(f"sqlite:///{foreign}")
    assert foreign.read_text() == "hello"


@pytest.mark.parametrize(
    ("call", "complaint"),
    [
        (lambda s: s.prompt(42), "input text must be a str"),
        (lambda s: s.prompt("x", attachments="file.txt"), "attachments"),
        (lambda s: s.follow_up(None), "input text must be a str"),
        (lambda s: s.approve("nope", "allow"), "not pending"),
        (lambda s: s.approve(3, "allow"), "request_id must be a str"),
        (lambda s: s.approve("r", "yes please"), "decision must be"),
        (lambda s: s.interrupt(), "no running turn"),
    ],
)
def test_wrong_calls_raise_clear_errors_and_record_nothing(
    rt: Runtime, call, complaint: str
) -> None:
    session = rt.create_session(
        Agent("a", model=ScriptedModel(["still works"])), session_id="t"
    )
    position = rt.store.max_position()
    with pytest.raises(Exception, match=complaint) as raised:
        call(session)
    assert isinstance(raised.value, InvalidInputError | type(raised.value))
    assert rt.store.max_position() == position
    assert session.prompt("hello", timeout=10).final_output == "still works"


@pytest.mark.parametrize("session_id", ["", "x" * 201, "bad\nid", 7])
def test_bad_session_ids_are_refused(rt: Runtime, session_id) -> None:
    with pytest.raises(InvalidInputError):
        rt.create_session(Agent("a", model=ScriptedModel()), session_id=session_id)
    assert rt.store.max_position() == 0


@pytest.mark.parametrize(
    ("call", "complaint"),
    [
        (lambda rt, s: s.subscribe(buffer=0), "buffer must be a positive int"),
        (lambda rt, s: rt.create_session("agent"), "agent must be a turnlog.Agent"),
        (lambda rt, s: rt.create_session(s, shared_state=[1]), "agent must be"),
        (
            lambda rt, s: rt.create_session(
                Agent("a", model=ScriptedModel()), shared_state={"x": {1, 2}}
            ),
            "shared state must be plain JSON data",
        ),
        (lambda rt, s: rt.checkpoints.load(42), "session_id must be a str"),
        (lambda rt, s: rt.transcript.page("t", max_batches=0), "max_batches"),
        (lambda rt, s: rt.approvals.resolve(3, "allow"), "request_id must be a str"),
        (lambda rt, s: rt.approvals.resolve("nope", "allow"), "not pending"),
        (lambda rt, s: AgentHandle(s).submit("hi"), "not an Op"),
        (
            lambda rt, s: Runtime.open(run_config={"approval_policy": "ask"}),
            "RunConfig",
        ),
    ],
)
def test_runtime_level_mistakes_are_clear_and_record_nothing(
    rt: Runtime, call, complaint: str
) -> None:
    session = rt.create_session(Agent("a", model=ScriptedModel(["ok"])), session_id="t")
    position = rt.store.max_position()
    with pytest.raises(Exception, match=complaint) as raised:
        call(rt, session)
    assert isinstance(raised.value, TurnlogError)
    assert rt.store.max_position() == position
    assert session.prompt("still fine", timeout=10).final_output == "ok"


def test_a_provider_without_the_delta_channel_still_runs_without_streaming(
    rt: Runtime,
) -> None:
    class OneArgument:
        """A provider written for the one-argument ``respond(request)``."""

        async def respond(self, request: object) -> ModelResponse:
            return ModelResponse(
                ({"type": "message", "role": "assistant", "content": "old style"},),
                None,
            )

    session = rt.create_session(Agent("old", model=OneArgument()), session_id="old")
    with session.subscribe() as events:
        result = session.prompt("hi", timeout=10)
        seen = [
            type(i.event.msg).__name__ for i in events.drain() if hasattr(i, "event")
        ]
    assert result.final_output == "old style"
    assert "AgentMessageMsg" in seen
    assert "AgentMessageDeltaMsg" not in seen  # nothing to stream without a sink


def test_a_model_without_respond_is_refused_when_given() -> None:
    with pytest.raises(InvalidInputError, match=r"respond\(request, on_delta"):
        Agent("none", model=object())  # type: ignore[arg-type]
