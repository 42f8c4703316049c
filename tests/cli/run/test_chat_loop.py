"""The chat loop in-process: a scripted model, a scripted terminal, memory://.

What the user types, answers to approval questions, Ctrl-C (pressed by
the test) and EOF are scripted; the assertions read what the terminal
showed and what the session recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply
from run_support import ScriptedTerminal

from turnlog import (
    Agent,
    ModelRequest,
    ModelResponse,
    RunConfig,
    RunEvent,
    Runtime,
    ScriptedModel,
    UsageError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.cli.run.command import PROMPT, ChatLoop, RunOptions, run_interactive
from turnlog.cli.run.settings import load_settings
from turnlog.cli.run.terminal import CtrlC
from turnlog.domain.protocol import AgentMessageDeltaMsg
from turnlog.domain.streaming import DeltaSink, discard_deltas

DEPLOYED: list[str] = []


@function_tool(needs_approval=True)
def deploy(env: str) -> str:
    """Deploys to an environment."""
    DEPLOYED.append(env)
    return f"deployed to {env}"


class SlowModel:
    """Streams a little, then thinks until it is cancelled."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        on_delta("thinking")
        await asyncio.Event().wait()  # until the interrupt cancels the call
        raise AssertionError("the turn should have been interrupted")


@pytest.fixture(autouse=True)
def _no_deploys() -> None:
    DEPLOYED.clear()


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    with Runtime.open("memory://", run_config=RunConfig(approval_policy="ask")) as rt:
        yield rt


def talk(
    runtime: Runtime,
    model: Any,
    terminal: ScriptedTerminal,
    ctrl_c: CtrlC | None = None,
) -> Any:
    """Runs the loop until the terminal's lines run out; returns the session."""
    agent = Agent("chat", model=model, tools=[deploy])
    session = runtime.create_session(agent)
    loop = ChatLoop(session, terminal, ctrl_c or CtrlC(), poll=0.02)
    try:
        loop.run()
    finally:
        loop.close()
    return session


def is_delta(item: Any) -> bool:
    return isinstance(item, RunEvent) and isinstance(
        item.event.msg, AgentMessageDeltaMsg
    )


def approvals_asked(terminal: ScriptedTerminal) -> int:
    return sum(prompt.startswith("approve ") for prompt in terminal.prompts)


def test_a_line_is_answered_and_the_prompt_comes_back(runtime: Runtime) -> None:
    terminal = ScriptedTerminal(["hello", "   ", "again"])
    session = talk(runtime, ScriptedModel(["Hi there!", "Hi again!"]), terminal)
    assert "you> hello\nassistant> Hi there!\nyou> " in terminal.text
    assert terminal.text.endswith("assistant> Hi again!\nyou> \n")
    assert terminal.prompts == [PROMPT] * 4  # the blank line runs nothing
    assert [m.content for m in session.messages()] == [
        "hello",
        "Hi there!",
        "again",
        "Hi again!",
    ]


def test_allow_for_the_session_is_not_asked_again(runtime: Runtime) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("deploy", {"env": "staging"})),
            "Deployed to staging.",
            calls(tool_call("deploy", {"env": "prod"})),
            "Deployed to prod.",
        ]
    )
    terminal = ScriptedTerminal(["deploy staging", "a", "deploy prod"])
    talk(runtime, model, terminal)
    assert approvals_asked(terminal) == 1
    assert 'approve deploy({"env": "staging"})? [y]es once' in terminal.text
    assert DEPLOYED == ["staging", "prod"]
    assert "  deploy is allowed for the rest of the session" in terminal.text
    assert "  result  deploy: deployed to prod" in terminal.text


def test_allow_for_the_session_covers_a_parallel_call(runtime: Runtime) -> None:
    model = ScriptedModel(
        [
            calls(
                tool_call("deploy", {"env": "eu"}, call_id="c1"),
                tool_call("deploy", {"env": "us"}, call_id="c2"),
            ),
            "Deployed twice.",
        ]
    )
    terminal = ScriptedTerminal(["deploy everywhere", "a"])
    talk(runtime, model, terminal)
    assert approvals_asked(terminal) == 1  # the second request was settled
    assert sorted(DEPLOYED) == ["eu", "us"]
    assert "assistant> Deployed twice." in terminal.text


def test_no_denies_the_call(runtime: Runtime) -> None:
    model = ScriptedModel(
        [calls(tool_call("deploy", {"env": "prod"})), "I was not allowed."]
    )
    terminal = ScriptedTerminal(["deploy prod", "n"])
    talk(runtime, model, terminal)
    assert DEPLOYED == []
    assert (
        "  error   deploy: the call was denied approval and was not run"
        in terminal.text
    )
    assert "assistant> I was not allowed." in terminal.text


def test_yes_allows_once_and_a_bad_answer_is_asked_again(runtime: Runtime) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("deploy", {"env": "a"})),
            "one",
            calls(tool_call("deploy", {"env": "b"})),
            "two",
        ]
    )
    terminal = ScriptedTerminal(["go", "maybe", "y", "go", "y"])
    talk(runtime, model, terminal)
    assert "  please answer y, a, n or q\n" in terminal.text
    assert approvals_asked(terminal) == 3  # asked again, then asked for b too
    assert DEPLOYED == ["a", "b"]


def test_quit_ends_the_turn(runtime: Runtime) -> None:
    model = ScriptedModel([calls(tool_call("deploy", {"env": "prod"})), "after"])
    terminal = ScriptedTerminal(["deploy", "q", "still there?"])
    session = talk(runtime, model, terminal)
    assert DEPLOYED == []
    assert "  turn stopped: aborted at approval" in terminal.text
    assert "assistant> after" in terminal.text  # the session goes on
    assert session.pending_approvals() == []


def test_ctrl_c_at_an_approval_question_interrupts_the_turn(
    runtime: Runtime,
) -> None:
    model = ScriptedModel([calls(tool_call("deploy", {"env": "prod"})), "after"])
    terminal = ScriptedTerminal(["deploy", KeyboardInterrupt(), "next"])
    talk(runtime, model, terminal)
    assert DEPLOYED == []
    assert "interrupting the turn (Ctrl-C again quits)" in terminal.text
    assert "  turn stopped: interrupted" in terminal.text
    assert "assistant> after" in terminal.text


def test_ctrl_c_during_a_turn_interrupts_it(runtime: Runtime) -> None:
    ctrl_c = CtrlC()
    pressed: list[bool] = []

    def press_while_thinking(text: str) -> None:
        if text.endswith("assistant> thinking") and not pressed:
            pressed.append(True)
            ctrl_c.press()

    terminal = ScriptedTerminal(["think hard"], on_write=press_while_thinking)
    session = talk(runtime, SlowModel(), terminal, ctrl_c)
    assert "assistant> thinking\ninterrupting the turn" in terminal.text
    assert "  turn stopped: interrupted\nyou> " in terminal.text
    latest = session.latest_run()
    assert latest is not None
    assert latest.status == "aborted"


def test_ctrl_c_twice_during_a_turn_quits_once_the_turn_stopped(
    runtime: Runtime,
) -> None:
    ctrl_c = CtrlC()

    def press_twice(text: str) -> None:
        if text.endswith("assistant> thinking"):
            ctrl_c.press()
            ctrl_c.press()

    terminal = ScriptedTerminal(["think hard", "never read"], on_write=press_twice)
    session = talk(runtime, SlowModel(), terminal, ctrl_c)
    assert terminal.text.endswith(
        "thinking\nquitting once the turn has stopped (Ctrl-C again: now)\n"
        "  turn stopped: interrupted\n"
    )
    assert terminal.lines  # it quit without reading another line
    latest = session.latest_run()
    assert latest is not None
    assert latest.status == "aborted"  # recorded: no turn is left cut off


def test_a_third_ctrl_c_quits_at_once(runtime: Runtime) -> None:
    ctrl_c = CtrlC()

    def press_thrice(text: str) -> None:
        if text.endswith("assistant> thinking"):
            ctrl_c.press()
            ctrl_c.press()
        elif text.endswith("(Ctrl-C again: now)\n"):
            ctrl_c.press()

    terminal = ScriptedTerminal(["think hard", "never read"], on_write=press_thrice)
    talk(runtime, SlowModel(), terminal, ctrl_c)
    assert terminal.text.endswith(
        "quitting once the turn has stopped (Ctrl-C again: now)\n"
    )
    assert terminal.lines


def test_ctrl_c_or_eof_at_the_prompt_quits(runtime: Runtime) -> None:
    for end in (KeyboardInterrupt(), EOFError()):
        terminal = ScriptedTerminal([end, "never read"])
        talk(runtime, ScriptedModel(), terminal)
        assert terminal.text == PROMPT + "\n"


def test_a_prompt_the_session_refuses_is_shown_and_the_loop_goes_on(
    runtime: Runtime,
) -> None:
    session = runtime.create_session(Agent("chat", model=SlowModel()))
    with session.subscribe() as watching:
        session.send_input("busy work", kind="system")  # a turn that never ends
        while not is_delta(watching.get(timeout=10)):
            pass  # once it streamed, that run shows nothing more
    terminal = ScriptedTerminal(["hello"])
    loop = ChatLoop(session, terminal, CtrlC(), poll=0.02)
    try:
        loop.run()
    finally:
        loop.close()
        session.interrupt()  # the busy turn, so that its actor stops
    assert f"you> hello\n  error: session {session.session_id!r} is running" in (
        terminal.text
    )
    assert terminal.text.endswith("you> \n")  # asked for the next line


def test_a_session_of_another_agent_is_refused(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/log.sqlite3"
    with Runtime.open(url) as rt:
        rt.create_session(Agent("other", model=ScriptedModel()), session_id="theirs")
    monkeypatch.setenv("TURNLOG_MODEL", "m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    options = RunOptions(store=url, session_id="theirs", workspace=workspace)
    with pytest.raises(UsageError, match="belongs to agent 'other'"):
        run_interactive(options, load_settings(), ScriptedTerminal(), CtrlC())


def test_a_resumed_session_can_change_its_route(
    workspace: Path, tmp_path: Path, fake: FakeOpenAI, user_config: Path
) -> None:
    user_config.write_text(
        f"""
[routes.first]
model = "model-one"
base_url = "{fake.base_url}"

[routes.second]
model = "model-two"
base_url = "{fake.base_url}"
api = "chat"
"""
    )
    fake.script(Reply(text="from the first"), Reply(text="from the second"))
    url = f"sqlite:///{tmp_path}/log.sqlite3"

    def talk_once(line: str | None, **options: Any) -> ScriptedTerminal:
        terminal = ScriptedTerminal([line] if line else [])
        run_interactive(
            RunOptions(store=url, workspace=workspace, **options),
            load_settings(),
            terminal,
            CtrlC(),
        )
        return terminal

    first = talk_once("hi")
    session_id = first.text.split()[3]
    assert f"turnlog run: session {session_id} (new)\nmodel: first (" in first.text
    assert "assistant> from the first" in first.text

    second = talk_once("hi again", session_id=session_id, route="second")
    assert "(resumed: 2 earlier messages)\nmodel: second (model-two" in second.text
    assert "assistant> from the second" in second.text
    assert fake.paths() == ["/v1/responses", "/v1/chat/completions"]

    third = talk_once(None, session_id=session_id)  # the change was recorded
    assert "(resumed: 4 earlier messages)\nmodel: second (" in third.text
