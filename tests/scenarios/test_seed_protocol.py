"""Seed scenarios from ../shared/seeds/003_d26c8ff80b1370c1.txt.

The protocol face (``create_agent`` / ``submit`` / ``next_event``) drives
each session; checkpoint fields are the checkpoint projection's. Where the
seed counts ``EventMsg::ContextCompacted`` rows, turnlog's compaction
marker is the compaction notice's Complete block ("Context compacted"),
the same row live and in the replay.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from turnlog import (
    Agent,
    Compaction,
    HookResult,
    Interrupt,
    Middleware,
    ModelRequest,
    ModelResponse,
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
from turnlog.domain.context import PROMPT_CACHE_BREAKPOINT_FIELD
from turnlog.domain.model import assistant_message
from turnlog.domain.streaming import DeltaSink, discard_deltas
from turnlog.domain.translation import replay

SCRIPTED_USAGE = {"input_tokens": 1, "output_tokens": 0, "total_tokens": 1}


class Gate:
    """Something a coroutine on the I/O loop awaits until a test opens it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._open = threading.Event()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._lock = threading.Lock()

    async def wait(self) -> None:
        event = asyncio.Event()
        with self._lock:
            if self._open.is_set():
                return
            self._waiting.append((asyncio.get_running_loop(), event))
        self.entered.set()
        await event.wait()

    def open(self) -> None:
        with self._lock:
            self._open.set()
            waiting, self._waiting = self._waiting, []
        for loop, event in waiting:
            loop.call_soon_threadsafe(event.set)


class NativeCompactionModel:
    """Answers "done"; compacts natively; counts both."""

    def __init__(self, compact_gate: Gate | None = None, fail: bool = False) -> None:
        self.responses = 0
        self.compactions = 0
        self.gate = compact_gate
        self.fail = fail

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        self.responses += 1
        return ModelResponse((assistant_message("done"),), dict(SCRIPTED_USAGE))

    async def compact(self, request: ModelRequest) -> ModelResponse:
        self.compactions += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            msg = "compaction failed"
            raise ProviderError(msg)
        item = {"type": "compaction", "encrypted_content": "opaque"}
        return ModelResponse((item,), dict(SCRIPTED_USAGE))


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


def compaction_blocks(events) -> list[p.RenderBlock]:
    return [
        e.msg.block
        for e in events
        if isinstance(e.msg, p.Frontend) and e.msg.capability == "compaction"
    ]


def until_compaction_notice(handle) -> tuple[str | None, p.RenderBlock]:
    """The running turn's id and the first compaction block shown for it."""
    turn_id = None
    while True:
        msg = handle.next_event(timeout=10).msg
        if isinstance(msg, p.TurnStarted):
            turn_id = msg.turn_id
        if isinstance(msg, p.Frontend) and msg.capability == "compaction":
            return turn_id, msg.block


def test_idle_session_start_stop_does_not_consume_the_next_prompt(rt: Runtime) -> None:
    class StoppingSessionStart(Middleware):
        def session_start(self, info):
            return HookResult.stop_turn("session-start hook stopped the turn")

    model = NativeCompactionModel()
    agent = Agent("a", model=model, middleware=[StoppingSessionStart()])
    handle = rt.create_agent(agent, session_id="startup-session-stop")
    handle.submit(UserInput("first"))
    until(handle, p.TurnComplete)
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
    events = [e.msg for e in until(handle, p.TurnAborted, rejected)]
    assert any(isinstance(m, p.TurnStarted) for m in events)
    assert isinstance(events[-1], p.TurnAborted)
    assert not any(
        isinstance(
            m, p.AgentMessage | p.UserMessage | p.ModelStepStarted | p.TurnComplete
        )
        for m in events
    )
    checkpoint = msgspec.json.encode(rt.checkpoints.load("rejected-prompt")).decode()
    assert "do not persist this secret" not in checkpoint
    assert secret.id not in checkpoint
    # nowhere at all: not in the log, not in any view, not in any table
    database = rt.store.location
    with sqlite3.connect(database) as connection:
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
    until(handle, p.TurnComplete)
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
    until(handle, p.ApprovalRequested)
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
            if isinstance(event.msg, p.ToolCallEnd) and event.msg.call_id == "call-1":
                first_recorded.set()
            if isinstance(event.msg, p.TurnComplete):
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


class StoppingCompaction(Middleware):
    def __init__(self, boundary: str) -> None:
        self.boundary = boundary

    def pre_compact(self, info):
        if self.boundary == "before":
            return HookResult.stop_turn("pre-compact hook stopped the turn")
        return None

    def post_compact(self, info):
        if self.boundary == "after":
            return HookResult.stop_turn("post-compact hook stopped the turn")
        return None

    def session_start(self, info):
        if self.boundary == "session_start":
            return HookResult.stop_turn("session-start hook stopped the turn")
        return None


def assert_compaction_stop(
    rt: Runtime, boundary: str, session_id: str, expected: int, expected_reason: str
) -> None:
    model = NativeCompactionModel()
    agent = Agent(
        "a", model=model, middleware=[Compaction(1), StoppingCompaction(boundary)]
    )
    handle = rt.create_agent(agent, session_id=session_id)
    handle.submit(UserInput("hello"))
    reason = None
    accounting = None
    while True:
        msg = handle.next_event(timeout=10).msg
        if isinstance(msg, p.WarningMessage) and msg.message == expected_reason:
            reason = msg.message
        elif isinstance(msg, p.TokenCount):
            accounting = msg
        elif isinstance(msg, p.TurnComplete):
            break
    checkpoint = rt.checkpoints.load(session_id)
    assert (
        model.responses,
        model.compactions,
        checkpoint.compaction_count,
        reason,
    ) == (0, expected, expected, expected_reason)
    assert checkpoint.last_usage is None
    if expected > 0:
        assert accounting is not None, "compaction usage remains visible"
        assert accounting.last == SCRIPTED_USAGE
        assert accounting.total == checkpoint.total_usage
    else:
        assert accounting is None


def test_pre_compact_stop_completes_before_compaction(rt: Runtime) -> None:
    assert_compaction_stop(
        rt, "before", "pre-compact-stop", 0, "pre-compact hook stopped the turn"
    )


def test_post_compact_stop_completes_after_compaction(rt: Runtime) -> None:
    assert_compaction_stop(
        rt, "after", "post-compact-stop", 1, "post-compact hook stopped the turn"
    )


def test_compact_session_start_stop_completes_after_compaction(rt: Runtime) -> None:
    assert_compaction_stop(
        rt,
        "session_start",
        "compact-session-start-stop",
        1,
        "session-start hook stopped the turn",
    )


TITLES = {
    "success": "Context compacted",
    "failure": "Context compaction failed",
    "interrupt": "Context compaction cancelled",
}


@pytest.mark.parametrize("outcome", ["success", "failure", "interrupt"])
def test_compaction_notice_is_live_and_closes_on_success_failure_and_interrupt(
    rt: Runtime, outcome: str
) -> None:
    gate = Gate()
    model = NativeCompactionModel(gate, fail=outcome == "failure")
    handle = rt.create_agent(
        Agent("a", model=model, middleware=[Compaction(1)]), session_id=outcome
    )
    handle.submit(UserInput("compact this"))
    turn_id, pending = until_compaction_notice(handle)
    assert (pending.title, pending.state) == ("Context compacting", "pending")
    assert pending.id is not None
    assert gate.entered.wait(10)
    if outcome == "interrupt":
        handle.submit(Interrupt(turn_id))
    else:
        gate.open()
    completions = 0
    while True:
        msg = handle.next_event(timeout=10).msg
        if isinstance(msg, p.Frontend) and msg.capability == "compaction":
            assert msg.block.id == pending.id
            assert msg.block.state == "complete"
            assert msg.block.title == TITLES[outcome]
            completions += 1
        if isinstance(msg, p.TurnComplete | p.TurnAborted):
            break
    assert completions == 1
    saved = rt.checkpoints.load(outcome)
    assert saved.compaction_count == int(outcome == "success")


class LaterHook(Middleware):
    def __init__(self, request: bool, fail: bool) -> None:
        self.request = request
        self.fail = fail
        self.gate = Gate()

    async def run(self) -> None:
        if self.fail:
            self.gate.entered.set()
            msg = "later preparation hook failed"
            raise ProviderError(msg)
        await self.gate.wait()

    async def pre_model(self, info):
        if not self.request:
            await self.run()

    async def model_request(self, info):
        if self.request:
            await self.run()


@pytest.mark.parametrize("request_hook", [False, True])
@pytest.mark.parametrize("outcome", ["failure", "interrupt", "success"])
def test_compaction_notice_waits_for_later_preparation_hooks_to_settle(
    rt: Runtime, request_hook: bool, outcome: str
) -> None:
    model = NativeCompactionModel()
    later = LaterHook(request_hook, fail=outcome == "failure")
    session_id = f"{outcome}-{request_hook}"
    handle = rt.create_agent(
        Agent("a", model=model, middleware=[Compaction(1), later]),
        session_id=session_id,
    )
    handle.submit(UserInput("compact this"))
    turn_id, pending = until_compaction_notice(handle)
    assert pending.state == "pending"
    assert later.gate.entered.wait(10)
    assert model.compactions == 1
    if outcome != "failure":
        saved = rt.checkpoints.load(session_id)
        assert saved.compaction_count == 0, "compaction stays provisional meanwhile"
        with pytest.raises(TimeoutError):
            handle.next_event(timeout=0.02)  # the notice stays open
        if outcome == "interrupt":
            handle.submit(Interrupt(turn_id))
        else:
            later.gate.open()
    completions = 0
    while True:
        msg = handle.next_event(timeout=10).msg
        if isinstance(msg, p.Frontend) and msg.capability == "compaction":
            assert msg.block.id == pending.id
            assert msg.block.state == "complete"
            assert msg.block.title == TITLES[outcome]
            saved = rt.checkpoints.load(session_id)
            assert saved.compaction_count == int(outcome == "success")
            completions += 1
        if isinstance(msg, p.TurnComplete | p.TurnAborted):
            break
    assert completions == 1, "the row closes before the terminal turn event"
    saved = rt.checkpoints.load(session_id)
    assert saved.compaction_count == int(outcome == "success")
    assert saved.context_epoch == int(outcome == "success")
    transcript = rt.transcript.page(session_id, before_sequence=None, max_batches=100)
    replayed = replay(session_id, (i.event() for i in transcript.items))
    done = [b for b in compaction_blocks(replayed) if b.title == "Context compacted"]
    assert len(done) == int(outcome == "success")


def test_compaction_marker_survives_transcript_replay(rt: Runtime) -> None:
    handle = rt.create_agent(
        Agent("a", model=NativeCompactionModel(), middleware=[Compaction(1)]),
        session_id="durable-compaction",
    )
    handle.submit(UserInput("hello"))
    live_markers = 0
    completed = None
    while True:
        msg = handle.next_event(timeout=10).msg
        if (
            isinstance(msg, p.Frontend)
            and msg.capability == "compaction"
            and msg.block.state == "complete"
        ):
            live_markers += 1
        elif isinstance(msg, p.ModelStepCompleted):
            completed = msg
        elif isinstance(msg, p.TurnComplete):
            break
    checkpoint = rt.checkpoints.load("durable-compaction")
    from turnlog import replay_events

    page = rt.transcript.page(
        "durable-compaction", before_sequence=None, max_batches=100
    )
    replayed = replay_events(page.items, "durable-compaction")
    assert live_markers == 1
    assert checkpoint.context_epoch == 1
    assert checkpoint.compaction_count == 1
    assert checkpoint.last_context_rewrite["reasons"] == ["compaction"]
    breakpoints = [
        part
        for item in checkpoint.context
        if isinstance(item.get("content"), list)
        for part in item["content"]
        if part.get(PROMPT_CACHE_BREAKPOINT_FIELD) is True
    ]
    assert len(breakpoints) == 1
    assert completed is not None
    cache = completed.diagnostics["prompt_cache"]
    assert cache["context_epoch"] == 1
    assert cache["outcome"] == "context_rewrite"
    assert cache["rewrite_reasons"] == ["compaction"]
    done = [b for b in compaction_blocks(replayed) if b.title == "Context compacted"]
    assert len(done) == 1


def test_provider_failure_records_one_failed_execution(rt: Runtime) -> None:
    model = ScriptedModel([ProviderError("upstream returned 500")])
    handle = rt.create_agent(Agent("a", model=model), session_id="provider-failure")
    handle.submit(UserInput("fail"))
    until(handle, p.TurnAborted)
    execution = rt.executions.page(
        "provider-failure", before_sequence=None, limit=1
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
    until(handle, p.TurnComplete)
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
    until(handle, p.TurnAborted)
    saved = rt.checkpoints.load("usage-observer-failure")
    execution = rt.executions.page("usage-observer-failure", limit=1).executions.pop()
    assert saved.total_usage == {}
    assert saved.last_usage is None
    assert execution.outcome == "failed"
    assert execution.model_calls == 1
    assert execution.usage == {}
