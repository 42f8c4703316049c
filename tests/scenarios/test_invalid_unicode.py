"""Text that is not valid Unicode never kills a session (issue 10, item 2).

A Python ``str`` can hold lone surrogates, which UTF-8 (and so the log)
cannot hold. Input holding one is refused at the API with nothing
recorded; a tool's or a model's output holding one is recorded with U+FFFD
and a note. And whatever does kill a session actor fails everyone waiting
on it at once, with the cause, and records the true reason in the log.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from turnlog import (
    Agent,
    AgentHandle,
    AgentSession,
    HookResult,
    InvalidInputError,
    Middleware,
    ModelRequest,
    ModelResponse,
    PeerInput,
    RunFinished,
    Runtime,
    ScriptedModel,
    SessionFailedError,
    SessionFileReference,
    Steer,
    ToolCallInfo,
    UserInput,
    calls,
    function_tool,
    tool_call,
)
from turnlog.cli.run.workspace import Workspace, workspace_tools
from turnlog.domain import protocol as p
from turnlog.domain.model import assistant_message
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.testing import HeldModel, wait_for

WAIT = 20.0
"""Seconds a run may take before the test fails instead of hanging."""

PROPERTY_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Any code point, with the awkward ones made common: lone surrogates (what
# no UTF-8 encoder takes), control characters (NUL included), and the
# characters that look like line ends or markers. Built as a list of
# characters: st.text() over a one_of of alphabets silently drops the
# surrogates.
TEXT = st.lists(
    st.one_of(
        st.characters(exclude_categories=()),
        st.characters(categories=["Cs"]),
        st.characters(max_codepoint=0x1F),
        st.sampled_from("\x7f\x85\u2028\u2029\ufeff\ufffd"),
    ),
    max_size=12,
).map("".join)


def is_valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class AnswersOk:
    """A model that answers every step with "ok"."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        return ModelResponse((assistant_message("ok"),))


def attachment(text: str) -> SessionFileReference:
    return SessionFileReference(id=f"file-{text}", name=text, size=1, media_type="x")


# Every way text gets into a session; ``True`` where the call starts a run
# of its own that the test must wait for (the others return after theirs,
# or only queue).
ENTRIES: dict[str, tuple[Callable[[AgentSession, AgentHandle, str], Any], bool]] = {
    "prompt": (lambda s, h, t: s.prompt(t, timeout=WAIT), False),
    "prompt_async": (lambda s, h, t: asyncio.run(s.prompt_async(t)), False),
    "prompt_attachment": (
        lambda s, h, t: s.prompt("see file", attachments=[attachment(t)], timeout=WAIT),
        False,
    ),
    "follow_up": (lambda s, h, t: s.follow_up(t), False),
    "follow_up_attachment": (
        lambda s, h, t: s.follow_up("f", attachments=[attachment(t)]),
        False,
    ),
    "steer": (lambda s, h, t: s.steer(t), False),
    "send_input_peer": (lambda s, h, t: s.send_input(t), True),
    "send_input_system": (lambda s, h, t: s.send_input(t, kind="system"), True),
    "shared_state_value": (lambda s, h, t: s.update_shared_state(v={"n": [t]}), False),
    "shared_state_key": (lambda s, h, t: s.update_shared_state(**{"k" + t: 1}), False),
    "shared_state_nested_key": (
        lambda s, h, t: s.update_shared_state(n={t: [1]}),
        False,
    ),
    "submit_user_input": (lambda s, h, t: h.submit(UserInput(t)), True),
    "submit_user_input_attachment": (
        lambda s, h, t: h.submit(UserInput("u", (attachment(t),))),
        True,
    ),
    "submit_peer_input": (lambda s, h, t: h.submit(PeerInput(t, "peer")), True),
    "submit_steer": (lambda s, h, t: h.submit(Steer(t)), False),
}


def test_any_text_through_any_entry_point_is_refused_cleanly_or_recorded(
    store_url: str,
) -> None:
    agent = Agent("any-text", model=AnswersOk())
    accepted: list[tuple[str, str]] = []
    refused: list[str] = []
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="any-text")
        handle = AgentHandle(session)

        @PROPERTY_SETTINGS
        @given(text=TEXT, entry=st.sampled_from(sorted(ENTRIES)))
        @example(text="x\ud800y", entry="prompt")
        @example(text="x\udce9y", entry="follow_up")
        @example(text="\ud800", entry="shared_state_nested_key")
        @example(text="nul\x00 esc\x1b", entry="submit_user_input")
        def through(text: str, entry: str) -> None:
            call, starts_run = ENTRIES[entry]
            position = rt.store.max_position()
            with session.subscribe() as sub:
                if not is_valid_unicode(text):
                    with pytest.raises(InvalidInputError, match="not valid Unicode"):
                        call(session, handle, text)
                    assert rt.store.max_position() == position  # nothing recorded
                    refused.append(entry)
                else:
                    call(session, handle, text)
                    # Setting a value the state already holds records nothing.
                    assert rt.store.max_position() > position or entry.startswith(
                        "shared_state"
                    )
                    accepted.append((entry, text))
                    if starts_run:
                        wait_for(sub, lambda i: isinstance(i, RunFinished), WAIT)
            # Alive and usable: a prompt runs (and with it any queued input).
            assert session.prompt("next", timeout=WAIT).status == "completed"

        through()
        assert accepted
        assert refused
        handle.close()
        live_messages = session.messages()
        live_state = session.shared_state()
        recorded = [
            event.msg.text
            for event in rt.replay_events("any-text")
            if isinstance(event.msg, p.InputAcceptedMsg)
        ]
    for entry, text in accepted:
        if not entry.startswith("shared_state") and "attachment" not in entry:
            assert text in recorded, (entry, text)
    # The log alone gives back what the live session held.
    with Runtime.open(store_url) as rt:
        revived = rt.create_session(agent, session_id="any-text")
        assert revived.messages() == live_messages
        assert revived.shared_state() == live_state


# -- outputs that are not valid Unicode are recorded, made encodable --


@function_tool
def odd_output(name: str) -> str:
    """Answers with a lone surrogate, as os.listdir does for some names."""
    return f"{name}: caf\udce9"


def tool_outputs(rt: Runtime, session_id: str) -> list[str]:
    return [
        event.msg.output
        for event in rt.replay_events(session_id)
        if isinstance(event.msg, p.ToolCallFinishedMsg)
    ]


def test_a_tool_output_that_is_not_valid_unicode_is_recorded_with_a_note(
    rt: Runtime,
) -> None:
    model = ScriptedModel([calls(tool_call("odd_output", {"name": "x"})), "done"])
    session = rt.create_session(Agent("odd", model=model, tools=[odd_output]))
    result = session.prompt("go", timeout=WAIT)
    assert result.status == "completed"
    assert result.final_output == "done"
    (output,) = tool_outputs(rt, session.session_id)
    assert output.startswith("x: caf\ufffd\n")
    assert "1 character of this output was not valid Unicode" in output
    assert "U+FFFD" in output
    # The model saw the same, recorded output.
    assert model.requests[1].items[-1]["output"] == output
    assert session.prompt("again?", timeout=WAIT).status == "failed"  # script ran out


def test_list_directory_over_a_file_name_that_is_not_utf8(
    tmp_path: Path, sqlite_url: str
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # A Latin-1 name: not UTF-8, so os.scandir gives it a lone surrogate.
    with open(os.fsencode(workspace) + b"/caf\xe9.txt", "wb") as file:
        file.write(b"x")
    (workspace / "plain.txt").write_text("y")
    model = ScriptedModel([calls(tool_call("list_directory", {"path": "."})), "seen"])
    agent = Agent("lister", model=model, tools=workspace_tools(Workspace(workspace)))
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(agent, session_id="lister")
        result = session.prompt("what is here?", timeout=WAIT)
        assert result.status == "completed", result.error
        (output,) = tool_outputs(rt, "lister")
        assert output.splitlines()[:2] == ["caf\ufffd.txt", "plain.txt"]
        assert "not valid Unicode" in output
        aborts = [
            event.msg
            for event in rt.replay_events("lister")
            if isinstance(event.msg, p.TurnAbortedMsg)
        ]
        assert aborts == []


def test_a_model_output_that_is_not_valid_unicode_is_recorded_with_a_warning(
    rt: Runtime,
) -> None:
    odd = ModelResponse(
        (
            {"type": "reasoning", "summary": {"n\udc80": ["s\ud800"]}},
            assistant_message("out\udc80put"),
        )
    )
    session = rt.create_session(Agent("odd-model", model=ScriptedModel([odd, "ok"])))
    result = session.prompt("go", timeout=WAIT)
    assert result.status == "completed"
    assert result.final_output == "out\ufffdput"
    assert session.messages()[-1].content == "out\ufffdput"
    events = [event.msg for event in rt.replay_events(session.session_id)]
    warnings = [msg.message for msg in events if isinstance(msg, p.WarningRaisedMsg)]
    assert warnings == [
        "[turnlog: 3 characters of the model's output were not valid Unicode "
        "and replaced with U+FFFD]"
    ]
    done = [msg for msg in events if isinstance(msg, p.TurnCompletedMsg)]
    assert done[-1].last_agent_message == "out\ufffdput"
    assert session.prompt("next", timeout=WAIT).final_output == "ok"


# -- whatever kills a session actor fails its waiters at once --


class SaveFailsOnce:
    """Makes the store's next save raise an error turnlog does not expect.

    That error escapes a told message's handler, so pykka stops the actor:
    the way any unforeseen bug would take a session down.
    """

    def __init__(self, rt: Runtime) -> None:
        self._store = rt.store
        self._save = rt.store.save
        self.armed = threading.Event()

    def arm(self) -> None:
        self._store.save = self._fail  # type: ignore[method-assign]

    def _fail(self, *aggregates: Any) -> Any:
        self._store.save = self._save  # type: ignore[method-assign]
        msg = "disk on fire"
        raise RuntimeError(msg)


def prompt_in_thread(
    session: AgentSession, text: str
) -> tuple[threading.Thread, list[BaseException | object]]:
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(session.prompt(text))  # no timeout: it must not hang
        except BaseException as error:  # the test reads it
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_session_actor_killed_while_taking_a_prompt_fails_it_at_once(
    rt: Runtime,
) -> None:
    session = rt.create_session(Agent("dies", model=ScriptedModel(["ok"])))
    SaveFailsOnce(rt).arm()
    thread, outcome = prompt_in_thread(session, "hello")
    thread.join(WAIT)
    assert not thread.is_alive(), "prompt() hung after its session actor died"
    (error,) = outcome
    assert isinstance(error, SessionFailedError)
    assert "RuntimeError: disk on fire" in str(error)


def test_a_session_actor_killed_mid_run_fails_everyone_and_records_why(
    rt: Runtime,
) -> None:
    held = HeldModel(ScriptedModel(["never recorded", "after revival"]))
    agent = Agent("dies-mid-run", model=held)
    session = rt.create_session(agent, session_id="mid-run")
    subscription = session.subscribe()
    thread, outcome = prompt_in_thread(session, "hello")
    assert held.entered.wait(WAIT)
    SaveFailsOnce(rt).arm()  # the model step's save is the one that fails
    held.release()
    thread.join(WAIT)
    assert not thread.is_alive(), "prompt() hung after its session actor died"
    (error,) = outcome
    assert isinstance(error, SessionFailedError)
    # A subscriber is told of the failure, after the events it was sent.
    seen = []
    with pytest.raises(SessionFailedError, match="disk on fire"):
        seen.extend(subscription)
    (aborted,) = [
        item.event.msg
        for item in seen
        if isinstance(getattr(item, "event", None), p.Event)
        and isinstance(item.event.msg, p.TurnAbortedMsg)
    ]
    assert "the session failed: RuntimeError: disk on fire" in aborted.reason
    # The log says what happened, not that a process stopped; the session
    # revives from it and runs.
    revived = rt.create_session(agent, session_id="mid-run")
    assert revived.prompt("again", timeout=WAIT).final_output == "after revival"
    reasons = [
        event.msg.reason
        for event in rt.replay_events("mid-run")
        if isinstance(event.msg, p.TurnAbortedMsg)
    ]
    assert reasons == [aborted.reason]


class SeesToolOutputs(Middleware):
    """A post_tool hook: tool outputs go through the TurnActor first."""

    def post_tool(self, info: ToolCallInfo) -> HookResult | None:
        return None


@pytest.mark.parametrize(
    ("middleware", "reason"),
    [
        # With a post_tool hook the TurnActor hands the calls over: its
        # tell to the gone executor raises in its handler, which stops it,
        # and the session learns that at once.
        ([SeesToolOutputs()], "the turn actor failed: ActorDeadError"),
        # Without one the session hands them over itself, and fails the
        # turn when the executor is gone instead of waiting.
        ([], "the tool executor has stopped"),
    ],
    ids=["through-the-turn-actor", "from-the-session"],
)
def test_calls_that_cannot_reach_the_executor_fail_the_turn_at_once(
    rt: Runtime, middleware: list[Middleware], reason: str
) -> None:
    model = ScriptedModel([calls(tool_call("odd_output", {"name": "x"})), "later"])
    agent = Agent("gone", model=model, tools=[odd_output], middleware=middleware)
    session = rt.create_session(agent)
    rt._tool_executor.stop()
    thread, outcome = prompt_in_thread(session, "go")
    thread.join(WAIT)
    assert not thread.is_alive(), "prompt() hung with the tool executor gone"
    (result,) = outcome
    assert getattr(result, "status", None) == "failed", result
    assert reason in str(result.error)  # type: ignore[attr-defined]
    assert session.running() is False


class Gate:
    """A tool that waits until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    def wait(self, key: str) -> str:
        self.entered.set()
        assert self.open.wait(WAIT)
        return f"passed {key}"


def test_a_tool_executor_that_dies_answers_the_calls_it_held(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate()
    waits = function_tool(name="wait")(gate.wait)
    model = ScriptedModel(
        [calls(tool_call("wait", {"key": "a"}), tool_call("wait", {"key": "b"})), "ok"]
    )
    with Runtime.open(sqlite_url, max_tool_concurrency=1) as rt:
        session = rt.create_session(Agent("held", model=model, tools=[waits]))
        thread, outcome = prompt_in_thread(session, "go")
        assert gate.entered.wait(WAIT)  # call a runs; call b waits for a slot

        # The executor's bookkeeping fails as a's end frees b's slot.
        def broken(_call: object) -> None:
            raise TypeError("broken bookkeeping")

        monkeypatch.setattr(rt._tool_executor, "_start", broken)
        gate.open.set()
        thread.join(WAIT)
        assert not thread.is_alive(), "prompt() hung after the tool executor died"
        (result,) = outcome
        assert getattr(result, "final_output", None) == "ok", result
        # In either order: the answer for b does not wait for a.
        ran, not_run = sorted(tool_outputs(rt, session.session_id), reverse=True)
        assert ran == "passed a"
        assert not_run.startswith("not run: the tool executor failed: TypeError")
