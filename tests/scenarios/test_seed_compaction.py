"""The compaction scenarios of ../shared/seeds/003_d26c8ff80b1370c1.txt.

The protocol face (``create_agent`` / ``submit`` / ``next_event``) drives
each session; checkpoint fields are the checkpoint projection's. Where the
seed counts ``EventMsg::ContextCompacted`` rows, turnlog's compaction
marker is the compaction notice's Complete block ("Context compacted"),
the same row live and in the replay.
"""

from __future__ import annotations

import pytest
from compaction_models import SCRIPTED_USAGE, Gate, NativeCompactionModel

from turnlog import (
    Agent,
    Compaction,
    HookResult,
    Interrupt,
    Middleware,
    ProviderError,
    Runtime,
    UserInput,
)
from turnlog.domain import protocol as p
from turnlog.domain.context import PROMPT_CACHE_BREAKPOINT_FIELD
from turnlog.domain.translation import replay


def compaction_blocks(events) -> list[p.RenderBlock]:
    return [
        e.msg.block
        for e in events
        if isinstance(e.msg, p.FrontendMsg) and e.msg.capability == "compaction"
    ]


def until_compaction_notice(handle) -> tuple[str | None, p.RenderBlock]:
    """The running turn's id and the first compaction block shown for it."""
    turn_id = None
    while True:
        msg = handle.next_event(timeout=10).msg
        if isinstance(msg, p.TurnStartedMsg):
            turn_id = msg.turn_id
        if isinstance(msg, p.FrontendMsg) and msg.capability == "compaction":
            return turn_id, msg.block


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
        if isinstance(msg, p.WarningRaisedMsg) and msg.message == expected_reason:
            reason = msg.message
        elif isinstance(msg, p.UsageRecordedMsg):
            accounting = msg
        elif isinstance(msg, p.TurnCompletedMsg):
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
        if isinstance(msg, p.FrontendMsg) and msg.capability == "compaction":
            assert msg.block.id == pending.id
            assert msg.block.state == "complete"
            assert msg.block.title == TITLES[outcome]
            completions += 1
        if isinstance(msg, p.TurnCompletedMsg | p.TurnAbortedMsg):
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
        if isinstance(msg, p.FrontendMsg) and msg.capability == "compaction":
            assert msg.block.id == pending.id
            assert msg.block.state == "complete"
            assert msg.block.title == TITLES[outcome]
            saved = rt.checkpoints.load(session_id)
            assert saved.compaction_count == int(outcome == "success")
            completions += 1
        if isinstance(msg, p.TurnCompletedMsg | p.TurnAbortedMsg):
            break
    assert completions == 1, "the row closes before the terminal turn event"
    saved = rt.checkpoints.load(session_id)
    assert saved.compaction_count == int(outcome == "success")
    assert saved.context_epoch == int(outcome == "success")
    transcript = rt.transcript.page(session_id, before_position=None, max_batches=100)
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
            isinstance(msg, p.FrontendMsg)
            and msg.capability == "compaction"
            and msg.block.state == "complete"
        ):
            live_markers += 1
        elif isinstance(msg, p.ModelStepCompletedMsg):
            completed = msg
        elif isinstance(msg, p.TurnCompletedMsg):
            break
    checkpoint = rt.checkpoints.load("durable-compaction")
    from turnlog import replay_events

    page = rt.transcript.page(
        "durable-compaction", before_position=None, max_batches=100
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
