"""Typed messages between turnlog's actors.

Untyped pykka proxies would leak ``Any`` across modules, so actors talk in
these structs and dispatch with ``match``. Fields holding live objects
(actor refs, futures, tools) are never serialised: these messages stay in
the process.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.context import Message
from turnlog.domain.model import Item, ModelRequest
from turnlog.domain.protocol import Op
from turnlog.domain.rewrites import InputRewrite
from turnlog.domain.run import QueuedInput, RunResult

Reply = TypeVar("Reply")

Answer_contra = TypeVar("Answer_contra", contravariant=True)


class RunWaiter(Protocol[Answer_contra]):
    """What the session's actor answers a run's caller through: one a
    caller's thread blocks on, or one that goes straight onto an asyncio
    caller's loop (turnlog.handles.run_waiting); a
    ``concurrent.futures.Future`` (submitted inputs, closes) is one too.
    Answered once, from the session's thread."""

    def done(self) -> bool: ...

    def set_result(self, result: Answer_contra) -> None: ...

    def set_exception(self, exception: BaseException) -> None: ...


# --- asks to the SessionActor (from handles, on caller threads) ---------------


class Submit(msgspec.Struct, frozen=True):
    """Submit an op; a busy session queues user input. Replies submission id."""

    op: Op
    waiter: concurrent.futures.Future[Any] | None = None


class StartPrompt(msgspec.Struct, frozen=True):
    """Start a run now; raises SessionBusyError if one runs. Replies id."""

    text: str
    attachments: tuple[Any, ...]
    waiter: RunWaiter[Any]
    deps: Any = None
    """The run's dependencies (None: the session's). Live: never recorded."""
    input_id: str = ""
    """The caller's id for the prompt ("" for none; domain.input_ids)."""


class FollowUp(msgspec.Struct, frozen=True):
    """Queue input to run after the current (or next) run's turn. Replies id."""

    text: str
    attachments: tuple[Any, ...] = ()
    input_id: str = ""
    """The caller's id for the input ("" for none; domain.input_ids)."""


class CloseSession(msgspec.Struct, frozen=True):
    """Close the session for good; raises SessionClosedError if it is closed.

    Idle, it closes at once. With a turn running it closes once the turn
    ends, or, with ``abort``, interrupts the turn first. ``waiter`` is set
    once the close is recorded (or failed to be).
    """

    abort: bool
    waiter: concurrent.futures.Future[None]


class AbandonRun(msgspec.Struct, frozen=True):
    """The caller waiting on ``waiter`` gave up (its asyncio task was cancelled):
    interrupt the turn running for that run, if it is still the running one.
    ``done`` is set once that is recorded (or there was nothing to do)."""

    waiter: RunWaiter[Any]
    done: concurrent.futures.Future[None]


class ForRun(msgspec.Struct, frozen=True):
    """``message`` (a steer, a follow-up or an interrupt) for the run that
    ``run`` (its submission id) started; RunEndedError once it has ended.
    Replies as ``message`` does."""

    run: str
    message: Submit | FollowUp


class SessionQuery(msgspec.Struct, Generic[Reply], frozen=True):
    """A read of the SessionActor's in-memory state; replies a ``Reply``."""


class QueuedQuery(SessionQuery[list[QueuedInput]], frozen=True):
    """Input waiting for its turn, oldest first."""


class PendingApprovalsQuery(SessionQuery[list[ApprovalRequest]], frozen=True):
    """Approval requests waiting for a decision."""


class MessagesQuery(SessionQuery[list[Message]], frozen=True):
    """The conversation's user and assistant messages, as it happened."""


class ContextQuery(SessionQuery[list[Item]], frozen=True):
    """The model context: what the next model step is sent."""


class SharedStateQuery(SessionQuery[dict[str, Any]], frozen=True):
    """A copy of the session's shared state."""


class RunningQuery(SessionQuery[bool], frozen=True):
    """Whether a run is in progress."""


class LatestRunQuery(SessionQuery[RunResult | None], frozen=True):
    """How the last run ended, if one ran since the session was opened."""


class ActiveRunQuery(SessionQuery[tuple[str, str] | None], frozen=True):
    """The run in progress as (submission id, turn id), or None."""


class RecordedInputQuery(SessionQuery[str | None], frozen=True):
    """The submission id input ``input_id`` was recorded under, or None;
    InputConflictError if it was recorded for other content."""

    input_id: str
    kind: str
    text: str


class ClosedQuery(SessionQuery[bool], frozen=True):
    """Whether the session was closed for good."""


class Subscribe(msgspec.Struct, frozen=True):
    """Register a subscriber (``subscriber`` is an actors.Subscriber)."""

    subscriber: Any


class Unsubscribe(msgspec.Struct, frozen=True):
    subscriber: Any


class LeaseLost(msgspec.Struct, frozen=True):
    """Another process took the session over: stop, answering with ``error``."""

    error: Any


class UpdateSharedState(msgspec.Struct, frozen=True):
    """Set keys of the shared state (recorded); replies the new state.

    From a tool call (``call`` is its (turn id, call id)), it is told, and
    ``waiter`` gets the new state once it is durable, or the refusal.
    """

    changes: dict[str, Any]
    waiter: concurrent.futures.Future[Any] | None = None
    call: tuple[str, str] | None = None


class Rewind(msgspec.Struct, frozen=True):
    """Set the turns after a quiet point aside (recorded); replies their numbers."""

    before_input: int | None = None
    after_turn: int | None = None


class ChangeRoute(msgspec.Struct, frozen=True):
    """Send later model calls to another named route (recorded)."""

    route: str


# --- facts from the TurnActor -------------------------------------------------
# The facts the TurnActor, the ToolExecutor and the approval broker tell the
# SessionActor are the turn machine's inputs: turnlog.domain.turn_facts.


class QueuedInputReviewed(msgspec.Struct, frozen=True):
    """The user_prompt hooks settled on input waiting to be queued."""

    submission_id: str
    rejection: str | None
    contexts: tuple[tuple[str, str], ...]
    stop: str | None
    error: str | None
    rewrite: InputRewrite | None = None


# --- orders to the TurnActor --------------------------------------------------


class CallModel(msgspec.Struct, frozen=True):
    """Model step ``request.step`` is recorded as started: call the model."""

    request: ModelRequest
    context: Any = None
    """The RunContext pre_tool hooks see (None for an agent without hooks)."""


class RunCalls(msgspec.Struct, frozen=True):
    """These tool calls are recorded as started: run them."""

    calls: tuple[dict[str, Any], ...]
    run: dict[str, Any] | None = None
    """What the calls' ToolContexts carry (see turn_actor.tool_order)."""


class PrepareStep(msgspec.Struct, frozen=True):
    """Run the hooks (and compaction) before a model step."""

    info: Any
    startup: bool


class UseAgent(msgspec.Struct, frozen=True):
    """A handoff put ``agent`` in charge: make the turn's next steps with it."""

    agent: Any


class ReviewInput(msgspec.Struct, frozen=True):
    """Run the user_prompt hooks on input not yet recorded."""

    info: Any


class PassivateIfIdle(msgspec.Struct, frozen=True):
    """Time to see whether the session has idled long enough to passivate."""


class CancelTurn(msgspec.Struct, frozen=True):
    """The turn ended: cancel whatever is in flight and stop."""


# --- the ToolExecutor (a plain object: see actors.tool_executor) ----------------


class RunTool(msgspec.Struct, frozen=True):
    """Run one tool call and tell ``reply_to`` a ToolFinished for ``turn``.

    ``key`` (the turn id) names the calls ``ToolExecutor.cancel`` cancels.
    """

    key: str
    turn: int
    call_id: str
    tool: Any
    arguments: str
    context: dict[str, Any]
    reply_to: Any
    max_output: int | None = None


# --- the ApprovalBroker -------------------------------------------------------


class AskApproval(msgspec.Struct, frozen=True):
    """A recorded ApprovalRequested: get a decision and tell ``session``.

    ``timeout`` seconds without a decision decide it as ``timeout``.
    """

    request: Any
    policy: str
    provider: Any
    session: Any
    timeout: float | None = None


class ResolveApproval(msgspec.Struct, frozen=True):
    """Decide a pending request through the broker (an ask; raises if unknown)."""

    request_id: str
    decision: str


class ApprovalExpired(msgspec.Struct, frozen=True):
    request_id: str


class ApprovalSettled(msgspec.Struct, frozen=True):
    """The session recorded a decision for ``request_id``: forget it."""

    request_id: str


class ProviderAnswered(msgspec.Struct, frozen=True):
    request_id: str
    future: concurrent.futures.Future[Any]
