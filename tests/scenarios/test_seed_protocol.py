"""Seed scenarios from ../shared/seeds/003_d26c8ff80b1370c1.txt (its
compaction scenarios are in test_seed_compaction.py).

The protocol face (``create_agent`` / ``submit`` / ``next_event``) drives
each session; checkpoint fields are the checkpoint projection's. Where the
seed counts ``EventMsg::ContextCompacted`` rows, turnlog's compaction
marker is the compaction notice's Complete block ("Context compacted"),
the same row live and in the replay.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
from compaction_models import SCRIPTED_USAGE, NativeCompactionModel

from turnlog import (
    Agent,
    HookResult,
    Middleware,
    ModelRouter,
    ProviderError,
    RunConfig,
    Runtime,
    ScriptedModel,
    SessionFileReference,
    UserInput,
    calls,
    function_tool,
    reply,
    tool_call,
)
from turnlog.domain import protocol as p


def until(handle, kind, submission: str | None = None) -> list[p.Event]:
    """Events up to and including the first ``kind`` (of ``submission``)."""
    seen = []
    while True:
        event = handle.next_event(timeout=10)
        if submission is not None and event.submission_id != submission:
            continue
        seen.append(event)
        if isinstance(event.msg, kind):
            return seen


def test_idle_session_start_stop_does_not_consume_the_next_prompt(rt: Runtime) -> None:
    class StoppingSessionStart(Middleware):
        def session_start(self, info):
            return HookResult.stop_turn("session-start hook stopped the turn")

    model = NativeCompactionModel()
    agent = Agent("a", model=model, middleware=[StoppingSessionStart()])
    handle = rt.create_agent(agent, session_id="startup-session-stop")
    handle.submit(UserInput("first"))
    until(handle, p.TurnCompletedMsg)
    assert model.responses == 1


def test_rejected_prompt_aborts_without_persisting_or_wedging_the_next_turn(
    rt: Runtime, tmp_path: Path
) -> None:
    class RejectFirstPrompt(Middleware):
        rejected = False

        def user_prompt(self, info):
            if self.rejected:
                return None
            self.rejected = True
            return HookResult.reject_prompt("the prompt was refused")

    model = NativeCompactionModel()
    handle = rt.create_agent(
        Agent("a", model=model, middleware=[RejectFirstPrompt()]),
        session_id="rejected-prompt",
    )
    secret = SessionFileReference(
        "da913625-36d8-4624-815f-5523eb93b95f", "secret.txt", 6, "text/plain"
    )
    rejected = handle.submit(UserInput("do not persist this secret", (secret,)))
    events = [e.msg for e in until(handle, p.TurnAbortedMsg, rejected)]
    assert any(isinstance(m, p.TurnStartedMsg) for m in events)
    assert isinstance(events[-1], p.TurnAbortedMsg)
    assert not any(
        isinstance(
            m,
            p.AgentMessageMsg
            | p.InputAcceptedMsg
            | p.ModelStepStartedMsg
            | p.TurnCompletedMsg,
        )
        for m in events
    )
    checkpoint = msgspec.json.encode(rt.checkpoints.load("rejected-prompt")).decode()
    assert "do not persist this secret" not in checkpoint
    assert secret.id not in checkpoint
    # nowhere at all: not in the log, not in any view, not in any table
    database = rt.store.location
    with closing(sqlite3.connect(database)) as connection:
        tables = [
            r[0]
            for r in connection.execute(
                "SELECT name FROM sqlite_master WHERE type='table'"
            )
        ]
        for table in tables:
            for row in connection.execute(f"SELECT * FROM {table}"):
                text = repr(row)
                assert "do not persist" not in text
                assert secret.id not in text

    handle.submit(UserInput("continue"))
    until(handle, p.TurnCompletedMsg)
    assert model.responses == 1


class ToolHookContext(Middleware):
    def pre_tool(self, info):
        return HookResult.add_context(f"about to run {info.name}")

    def post_tool(self, info):
        return HookResult.add_context(f"{info.name} said {info.output}")


def hook_kind(item: dict[str, Any]) -> str | None:
    return item.get("turnlog_kind")


def test_pre_tool_hook_context_is_durable_before_open_call_at_approval(
    rt: Runtime,
) -> None:
    @function_tool(needs_approval=True)
    def approval_required() -> str:
        """Needs approval."""
        return "ran"

    model = ScriptedModel([calls(tool_call("approval_required"))])
    agent = Agent(
        "a", model=model, tools=[approval_required], middleware=[ToolHookContext()]
    )
    handle = rt.create_agent(agent, session_id="pre-tool-hook-approval")
    handle.submit(UserInput("run it"))
    until(handle, p.ApprovalRequestedMsg)
    saved = rt.checkpoints.load("pre-tool-hook-approval")
    context = list(saved.context)
    call = next(i for i, item in enumerate(context) if item["type"] == "function_call")
    pre = next(
        i for i, item in enumerate(context) if hook_kind(item) == "pre_tool_hook"
    )
    assert (pre + 1, saved.pending_approval is not None) == (call, True)


def test_post_tool_hook_context_follows_only_executed_tool_outputs(
    sqlite_url: str,
) -> None:
    first_recorded = threading.Event()

    @function_tool(needs_approval=True)
    def approval_required(context) -> str:
        """Needs approval (the policy allows it)."""
        if context.call_id == "call-3":
            first_recorded.wait(10)  # completion order: call-1, then call-3
        return f"ran {context.call_id}"

    model = ScriptedModel(
        [
            calls(
                tool_call("approval_required", call_id="call-1"),
                tool_call("missing", call_id="call-2"),
                tool_call("approval_required", call_id="call-3"),
                usage=SCRIPTED_USAGE,
            ),
            reply("done", usage=SCRIPTED_USAGE),
        ]
    )
    agent = Agent(
        "a", model=model, tools=[approval_required], middleware=[ToolHookContext()]
    )
    with Runtime.open(sqlite_url, run_config=RunConfig(approval_policy="allow")) as rt:
        handle = rt.create_agent(agent, session_id="tool-hook-context")
        handle.submit(UserInput("run it"))
        while True:
            event = handle.next_event(timeout=10)
            if (
                isinstance(event.msg, p.ToolCallFinishedMsg)
                and event.msg.call_id == "call-1"
            ):
                first_recorded.set()
            if isinstance(event.msg, p.TurnCompletedMsg):
                break
    sequence = []
    for item in model.requests[1].items:
        kind = hook_kind(item)
        if kind in ("pre_tool_hook", "post_tool_hook"):
            sequence.append((kind, None))
        elif item["type"] in ("function_call", "function_call_output"):
            sequence.append((item["type"], item["call_id"]))
    assert sequence == [
        ("pre_tool_hook", None),
        ("pre_tool_hook", None),
        ("function_call", "call-1"),
        ("function_call", "call-2"),
        ("function_call", "call-3"),
        ("function_call_output", "call-2"),
        ("function_call_output", "call-1"),
        ("post_tool_hook", None),
        ("function_call_output", "call-3"),
        ("post_tool_hook", None),
    ]


def test_provider_failure_records_one_failed_execution(rt: Runtime) -> None:
    model = ScriptedModel([ProviderError("upstream returned 500")])
    handle = rt.create_agent(Agent("a", model=model), session_id="provider-failure")
    handle.submit(UserInput("fail"))
    until(handle, p.TurnAbortedMsg)
    execution = rt.executions.page(
        "provider-failure", before_position=None, limit=1
    ).executions.pop()
    assert (execution.outcome, execution.model_calls, execution.tool_calls) == (
        "failed",
        1,
        0,
    )


def test_cloned_agent_config_inherits_route_aware_usage_observer(rt: Runtime) -> None:
    model = ScriptedModel([reply("done", usage=SCRIPTED_USAGE)])
    router = ModelRouter("main", model).register("alternate", model)
    observed: list[tuple[str, int]] = []
    template = Agent(
        "a",
        model=router,
        usage_observer=lambda route, usage: observed.append(
            (route, usage["total_tokens"])
        ),
    )
    config = template.clone(model_route="alternate")
    handle = rt.create_agent(config, session_id="child")
    handle.submit(UserInput("hello"))
    until(handle, p.TurnCompletedMsg)
    assert observed == [("alternate", 1)]


def test_failing_usage_observer_aborts_before_checkpoint_usage_is_committed(
    rt: Runtime,
) -> None:
    def failing_observer(route: str, usage: dict[str, int] | None) -> None:
        msg = "usage sink failed"
        raise RuntimeError(msg)

    model = ScriptedModel([reply("done", usage=SCRIPTED_USAGE)])
    agent = Agent("a", model=model, usage_observer=failing_observer)
    handle = rt.create_agent(agent, session_id="usage-observer-failure")
    handle.submit(UserInput("hello"))
    until(handle, p.TurnAbortedMsg)
    saved = rt.checkpoints.load("usage-observer-failure")
    execution = rt.executions.page("usage-observer-failure", limit=1).executions.pop()
    assert saved.total_usage == {}
    assert saved.last_usage is None
    assert execution.outcome == "failed"
    assert execution.model_calls == 1
    assert execution.usage == {}
