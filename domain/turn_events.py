"""The Turn aggregate's events: what happened inside one turn, as recorded.

Each is a past-tense fact, stored under ``turnlog:<ClassName>``
(domain/events.py), so its module may change and a stored history still
loads. Each one's ``apply`` sets the fields of the Turn it belongs to
(:class:`TurnFields`); the Turn (domain/turn.py) checks its invariants
before it triggers one, so an event that was recorded always applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any, Protocol

from turnlog.domain.events import TurnlogCreated, TurnlogEvent
from turnlog.domain.model import Item, MediaPart


class TurnFields(Protocol):
    """The fields of a Turn (domain/turn.py) that its events set."""

    session_id: str
    number: int
    submission_id: str
    steps: int
    step_open: bool
    open_calls: dict[str, str]
    finished_calls: frozenset[str]
    pending_approvals: dict[str, str]
    requested_calls: dict[str, str]
    decided: dict[str, str]


class TurnOpened(TurnlogCreated):
    """A turn's record was opened (its Session records ``TurnStarted``)."""

    session_id: str
    number: int
    submission_id: str

    def apply(self, aggregate: TurnFields) -> None:
        aggregate.session_id = self.session_id
        aggregate.number = self.number
        aggregate.submission_id = self.submission_id


class InputAccepted(TurnlogEvent):
    """Input entered the turn: the prompt that opened it, or a steer.

    ``text`` is what the model is given. If user_prompt hooks rewrote it,
    ``rewritten_by`` names them and ``original_text`` holds the user's
    text, unless a hook said it must not be kept (then it is None and the
    original is in no event).
    """

    submission_id: str
    kind: str
    text: str
    attachments: list[dict[str, Any]]
    input_id: str = ""
    """The caller's id for the input ("" if it gave none, and in histories
    recorded before input ids)."""
    rewritten_by: Sequence[str] = field(default=(), kw_only=True)
    original_text: str | None = field(default=None, kw_only=True)


class InputRejected(TurnlogEvent):
    """Input was refused; its content is deliberately not recorded."""

    submission_id: str
    reason: str


class ModelStepStarted(TurnlogEvent):
    """A model call began."""

    step: int
    route: str
    model: str = ""
    """The model the provider was asked for ("" if it did not say, and in
    histories recorded before this was recorded)."""
    provider: str = ""
    """Who serves it, as OpenTelemetry's ``gen_ai.provider.name`` names it
    (``openai``, ``anthropic``, ...; "" if unknown)."""

    def apply(self, aggregate: TurnFields) -> None:
        aggregate.steps = self.step
        aggregate.step_open = True


class ModelStepCompleted(TurnlogEvent):
    """A model call returned ``output`` items."""

    step: int
    output: list[Item]
    usage: dict[str, int] | None
    diagnostics: dict[str, Any]
    response_model: str = ""
    """The model that answered, as the provider's response named it ("" if
    it did not)."""

    def apply(self, aggregate: TurnFields) -> None:
        aggregate.step_open = False
        aggregate.requested_calls = {
            item["call_id"]: item["name"]
            for item in self.output
            if item.get("type") == "function_call"
        }


class ModelStepFailed(TurnlogEvent):
    """A model call failed."""

    step: int
    error_type: str
    message: str

    def apply(self, aggregate: TurnFields) -> None:
        aggregate.step_open = False


class ToolCallStarted(TurnlogEvent):
    """A tool began to run; durable before the tool is called."""

    call_id: str
    name: str
    arguments: str
    step: int
    tool_type: str = ""
    """What runs it, as OpenTelemetry's ``gen_ai.tool.type`` says:
    ``function`` (turnlog calls a function) or ``extension`` (an MCP
    server runs it); "" in histories recorded before this was recorded."""
    mcp_server: str = ""
    """The name of the MCP server that runs it ("" for a function tool)."""

    def apply(self, aggregate: TurnFields) -> None:
        aggregate.open_calls = {**aggregate.open_calls, self.call_id: self.name}


class ToolCallFinished(TurnlogEvent):
    """A tool call produced an output (an error output if ``is_error``)."""

    call_id: str
    name: str
    output: str
    is_error: bool
    media: Sequence[MediaPart] = field(default=(), kw_only=True)
    """Image and audio parts of the output (see ``domain.model.MediaPart``),
    stored here once. Events recorded before it existed load with none."""
    skipped: str = field(default="", kw_only=True)
    """Why the call was answered without being run, when it was skipped:
    ``steered`` (the user steered the turn before it started). "" for a
    call that ran, or was refused on its own account, and in histories
    recorded before this was recorded."""

    def apply(self, aggregate: TurnFields) -> None:
        open_calls = dict(aggregate.open_calls)
        open_calls.pop(self.call_id, None)
        aggregate.open_calls = open_calls
        aggregate.finished_calls = aggregate.finished_calls | {self.call_id}


class ApprovalRequested(TurnlogEvent):
    """A tool call waits for a decision."""

    request_id: str
    call_id: str
    name: str
    arguments: str

    def apply(self, aggregate: TurnFields) -> None:
        aggregate.pending_approvals = {
            **aggregate.pending_approvals,
            self.request_id: self.call_id,
        }


class ApprovalDecided(TurnlogEvent):
    """A pending approval was decided (or timed out)."""

    request_id: str
    call_id: str
    decision: str
    decided_by: str
    input_id: str = ""
    """The caller's id for its answer ("" if it gave none, or did not decide)."""

    def apply(self, aggregate: TurnFields) -> None:
        pending = dict(aggregate.pending_approvals)
        pending.pop(self.request_id, None)
        aggregate.pending_approvals = pending
        aggregate.decided = {**aggregate.decided, self.request_id: self.decision}


class ApprovalFailed(TurnlogEvent):
    """Nobody decided a pending approval: the approval provider failed.

    A failure is not a decision: the call does not run, and the turn fails
    with ``error`` (the provider's exception, or what it returned instead
    of a decision).
    """

    request_id: str
    call_id: str
    error: str

    def apply(self, aggregate: TurnFields) -> None:
        pending = dict(aggregate.pending_approvals)
        pending.pop(self.request_id, None)
        aggregate.pending_approvals = pending


class HookContextAdded(TurnlogEvent):
    """A middleware hook added context for the model (``hook`` names it)."""

    hook: str
    text: str


class WarningRaised(TurnlogEvent):
    """Something the user should know, that did not fail the turn."""

    message: str


class ChildSessionStarted(TurnlogEvent):
    """A tool call runs an agent as a child session (saved with its start).

    The child records the link back (``SessionCreated.parent_session``).
    """

    call_id: str
    child_session: str
    """The child's session id, derived from this session, turn and call."""
    agent: str
    """The name of the agent the child runs."""
