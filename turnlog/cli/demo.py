"""``turnlog demo``: one offline session a newcomer can run, then audit.

A scripted model (no network, no API key) is asked a date question, calls a
small real tool, and answers with what the tool returned. The conversation
is printed from the session's event stream as it happens, the way a
service embedding turnlog would follow a session.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from turnlog.agent import Agent
from turnlog.cli.timeline import readable_arguments
from turnlog.domain.errors import UsageError
from turnlog.domain.model import ModelRequest, ModelResponse
from turnlog.domain.protocol import (
    AgentMessageMsg,
    InputAcceptedMsg,
    ModelStepFailedMsg,
    ToolCallFinishedMsg,
    ToolCallStartedMsg,
    TurnAbortedMsg,
    WarningRaisedMsg,
)
from turnlog.domain.run import EventsMissed, RunEvent, RunResult
from turnlog.runtime import Runtime
from turnlog.scripted import ScriptedModel, calls, reply, tool_call
from turnlog.session import AgentSession, Subscription
from turnlog.tools import function_tool

QUESTION = "Which day of the week is 100 days after 2024-02-10?"
"""What the demo user asks."""

AGENT_NAME = "date-helper"
"""The demo agent's name; ``--session`` continues only sessions of this agent."""

RUN_TIMEOUT = 30.0
"""Seconds the demo waits for its run; the scripted model answers at once."""

_WEEKDAYS = (
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
)


@function_tool
def add_days(start: str, days: int) -> str:
    """Returns the date ``days`` days after ``start`` (YYYY-MM-DD) and its weekday."""
    day = date.fromisoformat(start) + timedelta(days=days)
    # A fixed table rather than strftime("%A"), which follows the locale.
    return f"{day.isoformat()} ({_WEEKDAYS[day.weekday()]})"


def _answer(request: ModelRequest) -> ModelResponse:
    # The final step reads the tool's output from the request, as a real
    # model would, so the answer always matches what the tool computed.
    output = next(
        item["output"]
        for item in reversed(request.items)
        if item.get("type") == "function_call_output"
    )
    return reply(
        f"100 days after 2024-02-10 is {output}.",
        usage={"input_tokens": 61, "output_tokens": 14, "total_tokens": 75},
    )


def demo_agent() -> Agent:
    """The demo's agent: a scripted model and the ``add_days`` tool."""
    model = ScriptedModel(
        [
            calls(
                tool_call(
                    "add_days",
                    {"start": "2024-02-10", "days": 100},
                    # Unique across runs: a session continued with --session
                    # keeps every earlier call in the model's context.
                    call_id=f"call_{uuid.uuid4().hex[:12]}",
                ),
                text="Let me count that with the add_days tool.",
                usage={"input_tokens": 48, "output_tokens": 22, "total_tokens": 70},
            ),
            _answer,
        ]
    )
    return Agent(
        AGENT_NAME,
        model=model,
        tools=[add_days],
        instructions="Answer date questions; use add_days for date arithmetic.",
    )


def describe(item: Any) -> str | None:
    """A conversation line for one subscription item, or None to skip it."""
    if isinstance(item, EventsMissed):
        return f"  ({item.count} events were missed)"
    if not isinstance(item, RunEvent):
        return None  # RunStarted and RunFinished: the caller reports the run
    return describe_msg(item.event.msg)


def describe_msg(msg: object) -> str | None:
    """A conversation line for one event message, or None to skip it."""
    match msg:
        case InputAcceptedMsg(text=text):
            return f"  user         {text}"
        case AgentMessageMsg(text=text):
            return f"  assistant    {text}"
        case ToolCallStartedMsg(name=name, arguments=arguments):
            return f"  tool call    {name} {readable_arguments(arguments)}"
        case ToolCallFinishedMsg(name=name, output=output, is_error=is_error):
            label = "tool error " if is_error else "tool result"
            return f"  {label}  {name} -> {output}"
        case ModelStepFailedMsg(error_type=error_type, message=message):
            return f"  model error  {error_type}: {message}"
        case TurnAbortedMsg(reason=reason):
            return f"  turn ended   {reason}"
        case WarningRaisedMsg(message=message):
            return f"  warning      {message}"
        case _:
            return None  # bookkeeping (steps, usage, turn markers): see the audit


def print_conversation(subscription: Subscription) -> None:
    """Prints a subscription's conversation lines until it is closed."""
    # Iteration ends once the subscription is closed and its buffer is empty.
    for item in subscription:
        line = describe(item)
        if line is not None:
            print(line, flush=True)


def check_can_continue(
    runtime: Runtime, session_id: str, agent_name: str = AGENT_NAME
) -> None:
    """Refuses, recording nothing, a session the demo must not write to.

    A session of another agent is someone's real conversation. A session
    with a running turn may be running in another process right now:
    opening it here would close that turn as cut off by a crash.
    """
    checkpoint = runtime.checkpoints.load(session_id)
    if checkpoint is None:
        return
    if checkpoint.agent_name != agent_name:
        msg = (
            f"session {session_id!r} belongs to agent {checkpoint.agent_name!r}; "
            "the demo continues only its own sessions"
        )
        raise UsageError(msg)
    if checkpoint.running_turn is not None:
        msg = (
            f"session {session_id!r} has a turn running, perhaps in another "
            "process; the demo will not take it over"
        )
        raise UsageError(msg)


def turnlog_executable() -> str:
    """The absolute path of the ``turnlog`` command that is running, if found.

    A newcomer runs ``.venv/bin/turnlog demo`` without the venv on PATH, so
    a hint that says just ``turnlog`` would not run as printed.
    """
    invoked = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if invoked is not None and invoked.name == "turnlog" and invoked.is_file():
        return str(invoked.absolute())
    beside_python = Path(sys.executable).parent / "turnlog"
    if beside_python.is_file():
        return str(beside_python)
    return shutil.which("turnlog") or "turnlog"


def next_steps(program: str) -> list[str]:
    """What to try after the demo: a real model, embedding it, the log."""
    return [
        "next steps:",
        "  a real model:   export OPENAI_API_KEY=... TURNLOG_MODEL=gpt-4.1-mini",
        f"                  then {program} run",
        "                  (any OpenAI-compatible server: README.md, 'Real models')",
        "  embed it:       Runtime.open(), rt.create_session(agent), "
        "session.prompt(...)",
        "                  (README.md, 'Embedding it')",
        f"  every session:  {program} sessions",
    ]


def run_demo(runtime: Runtime, session_id: str) -> RunResult:
    """Runs the demo question in ``session_id``, printing it as it happens.

    The run's RunFinished is published before ``prompt`` returns, so closing
    the subscription after ``prompt`` loses nothing: the printer reads what
    is buffered and stops.
    """
    check_can_continue(runtime, session_id)
    session = runtime.create_session(demo_agent(), session_id=session_id)
    intro = (
        "turnlog demo: a scripted model (offline, no API key) answers one "
        "question with one tool call.\n"
    )
    return prompt_printed(session, QUESTION, intro)


def prompt_printed(session: AgentSession, text: str, intro: str) -> RunResult:
    """Prints ``intro``, then prompts ``session`` with ``text`` while its
    conversation is printed from its event stream as it happens."""
    subscription = session.subscribe()
    print(intro, flush=True)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="demo") as pool:
        printing = pool.submit(print_conversation, subscription)
        try:
            result = session.prompt(text, timeout=RUN_TIMEOUT)
        finally:
            subscription.close()
            printing.result(timeout=RUN_TIMEOUT)
    return result
