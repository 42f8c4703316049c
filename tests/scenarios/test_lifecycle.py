"""Lifecycle edges: every call after ``close()``, and tools that outlive it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    RunConfig,
    Runtime,
    RuntimeClosedError,
    ScriptedModel,
    SessionClosedError,
    UserInput,
    calls,
    function_tool,
    tool_call,
)
from turnlog.actors.actor_pool import POOL
from turnlog.domain import protocol as p
from turnlog.testing import wait_for


class Closed:
    """A runtime that ran a turn and was closed, and the handles it gave."""

    def __init__(self, url: str) -> None:
        self.agent = Agent("a", model=ScriptedModel(["one", "two", "three"]))
        self.rt = Runtime.open(url)
        self.session = self.rt.create_session(self.agent, session_id="s")
        self.session.prompt("hello", timeout=10)
        self.handle = self.rt.create_agent(self.agent, session_id="h")
        self.rt.close()


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> Closed:
    path = tmp_path_factory.mktemp("closed") / "turnlog.sqlite3"
    return Closed(f"sqlite:///{path}")


CALLS: dict[str, Callable[[Closed], Any]] = {
    "create_session": lambda c: c.rt.create_session(c.agent, session_id="new"),
    "create_session existing": lambda c: c.rt.create_session(c.agent, session_id="s"),
    "create_agent": lambda c: c.rt.create_agent(c.agent, session_id="new"),
    "checkpoints.load": lambda c: c.rt.checkpoints.load("s"),
    "transcript.page": lambda c: c.rt.transcript.page("s"),
    "transcript.all": lambda c: c.rt.transcript.all("s"),
    "transcript.sessions": lambda c: c.rt.transcript.sessions(),
    "executions.page": lambda c: c.rt.executions.page("s"),
    "replay_events": lambda c: c.rt.replay_events("s"),
    "sessions": lambda c: c.rt.sessions(),
    "approvals.resolve": lambda c: c.rt.approvals.resolve("r", "allow"),
    "session.prompt": lambda c: c.session.prompt("again", timeout=10),
    "session.follow_up": lambda c: c.session.follow_up("later"),
    "session.steer": lambda c: c.session.steer("left"),
    "session.send_input": lambda c: c.session.send_input("peer says"),
    "session.update_shared_state": lambda c: c.session.update_shared_state(k=1),
    "session.messages": lambda c: c.session.messages(),
    "session.subscribe": lambda c: c.session.subscribe(),
    "agent.submit": lambda c: c.handle.submit(UserInput("hi")),
    "agent.next_event": lambda c: c.handle.next_event(timeout=10),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_after_close_every_call_raises_session_closed(
    closed: Closed, call: Callable[[Closed], Any]
) -> None:
    with pytest.raises(RuntimeClosedError, match="the runtime was closed") as raised:
        call(closed)
    assert isinstance(raised.value, SessionClosedError)


def test_closing_twice_is_harmless(closed: Closed) -> None:
    closed.rt.close()
    with closed.rt:
        pass


def join_pool_threads(prefix: str) -> None:
    """Waits for pool threads: each hands its result on after returning."""
    for thread in threading.enumerate():
        if thread.name.startswith(prefix):
            thread.join(10)


def assert_nothing_printed(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_a_sync_tool_that_finishes_after_close_prints_nothing(
    sqlite_url: str,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()

    @function_tool
    def slow() -> str:
        """Holds until the test releases it."""
        entered.set()
        release.wait(30)
        returned.set()
        return "late"

    agent = Agent(
        "a", model=ScriptedModel([calls(tool_call("slow")), "done"]), tools=[slow]
    )
    caplog.set_level(logging.DEBUG)
    rt = Runtime.open(sqlite_url)
    try:
        session = rt.create_session(agent, session_id="s")
        events = session.subscribe()
        session.send_input("go")  # starts a turn; no prompt waits on it
        wait_for(events, lambda m: isinstance(m, p.ToolCallStartedMsg))
        assert entered.wait(10)
    finally:
        rt.close()  # returns while the tool still runs
    assert not returned.is_set()
    release.set()
    assert returned.wait(10)
    # the tool's worker hands its output on (to a stopped session) and idles
    assert POOL.wait_until_quiet(10)
    assert_nothing_printed(capfd, caplog)
    # close did not wait for the call: the log shows it started, not
    # finished, and reopening the session closes it as interrupted
    with Runtime.open(sqlite_url) as reopened:
        reopened.create_session(agent, session_id="s")
        checkpoint = reopened.checkpoints.load("s")
        assert checkpoint is not None
        outputs = [i for i in checkpoint.context if i["type"] == "function_call_output"]
        assert [o["output"] for o in outputs] == ["interrupted; outcome unknown"]


def test_an_approval_provider_that_answers_after_close_prints_nothing(
    sqlite_url: str,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    asked, release, answered = threading.Event(), threading.Event(), threading.Event()

    class Slow:
        def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
            asked.set()
            release.wait(30)
            answered.set()
            return ApprovalDecision.allow()

    @function_tool(needs_approval=True)
    def deploy() -> str:
        """Needs approval."""
        return "deployed"

    model = ScriptedModel([calls(tool_call("deploy")), "done"])
    caplog.set_level(logging.DEBUG)
    rt = Runtime.open(sqlite_url, run_config=RunConfig(approval_provider=Slow()))
    try:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy]), session_id="s"
        )
        session.send_input("go")
        assert asked.wait(10)
    finally:
        rt.close()
    release.set()
    assert answered.wait(10)
    join_pool_threads("turnlog-approval")
    assert_nothing_printed(capfd, caplog)
