"""``turnlog sessions`` says where each session stands and how it began.

A session whose turns all failed is ``failed``, one that waits for someone
to approve a tool call says so, and each line ends with the start of the
session's first prompt.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from cli_support import run

from turnlog import (
    Agent,
    ProviderError,
    RunEvent,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain.protocol import ApprovalRequestedMsg


def columns(out: str) -> dict[str, list[str]]:
    """Each session's line cut at the header's columns, by session id."""
    header, *lines = out.splitlines()
    names = ["SESSION", "TURNS", "STATE", "LAST ACTIVITY (UTC)", "FIRST PROMPT"]
    starts = [header.index(name) for name in names]
    assert starts == sorted(starts), header
    rows = {}
    for line in lines:
        ends = [*starts[1:], None]
        cells = [line[a:b].strip() for a, b in zip(starts, ends, strict=True)]
        rows[cells[0]] = cells[1:]
    return rows


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploys to ``target``."""
    return f"deployed to {target}"


def test_sessions_shows_failed_waiting_closed_and_idle_with_first_prompts(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    failing = Agent(
        "flaky",
        model=ScriptedModel([ProviderError("down"), ProviderError("still down")]),
    )
    fine = Agent("fine", model=ScriptedModel(["hello", "bye"]))
    asking = Agent(
        "asking",
        model=ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "done"]),
        tools=[deploy],
    )
    with Runtime.open(store) as runtime, ThreadPoolExecutor(1) as pool:
        broken = runtime.create_session(failing, session_id="broken")
        assert broken.prompt("first try\n  of   many", timeout=10).status == "failed"
        assert broken.prompt("second try", timeout=10).status == "failed"
        idle = runtime.create_session(fine, session_id="idle")
        assert idle.prompt("say hello", timeout=10).completed
        closed = runtime.create_session(fine, session_id="closed")
        closed.close()
        waiting = runtime.create_session(asking, session_id="waiting")
        events = waiting.subscribe()
        run_result = pool.submit(waiting.prompt, "deploy to prod", timeout=20)
        while True:
            item = events.get(timeout=20)
            if isinstance(item, RunEvent) and isinstance(
                item.event.msg, ApprovalRequestedMsg
            ):
                request_id = item.event.msg.request_id
                break
        try:
            code, out, err = run(capsys, "--store", store, "sessions")
        finally:
            waiting.approve(request_id, "deny")
            assert run_result.result(timeout=20).completed

    assert (code, err) == (0, "")
    rows = columns(out)
    assert rows["broken"][:2] == ["2", "failed"]
    assert rows["broken"][3] == "first try of many"  # one line
    assert rows["idle"][:2] == ["1", "idle"]
    assert rows["idle"][3] == "say hello"
    assert rows["closed"][:2] == ["0", "closed"]
    assert rows["closed"][3] == "-"
    assert rows["waiting"][:2] == ["1", "waiting for approval"]
    assert rows["waiting"][3] == "deploy to prod"
    _, after, _ = run(capsys, "--store", store, "sessions")
    assert columns(after)["waiting"][1] == "idle"  # the denial ended the turn


def test_the_sessions_reader_lists_summaries_most_recent_last(store: str) -> None:
    agent = Agent("fine", model=ScriptedModel(["one", "two"]))
    with Runtime.open(store) as runtime:
        first = runtime.create_session(agent, session_id="first")
        second = runtime.create_session(agent, session_id="second")
        second.prompt("to the second", timeout=10)
        first.prompt("to the first", timeout=10)

        listed = runtime.summaries.all()
        one = runtime.summaries.load("first")

    assert [summary.session_id for summary in listed] == ["second", "first"]
    assert one is not None
    assert (one.first_prompt, one.state, one.turns) == ("to the first", "idle", 1)
