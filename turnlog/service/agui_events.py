"""turnlog's events as AG-UI events: one translator per AG-UI run.

An AG-UI run is one request to ``POST /agui``: it opens with
``RUN_STARTED`` and a ``STATE_SNAPSHOT`` of the shared state, and ends
with ``RUN_FINISHED`` (the turn completed; its outcome is ``cancelled``
when the turn was aborted, ``interrupt`` when it waits on approvals) or
``RUN_ERROR`` (the turn failed). In between:

* streamed text deltas open a text message (``TEXT_MESSAGE_START``) and
  add to it (``TEXT_MESSAGE_CONTENT``); the durable ``agent_message``
  closes it (``TEXT_MESSAGE_END``), first adding whatever text the deltas
  did not carry (a model that does not stream sends it all there);
* ``tool_call_begin`` is ``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` (the
  whole arguments) and ``TOOL_CALL_END``; ``tool_call_end`` is
  ``TOOL_CALL_RESULT``;
* ``shared_state_changed`` is a ``STATE_SNAPSHOT`` of the whole state.

Everything else in the log (model steps, token counts...) has no AG-UI
counterpart and is left out. The translator is pure: the endpoint feeds
it events and sends what it returns.

Every event carries ``timestamp`` (milliseconds since the epoch, as
AG-UI's ``BaseEvent`` has it): an event made from a turnlog event has
that event's ``timestamp`` (when the fact was recorded; for a streamed
delta, when it was streamed); the run's own frame (``RUN_STARTED``, the
first state snapshot, an interrupt or error the endpoint ends the run
with) has the time it was made.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.protocol import (
    AgentHandedOffMsg,
    AgentMessageDeltaMsg,
    AgentMessageMsg,
    Event,
    SessionClosedMsg,
    SharedStateUpdatedMsg,
    ToolCallFinishedMsg,
    ToolCallStartedMsg,
    TurnAbortedMsg,
    TurnCompletedMsg,
)

PROTOCOL_VERSION = "1.0"
"""The AG-UI protocol version this producer speaks."""

APPROVAL_REASON = "tool_approval"
"""``Interrupt.reason`` of a tool call waiting for approval."""

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"decision": {"enum": ["allow", "allow_session", "deny", "abort"]}},
    "required": ["decision"],
}
"""What a resume entry's payload must be (``Interrupt.response_schema``)."""


def approval_interrupt(request: ApprovalRequest, thread_id: str = "") -> Interrupt:
    """A pending approval as an AG-UI interrupt (its id is the request's).

    A request of a child session (an agent the thread's session runs as a
    tool) names that session in its metadata (``sessionId``).
    """
    child = (
        {"sessionId": request.session_id}
        if thread_id and request.session_id != thread_id
        else {}
    )
    try:
        arguments: Any = json.loads(request.arguments)
    except ValueError:
        arguments = request.arguments
    return Interrupt(
        id=request.request_id,
        reason=APPROVAL_REASON,
        message=f"{request.tool_name} wants to run with {request.arguments}",
        tool_call_id=request.call_id,
        response_schema=DECISION_SCHEMA,
        metadata={"toolName": request.tool_name, "arguments": arguments, **child},
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def timestamp_ms(moment: datetime) -> int:
    """``moment`` as AG-UI's ``timestamp``: whole milliseconds since the epoch."""
    return (moment - _EPOCH) // _MILLISECOND


def _stamped(events: list[BaseEvent], moment: datetime | None) -> list[BaseEvent]:
    """``events``, each given ``moment`` (now, if None) as its timestamp."""
    ms = timestamp_ms(moment if moment is not None else datetime.now(UTC))
    for event in events:
        event.timestamp = ms
    return events


HANDOFF_EVENT = "turnlog.agent_handed_off"
"""The ``CUSTOM`` event's name for a handoff: the agent in charge changed."""


class AguiTranslator:
    """Turns one AG-UI run's turnlog events into AG-UI events.

    Args:
        thread_id: the AG-UI thread (the session id).
        run_id: the AG-UI run (the request's ``runId``).
        shared_state: the session's shared state as the run starts.
    """

    def __init__(
        self, thread_id: str, run_id: str, shared_state: dict[str, Any]
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.state = dict(shared_state)
        self.finished = False
        """Whether the run's last event (finished or error) was made."""
        self._messages = 0
        self._text_id: str | None = None
        self._streamed = ""

    def start(self) -> list[BaseEvent]:
        """``RUN_STARTED`` and the shared state as the run starts."""
        started = RunStartedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            protocol_version=PROTOCOL_VERSION,
        )
        return _stamped([started, StateSnapshotEvent(snapshot=dict(self.state))], None)

    def delta(self, event: Event) -> list[BaseEvent]:
        """A streamed text delta: text message start (once) and content."""
        return _stamped(self._delta(event), event.timestamp)

    def _delta(self, event: Event) -> list[BaseEvent]:
        msg = event.msg
        if self.finished or not isinstance(msg, AgentMessageDeltaMsg) or not msg.delta:
            return []
        out: list[BaseEvent] = []
        if self._text_id is None:
            out.append(self._open_text())
        assert self._text_id is not None
        self._streamed += msg.delta
        out.append(TextMessageContentEvent(message_id=self._text_id, delta=msg.delta))
        return out

    def durable(self, event: Event) -> list[BaseEvent]:
        """A durable event of the run's turn, as AG-UI events (maybe none)."""
        return _stamped(self._durable(event), event.timestamp)

    def _durable(self, event: Event) -> list[BaseEvent]:
        if self.finished:
            return []
        msg = event.msg
        match msg:
            case AgentMessageMsg(text=text):
                return self._close_text(text)
            case ToolCallStartedMsg(call_id=call_id, name=name, arguments=arguments):
                out = self._close_text(None)
                out.append(
                    ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name)
                )
                if arguments:
                    out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))
                out.append(ToolCallEndEvent(tool_call_id=call_id))
                return out
            case ToolCallFinishedMsg(call_id=call_id, output=output):
                return [
                    ToolCallResultEvent(
                        message_id=f"{call_id}-result",
                        tool_call_id=call_id,
                        content=output,
                        role="tool",
                    )
                ]
            case AgentHandedOffMsg(from_agent=a, to_agent=b, reason=why):
                handed = {"from_agent": a, "to_agent": b, "reason": why}
                return [CustomEvent(name=HANDOFF_EVENT, value=handed)]
            case SharedStateUpdatedMsg(changes=changes):
                self.state.update(changes)
                return [StateSnapshotEvent(snapshot=dict(self.state))]
            case TurnCompletedMsg(last_agent_message=last, output=output):
                # A typed answer is the run's result as its JSON object.
                result = last if output is msgspec.UNSET else output
                return self._finish(self._finished(result=result))
            case TurnAbortedMsg(reason=reason, failed=True):
                return self._finish(RunErrorEvent(message=reason, code="turn_failed"))
            case TurnAbortedMsg():
                outcome = RunFinishedCancelledOutcome()
                return self._finish(self._finished(outcome))
            case SessionClosedMsg():
                error = RunErrorEvent(message="the session closed", code="closed")
                return self._finish(error)
            case _:
                return []

    def interrupt(self, pending: list[ApprovalRequest]) -> list[BaseEvent]:
        """The run ends waiting on ``pending`` (at least one request)."""
        outcome = RunFinishedInterruptOutcome(
            interrupts=[approval_interrupt(r, self.thread_id) for r in pending]
        )
        return _stamped(self._finish(self._finished(outcome)), None)

    def error(self, message: str, code: str) -> list[BaseEvent]:
        """The run ends with ``RUN_ERROR`` (closing any open text first)."""
        return _stamped(self._finish(RunErrorEvent(message=message, code=code)), None)

    def _finished(
        self, outcome: RunFinishedOutcome | None = None, result: object = None
    ) -> RunFinishedEvent:
        return RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, outcome=outcome, result=result
        )

    def _open_text(self) -> TextMessageStartEvent:
        self._messages += 1
        self._text_id = f"{self.run_id}-text-{self._messages}"
        self._streamed = ""
        return TextMessageStartEvent(message_id=self._text_id, role="assistant")

    def _close_text(self, final: str | None) -> list[BaseEvent]:
        """Ends the open text message; ``final`` is the whole durable text."""
        out: list[BaseEvent] = []
        if self._text_id is None:
            if not final:
                return out
            out.append(self._open_text())
        assert self._text_id is not None
        # What the deltas did not carry (all of it, for a model that does
        # not stream); deltas that lost text on the way cannot be mended.
        if final and final.startswith(self._streamed) and final != self._streamed:
            rest = final[len(self._streamed) :]
            out.append(TextMessageContentEvent(message_id=self._text_id, delta=rest))
        out.append(TextMessageEndEvent(message_id=self._text_id))
        self._text_id = None
        self._streamed = ""
        return out

    def _finish(self, last: BaseEvent) -> list[BaseEvent]:
        out = self._close_text(None)
        out.append(last)
        self.finished = True
        return out


__all__ = [
    "APPROVAL_REASON",
    "DECISION_SCHEMA",
    "PROTOCOL_VERSION",
    "AguiTranslator",
    "approval_interrupt",
    "timestamp_ms",
]
