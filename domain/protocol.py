"""The wire protocol: ``Op`` in, ``EventMsg`` out, in ``Event`` envelopes.

Both are msgspec tagged unions (tag field ``type``, snake_case names) so
JSON on the wire round-trips to the same typed values. Durable EventMsgs
are a pure function of the log (:class:`EventTranslator`): the live stream
and :func:`replay` of the log agree by construction. Transient messages
(text deltas) are marked ``transient`` and never replayed.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from turnlog.domain import session as s
from turnlog.domain import turn as t
from turnlog.domain.chain import event_seq
from turnlog.domain.model import final_text


class SessionFileReference(msgspec.Struct, frozen=True):
    """A file attached to user input (the file itself lives elsewhere)."""

    id: str
    name: str
    size: int
    media_type: str


# --- Ops: what callers submit -------------------------------------------------


class UserInput(msgspec.Struct, frozen=True, tag="user_input"):
    """Text (and attachments) from the user; queued if a turn is running."""

    text: str
    attachments: tuple[SessionFileReference, ...] = ()


class PeerInput(msgspec.Struct, frozen=True, tag="peer_input"):
    """Input from another agent (``peer``) or the host system (``system``).

    It starts a turn (or waits behind the running one) without being a
    user prompt: the model sees it as a developer message. user_prompt
    hooks review it too, with ``info.kind`` ``peer`` or ``system``.
    """

    text: str
    kind: str = "peer"


class Steer(msgspec.Struct, frozen=True, tag="steer"):
    """Text for the running turn, seen by the model at its next step.

    With no turn running it waits for the next turn, like a follow-up.
    """

    text: str
    attachments: tuple[SessionFileReference, ...] = ()


class Interrupt(msgspec.Struct, frozen=True, tag="interrupt"):
    """Abort the running turn (``turn_id`` None means whichever runs).

    Queued input is kept, and runs next, unless ``clear_queue`` is set.
    """

    turn_id: str | None = None
    clear_queue: bool = False


class ApprovalResponse(msgspec.Struct, frozen=True, tag="approval_response"):
    """A decision on a pending approval request."""

    request_id: str
    decision: str


class Shutdown(msgspec.Struct, frozen=True, tag="shutdown"):
    """Close the session once the running turn ends."""


Op = UserInput | PeerInput | Steer | Interrupt | ApprovalResponse | Shutdown


# --- EventMsgs: what the session reports ---------------------------------------


class SessionConfigured(msgspec.Struct, frozen=True, tag="session_configured"):
    session_id: str
    agent_name: str
    model_route: str


class TurnStarted(msgspec.Struct, frozen=True, tag="turn_started"):
    turn_id: str
    number: int


class UserMessage(msgspec.Struct, frozen=True, tag="user_message"):
    text: str
    kind: str
    attachments: tuple[SessionFileReference, ...] = ()


class UserInputQueued(msgspec.Struct, frozen=True, tag="user_input_queued"):
    """Input will run after the current turn; ``submission_id`` names it."""

    submission_id: str
    text: str
    kind: str


class QueuedInputDropped(msgspec.Struct, frozen=True, tag="queued_input_dropped"):
    """Queued input was dropped before it ran."""

    submission_ids: list[str]
    reason: str


class ToolAllowedForSession(
    msgspec.Struct, frozen=True, tag="tool_allowed_for_session"
):
    """Later calls of ``tool_name`` in this session run without approval."""

    tool_name: str


class InputRejected(msgspec.Struct, frozen=True, tag="input_rejected"):
    reason: str


class ModelStepStarted(msgspec.Struct, frozen=True, tag="model_step_started"):
    step: int
    route: str


class AgentMessage(msgspec.Struct, frozen=True, tag="agent_message"):
    text: str


class AgentMessageDelta(msgspec.Struct, frozen=True, tag="agent_message_delta"):
    """A streamed text fragment: transient, never in the log."""

    delta: str


class ModelStepCompleted(msgspec.Struct, frozen=True, tag="model_step_completed"):
    step: int
    usage: dict[str, int] | None
    diagnostics: dict[str, Any]


class ModelStepFailed(msgspec.Struct, frozen=True, tag="model_step_failed"):
    step: int
    error_type: str
    message: str


class ToolCallBegin(msgspec.Struct, frozen=True, tag="tool_call_begin"):
    call_id: str
    name: str
    arguments: str


class ToolCallEnd(msgspec.Struct, frozen=True, tag="tool_call_end"):
    call_id: str
    name: str
    output: str
    is_error: bool


class ApprovalRequested(msgspec.Struct, frozen=True, tag="approval_request"):
    """A tool call waits for a decision (``turnlog.ApprovalRequest`` holds it).

    Named apart from ``turnlog.ApprovalRequest``, which approval providers
    receive; the wire tag ``approval_request`` is unchanged.
    """

    request_id: str
    call_id: str
    name: str
    arguments: str


class ApprovalResolved(msgspec.Struct, frozen=True, tag="approval_resolved"):
    request_id: str
    call_id: str
    decision: str
    decided_by: str


class HookContext(msgspec.Struct, frozen=True, tag="hook_context"):
    hook: str
    text: str


class TokenCount(msgspec.Struct, frozen=True, tag="token_count"):
    """Usage of the last model call (None: unreported) and the session totals.

    ``kind`` is ``model`` for a model step, ``compaction`` for compaction.
    """

    route: str
    kind: str
    last: dict[str, int] | None
    total: dict[str, int]


class RenderBlock(msgspec.Struct, frozen=True):
    """A block a front end shows and later updates in place (same ``id``)."""

    id: str | None
    title: str
    state: str
    body: str = ""


class Frontend(msgspec.Struct, frozen=True, tag="frontend"):
    """Something for a front end to render, e.g. the compaction notice."""

    capability: str
    block: RenderBlock


class ContextRewritten(msgspec.Struct, frozen=True, tag="context_rewritten"):
    """The model context was rewritten; later steps start a new epoch."""

    epoch: int
    reasons: list[str]


class WarningMessage(msgspec.Struct, frozen=True, tag="warning"):
    """Something the user should know that did not fail the turn."""

    message: str


class SharedStateChanged(msgspec.Struct, frozen=True, tag="shared_state_changed"):
    changes: dict[str, Any]


class ModelRouteChanged(msgspec.Struct, frozen=True, tag="model_route_changed"):
    route: str


class TurnComplete(msgspec.Struct, frozen=True, tag="turn_complete"):
    turn_id: str
    last_agent_message: str | None


class TurnAborted(msgspec.Struct, frozen=True, tag="turn_aborted"):
    turn_id: str
    reason: str
    failed: bool


class SessionClosed(msgspec.Struct, frozen=True, tag="session_closed"):
    pass


EventMsg = (
    SessionConfigured
    | TurnStarted
    | UserMessage
    | UserInputQueued
    | QueuedInputDropped
    | ToolAllowedForSession
    | InputRejected
    | ModelStepStarted
    | AgentMessage
    | AgentMessageDelta
    | ModelStepCompleted
    | ModelStepFailed
    | ToolCallBegin
    | ToolCallEnd
    | ApprovalRequested
    | ApprovalResolved
    | HookContext
    | TokenCount
    | Frontend
    | ContextRewritten
    | WarningMessage
    | SharedStateChanged
    | ModelRouteChanged
    | TurnComplete
    | TurnAborted
    | SessionClosed
)

TRANSIENT_MESSAGES: tuple[type[Any], ...] = (AgentMessageDelta,)


class Event(msgspec.Struct, frozen=True):
    """An EventMsg with where it belongs.

    ``sequence`` is the place in its session of the domain event it came
    from (its ``session_seq``; 0 for transient messages). Several messages
    from one domain event share it. It does not depend on where the log
    lives, so a session exported to another store replays identically.
    """

    session_id: str
    submission_id: str | None
    turn_id: str | None
    sequence: int
    msg: EventMsg

    @property
    def transient(self) -> bool:
        """Whether the message is transient (never in the log)."""
        return isinstance(self.msg, TRANSIENT_MESSAGES)


_op_decoder = msgspec.json.Decoder(Op)
_event_decoder = msgspec.json.Decoder(Event)
_encoder = msgspec.json.Encoder()


def encode_json(value: Op | Event) -> bytes:
    """JSON bytes of an Op or Event."""
    return _encoder.encode(value)


def decode_op(data: bytes | str) -> Op:
    """An Op from JSON; raises ``msgspec.ValidationError`` if malformed."""
    return _op_decoder.decode(data)


def decode_event(data: bytes | str) -> Event:
    """An Event from JSON."""
    return _event_decoder.decode(data)


class EventTranslator:
    """Turns domain events of one session into its durable EventMsgs.

    It keeps the little state the envelopes need (the running turn's id
    and submission, the usage totals), so it must see a session's events in
    log order, from the start or from :meth:`resume`.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.turn_id: str | None = None
        self.submission_id: str | None = None
        self.usage_totals: dict[str, int] = {}
        self.last_agent_message: str | None = None
        self.context_epoch = 0

    def resume(
        self,
        *,
        turn_id: str | None,
        submission_id: str | None,
        usage_totals: dict[str, int],
        context_epoch: int = 0,
    ) -> None:
        """Sets the state a session revived mid-history had reached."""
        self.turn_id = turn_id
        self.submission_id = submission_id
        self.usage_totals = dict(usage_totals)
        self.context_epoch = context_epoch

    def _wrap(self, sequence: int, msgs: Iterable[Any]) -> list[Event]:
        return [
            Event(self.session_id, self.submission_id, self.turn_id, sequence, msg)
            for msg in msgs
        ]

    def translate(self, event: object, sequence: int) -> list[Event]:
        """The Events that ``event`` (at log position ``sequence``) yields."""
        match event:
            case s.SessionCreated(agent_name=agent_name, model_route=route):
                return self._wrap(
                    sequence, [SessionConfigured(self.session_id, agent_name, route)]
                )
            case s.TurnStarted(turn_id=turn_id, number=number, submission_id=sub):
                self.turn_id, self.submission_id = turn_id, sub
                self.last_agent_message = None
                return self._wrap(sequence, [TurnStarted(turn_id, number)])
            case s.TurnCompleted(turn_id=turn_id, final_output=final_output):
                out = self._wrap(sequence, [TurnComplete(turn_id, final_output)])
                self.turn_id = self.submission_id = None
                return out
            case s.TurnAborted(turn_id=turn_id, reason=reason, failed=failed):
                out = self._wrap(sequence, [TurnAborted(turn_id, reason, failed)])
                self.turn_id = self.submission_id = None
                return out
            case s.UsageRecorded(route=route, usage=usage, kind=kind):
                for key, value in (usage or {}).items():
                    self.usage_totals[key] = self.usage_totals.get(key, 0) + value
                msg = TokenCount(route, kind, usage, dict(self.usage_totals))
                return self._wrap(sequence, [msg])
            case s.ContextRewritten(reasons=reasons):
                self.context_epoch += 1
                rewritten = ContextRewritten(self.context_epoch, list(reasons))
                return self._wrap(sequence, [rewritten])
            case s.InputQueued(submission_id=sub, text=text, kind=kind):
                return self._wrap(sequence, [UserInputQueued(sub, text, kind)])
            case s.QueuedInputDropped(submission_ids=ids, reason=reason):
                return self._wrap(sequence, [QueuedInputDropped(list(ids), reason)])
            case s.ToolAllowedForSession(tool_name=tool_name):
                return self._wrap(sequence, [ToolAllowedForSession(tool_name)])
            case s.SharedStateUpdated(changes=changes):
                return self._wrap(sequence, [SharedStateChanged(changes)])
            case s.ModelRouteChanged(route=route):
                return self._wrap(sequence, [ModelRouteChanged(route)])
            case s.SessionClosed():
                return self._wrap(sequence, [SessionClosed()])
            case _:
                return self._translate_turn_event(event, sequence)

    def _translate_turn_event(self, event: object, sequence: int) -> list[Event]:
        match event:
            case t.InputAccepted(text=text, kind=kind, attachments=attachments):
                refs = tuple(
                    msgspec.convert(a, SessionFileReference) for a in attachments
                )
                return self._wrap(sequence, [UserMessage(text, kind, refs)])
            case t.InputRejected(reason=reason):
                return self._wrap(sequence, [InputRejected(reason)])
            case t.ModelStepStarted(step=step, route=route):
                return self._wrap(sequence, [ModelStepStarted(step, route)])
            case t.ModelStepCompleted(step=step, output=output, usage=u, diagnostics=d):
                msgs: list[Any] = []
                answer = final_text(output)
                if answer is not None:
                    msgs.append(AgentMessage(answer))
                    self.last_agent_message = answer
                msgs.append(ModelStepCompleted(step, u, d))
                return self._wrap(sequence, msgs)
            case t.ModelStepFailed(step=step, error_type=error_type, message=message):
                return self._wrap(
                    sequence, [ModelStepFailed(step, error_type, message)]
                )
            case t.ToolCallStarted(call_id=call_id, name=name, arguments=arguments):
                return self._wrap(sequence, [ToolCallBegin(call_id, name, arguments)])
            case t.ToolCallFinished(call_id=c, name=n, output=o, is_error=e):
                return self._wrap(sequence, [ToolCallEnd(c, n, o, e)])
            case t.ApprovalRequested(request_id=r, call_id=c, name=n, arguments=a):
                return self._wrap(sequence, [ApprovalRequested(r, c, n, a)])
            case t.ApprovalDecided(request_id=r, call_id=c, decision=d, decided_by=b):
                return self._wrap(sequence, [ApprovalResolved(r, c, d, b)])
            case t.CompactionStarted(compaction_id=cid):
                return self._compaction(sequence, cid, "Context compacting", "pending")
            case t.ContextCompacted(compaction_id=cid):
                return self._compaction(sequence, cid, "Context compacted", "complete")
            case t.CompactionFailed(compaction_id=cid, message=message):
                return self._compaction(
                    sequence, cid, "Context compaction failed", "complete", message
                )
            case t.CompactionCancelled(compaction_id=cid):
                return self._compaction(
                    sequence, cid, "Context compaction cancelled", "complete"
                )
            case t.HookContextAdded(hook=hook, text=text):
                return self._wrap(sequence, [HookContext(hook, text)])
            case t.WarningRaised(message=message):
                return self._wrap(sequence, [WarningMessage(message)])
            case _:
                return []

    def _compaction(
        self, sequence: int, cid: str, title: str, state: str, body: str = ""
    ) -> list[Event]:
        block = RenderBlock(cid, title, state, body)
        return self._wrap(sequence, [Frontend(COMPACTION_CAPABILITY, block)])


COMPACTION_CAPABILITY = "compaction"
"""The Frontend capability of the compaction notice."""


if not TYPE_CHECKING:  # hidden from mypy, so a mistyped name stays an error

    def __getattr__(name: str) -> Any:
        # ApprovalRequested was ApprovalRequest here, which clashed with
        # turnlog.ApprovalRequest; old imports keep working, with a warning.
        if name == "ApprovalRequest":
            warnings.warn(
                "turnlog.domain.protocol.ApprovalRequest is now "
                "turnlog.events.ApprovalRequested",
                DeprecationWarning,
                stacklevel=2,
            )
            return ApprovalRequested
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)


def replay(session_id: str, events: Iterable[object]) -> list[Event]:
    """The durable Event stream of a session from its events, in order."""
    translator = EventTranslator(session_id)
    out: list[Event] = []
    for event in events:
        out.extend(translator.translate(event, event_seq(event)))
    return out
