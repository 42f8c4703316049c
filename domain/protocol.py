"""The wire protocol: ``Op`` in, ``EventMsg`` out, in ``Event`` envelopes.

Both are msgspec tagged unions (tag field ``type``, snake_case names) so
JSON on the wire round-trips to the same typed values. Durable EventMsgs
are a pure function of the log (domain.translation): the live stream and
a replay of the log agree by construction. Transient messages (text
deltas) are marked ``transient`` and never replayed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec


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
    input_id: str = ""
    """The caller's id for this input ("" for none): the same id again is
    answered with the original submission (see ``AgentSession.prompt``)."""


class PeerInput(msgspec.Struct, frozen=True, tag="peer_input"):
    """Input from another agent (``peer``) or the host system (``system``).

    It starts a turn (or waits behind the running one) without being a
    user prompt: the model sees it as a developer message. user_prompt
    hooks review it too, with ``info.kind`` ``peer`` or ``system``.
    """

    text: str
    kind: str = "peer"
    input_id: str = ""
    """The caller's id for this input ("" for none): the same id again is
    answered with the original submission (see ``AgentSession.prompt``)."""


class Steer(msgspec.Struct, frozen=True, tag="steer"):
    """Text for the running turn, seen by the model at its next step.

    With no turn running it waits for the next turn, like a follow-up.
    """

    text: str
    attachments: tuple[SessionFileReference, ...] = ()
    input_id: str = ""
    """The caller's id for this input ("" for none): the same id again is
    answered with the original submission (see ``AgentSession.prompt``)."""


class Interrupt(msgspec.Struct, frozen=True, tag="interrupt"):
    """Abort the running turn (``turn_id`` None means whichever runs).

    Queued input is kept, and runs next, unless ``clear_queue`` is set.
    """

    turn_id: str | None = None
    clear_queue: bool = False


class ApprovalResponse(msgspec.Struct, frozen=True, tag="approval_response"):
    """A decision on a pending approval request.

    The same decision again for a decided request is a no-op; another one
    is refused (InputConflictError).
    """

    request_id: str
    decision: str
    input_id: str = ""
    """The caller's id for this answer ("" for none), recorded with it."""


class Shutdown(msgspec.Struct, frozen=True, tag="shutdown"):
    """Close the session once the running turn ends."""


Op = UserInput | PeerInput | Steer | Interrupt | ApprovalResponse | Shutdown


# --- EventMsgs: what the session reports ---------------------------------------
#
# Each is named <Fact>Msg: the domain event it reports (ToolCallStartedMsg for
# turn_events.ToolCallStarted), or its wire tag when it reports no single domain
# event (AgentMessageMsg, AgentMessageDeltaMsg, FrontendMsg). The suffix keeps
# them apart from the domain events; the tags are the protocol and stay.


class SessionCreatedMsg(msgspec.Struct, frozen=True, tag="session_configured"):
    session_id: str
    agent_name: str
    model_route: str


class TurnStartedMsg(msgspec.Struct, frozen=True, tag="turn_started"):
    turn_id: str
    number: int


class InputAcceptedMsg(msgspec.Struct, frozen=True, tag="user_message"):
    text: str
    kind: str
    attachments: tuple[SessionFileReference, ...] = ()


class InputQueuedMsg(msgspec.Struct, frozen=True, tag="user_input_queued"):
    """Input will run after the current turn; ``submission_id`` names it."""

    submission_id: str
    text: str
    kind: str


class QueuedInputDroppedMsg(msgspec.Struct, frozen=True, tag="queued_input_dropped"):
    """Queued input was dropped before it ran."""

    submission_ids: list[str]
    reason: str


class ToolAllowedForSessionMsg(
    msgspec.Struct, frozen=True, tag="tool_allowed_for_session"
):
    """Later calls of ``tool_name`` in this session run without approval."""

    tool_name: str


class InputRejectedMsg(msgspec.Struct, frozen=True, tag="input_rejected"):
    reason: str


class ModelStepStartedMsg(msgspec.Struct, frozen=True, tag="model_step_started"):
    step: int
    route: str


class AgentMessageMsg(msgspec.Struct, frozen=True, tag="agent_message"):
    text: str


class AgentMessageDeltaMsg(msgspec.Struct, frozen=True, tag="agent_message_delta"):
    """A streamed text fragment: transient, never in the log."""

    delta: str


class ModelStepCompletedMsg(msgspec.Struct, frozen=True, tag="model_step_completed"):
    step: int
    usage: dict[str, int] | None
    diagnostics: dict[str, Any]


class ModelStepFailedMsg(msgspec.Struct, frozen=True, tag="model_step_failed"):
    step: int
    error_type: str
    message: str


class ToolCallStartedMsg(msgspec.Struct, frozen=True, tag="tool_call_begin"):
    call_id: str
    name: str
    arguments: str


class ToolCallFinishedMsg(
    msgspec.Struct, frozen=True, tag="tool_call_end", omit_defaults=True
):
    call_id: str
    name: str
    output: str
    is_error: bool
    skipped: str = ""
    """Why the call was answered without running (``steered``: the user
    steered before it started); "" (and absent on the wire) otherwise."""


class ApprovalRequestedMsg(msgspec.Struct, frozen=True, tag="approval_request"):
    """A tool call waits for a decision (``turnlog.ApprovalRequest`` holds it).

    Named apart from ``turnlog.ApprovalRequest``, which approval providers
    receive; the wire tag ``approval_request`` is unchanged.
    """

    request_id: str
    call_id: str
    name: str
    arguments: str


class ApprovalDecidedMsg(msgspec.Struct, frozen=True, tag="approval_resolved"):
    request_id: str
    call_id: str
    decision: str
    decided_by: str


class ApprovalFailedMsg(msgspec.Struct, frozen=True, tag="approval_failed"):
    """Nobody decided the request: the approval provider failed with ``error``.

    The call is not run and the turn fails with that error.
    """

    request_id: str
    call_id: str
    error: str


class HookContextAddedMsg(msgspec.Struct, frozen=True, tag="hook_context"):
    hook: str
    text: str


class UsageRecordedMsg(msgspec.Struct, frozen=True, tag="token_count"):
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


class FrontendMsg(msgspec.Struct, frozen=True, tag="frontend"):
    """Something for a front end to render, e.g. the compaction notice."""

    capability: str
    block: RenderBlock


class ContextRewrittenMsg(msgspec.Struct, frozen=True, tag="context_rewritten"):
    """The model context was rewritten; later steps start a new epoch."""

    epoch: int
    reasons: list[str]


class WarningRaisedMsg(msgspec.Struct, frozen=True, tag="warning"):
    """Something the user should know that did not fail the turn."""

    message: str


class SharedStateUpdatedMsg(msgspec.Struct, frozen=True, tag="shared_state_changed"):
    changes: dict[str, Any]


class ModelRouteChangedMsg(msgspec.Struct, frozen=True, tag="model_route_changed"):
    route: str


class AgentHandedOffMsg(msgspec.Struct, frozen=True, tag="agent_handed_off"):
    """The conversation was handed to ``to_agent`` (a handoff tool call)."""

    from_agent: str
    to_agent: str
    call_id: str
    reason: str


class JobStartedMsg(msgspec.Struct, frozen=True, tag="job_started"):
    """Tool call ``call_id`` started background job ``job_id``."""

    job_id: str
    name: str
    call_id: str


class JobFinishedMsg(msgspec.Struct, frozen=True, tag="job_finished"):
    """A background job ended (a notification: it starts no turn).

    Its result reaches the model at the session's next model step.
    ``interrupted``: it never finished (its process stopped, or its
    session was closed).
    """

    job_id: str
    name: str
    output: str
    is_error: bool
    interrupted: bool = False


class TurnCompletedMsg(msgspec.Struct, frozen=True, tag="turn_complete"):
    turn_id: str
    last_agent_message: str | None
    output: Any = msgspec.UNSET
    """The validated answer (JSON), for an agent with an output type;
    absent on the wire otherwise."""


class AnswerRejectedMsg(msgspec.Struct, frozen=True, tag="answer_rejected"):
    """A final answer was refused (see domain.answers.AnswerRejected)."""

    step: int
    attempt: int
    rejected_by: str
    reason: str
    final: bool = False


class TurnAbortedMsg(msgspec.Struct, frozen=True, tag="turn_aborted"):
    turn_id: str
    reason: str
    failed: bool


class SessionClosedMsg(msgspec.Struct, frozen=True, tag="session_closed"):
    pass


EventMsg = (
    SessionCreatedMsg
    | TurnStartedMsg
    | InputAcceptedMsg
    | InputQueuedMsg
    | QueuedInputDroppedMsg
    | ToolAllowedForSessionMsg
    | InputRejectedMsg
    | ModelStepStartedMsg
    | AgentMessageMsg
    | AgentMessageDeltaMsg
    | ModelStepCompletedMsg
    | ModelStepFailedMsg
    | ToolCallStartedMsg
    | ToolCallFinishedMsg
    | ApprovalRequestedMsg
    | ApprovalDecidedMsg
    | ApprovalFailedMsg
    | HookContextAddedMsg
    | UsageRecordedMsg
    | FrontendMsg
    | ContextRewrittenMsg
    | WarningRaisedMsg
    | SharedStateUpdatedMsg
    | ModelRouteChangedMsg
    | AgentHandedOffMsg
    | JobStartedMsg
    | JobFinishedMsg
    | TurnCompletedMsg
    | AnswerRejectedMsg
    | TurnAbortedMsg
    | SessionClosedMsg
)

TRANSIENT_MESSAGES: tuple[type[Any], ...] = (AgentMessageDeltaMsg,)


EVENT_SCHEMA_VERSION = 1
"""The version of the ``Event`` JSON schema (envelope and messages).

It goes up when a field changes meaning or goes away; new fields with
defaults and new message types keep it (a consumer ignores what it does
not know)."""


class Event(msgspec.Struct, frozen=True):
    """An EventMsg with where it belongs.

    ``sequence`` is the place in its session of the domain event it came
    from (its ``session_seq``; 0 for transient messages). Several messages
    from one domain event share it. It does not depend on where the log
    lives, so a session exported to another store replays identically.

    The rest of the envelope is derived from the log too, so the live
    stream, ``rt.replay_events``, ``rt.follow``, the service's streams and a
    restarted or another process give a message the same values.
    """

    session_id: str
    submission_id: str | None
    turn_id: str | None
    sequence: int
    msg: EventMsg
    event_id: str | None = None
    """The message's id, unique in its session and the same wherever and
    whenever the message is delivered or replayed:
    ``"<session_id>:<sequence>:<index>"``, where ``index`` counts the
    messages of one stored event from 0 (the last two parts are digits,
    so the id splits from the right even if the session id has colons).
    None for a transient message: it is not in the log, never replayed."""
    timestamp: datetime | None = None
    """When the fact was recorded: the stored event's timestamp (UTC,
    microseconds), shared by the messages of one stored event and never
    decreasing while one process writes the session (the log's order is
    ``sequence``). For a transient message, when it was streamed. None in
    an Event made by hand or decoded from JSON written before it existed."""
    trace_id: str = ""
    """The OpenTelemetry trace of the session's runs, as ``turnlog traces``
    and the live export name it (32 hex digits; a child session's is its
    root session's)."""
    schema_version: int = EVENT_SCHEMA_VERSION
    """The :data:`EVENT_SCHEMA_VERSION` the Event was made with."""

    @property
    def transient(self) -> bool:
        """Whether the message is transient (never in the log)."""
        return isinstance(self.msg, TRANSIENT_MESSAGES)


def event_id(session_id: str, sequence: int, index: int) -> str:
    """The ``Event.event_id`` of message ``index`` of stored event ``sequence``."""
    return f"{session_id}:{sequence}:{index}"


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
