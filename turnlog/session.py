"""The interactive session: the handle callers hold, and its run handle.

It talks to its SessionActor through the session's Activation
(turnlog.actors.activation): a session that passivated while idle is started
again by the call that uses it. Asks from these handles run on the
caller's thread and wait only for the actor to take the message, never for
a model or a tool; ``prompt`` then waits on a future that the actor
resolves when the run ends. What each call sends the actor, and the
checks of its arguments, are turnlog/handles/requests.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from turnlog.actors.activation import Activation
from turnlog.actors.messages import (
    ActiveRunQuery,
    ContextQuery,
    FollowUp,
    ForRun,
    LatestRunQuery,
    MessagesQuery,
    PendingApprovalsQuery,
    QueuedQuery,
    RunningQuery,
    RunWaiter,
    SharedStateQuery,
    Submit,
)
from turnlog.domain.approval import ApprovalDecision, ApprovalRequest
from turnlog.domain.context import Message
from turnlog.domain.errors import InvalidInputError, TurnlogError
from turnlog.domain.model import Item
from turnlog.domain.protocol import SessionFileReference
from turnlog.domain.run import QueuedInput, RunResult, SessionEvent
from turnlog.handles import requests
from turnlog.handles.actor_handle import ActorHandle, Subscription
from turnlog.handles.run_waiting import LoopWaiter, ThreadWaiter, await_run


class RunHandle:
    """A run: which submission started it, and the turn it was running.

    It acts on its own run only: once that run has ended, ``steer``,
    ``follow_up`` and ``interrupt`` raise RunEndedError, recording nothing
    (they never reach a later run of the session).
    """

    def __init__(self, session: AgentSession, submission_id: str, turn_id: str | None):
        self.session = session
        self.submission_id = submission_id
        """The submission that started the run: the run's id."""
        self.turn_id = turn_id
        """The turn it was running when the handle was made."""

    def steer(
        self, text: str, *, attachments: Sequence[SessionFileReference] = ()
    ) -> str:
        """Steers the run's running turn (see ``AgentSession.steer``): its
        tool calls that have not started are skipped, and its next model
        call takes ``text`` in. Returns the submission id.

        Raises RunEndedError if the run has ended.
        """
        return self._ask(requests.steer(text, attachments))

    def follow_up(
        self, text: str, *, attachments: Sequence[SessionFileReference] = ()
    ) -> str:
        """Queues ``text`` to run in this run, after its queued input.

        Returns the submission id. Raises RunEndedError if the run has ended.
        """
        return self._ask(requests.follow_up(text, attachments))

    def interrupt(self) -> None:
        """Aborts the run's running turn (queued input runs next).

        Raises RunEndedError if the run has ended.
        """
        self._ask(requests.interrupt())

    def _ask(self, message: Submit | FollowUp) -> str:
        result: str = self.session._actor.ask(ForRun(self.submission_id, message))
        return result

    def __repr__(self) -> str:
        return f"RunHandle({self.session.session_id!r}, {self.submission_id!r})"


class AgentSession:
    """One conversation with an agent: what a service embeds.

    Made by ``Runtime.create_session``. Every method is thread-safe.
    """

    def __init__(
        self,
        session_id: str,
        activation: Activation,
        event_buffer: int,
        runtime_closed: threading.Event | None = None,
        *,
        stopped_by: Callable[[str], TurnlogError | None] | None = None,
        check_deps: Callable[[object], None] | None = None,
        recorded_answer: Callable[[str], tuple[object, str]] | None = None,
        children: Callable[[str], list[AgentSession]] | None = None,
    ):
        self._actor = ActorHandle(session_id, activation, runtime_closed, stopped_by)
        self._event_buffer = event_buffer
        self._check_deps = check_deps
        self._agent = activation.agent
        self._recorded_answer = recorded_answer
        # The child sessions its agent tools run now (see turnlog.hosting.children).
        self._children = children or _no_children

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self._actor.session_id

    def _check_open(self) -> None:
        if not self._actor.alive():
            raise self._actor.closed_error()

    def _start(
        self,
        waiter: RunWaiter[RunResult],
        text: str,
        attachments: Sequence[SessionFileReference],
        deps: object,
        input_id: str | None,
    ) -> None:
        """Tells the session to run ``text``; ``waiter`` is answered when
        the run ends (a tell: it never blocks)."""
        start = requests.prompt(
            text, attachments, deps, input_id, self._check_deps, waiter=waiter
        )
        self._actor.tell(start)

    def prompt(
        self,
        text: str,
        *,
        attachments: Sequence[SessionFileReference] = (),
        timeout: float | None = None,
        deps: object = None,
        input_id: str | None = None,
    ) -> RunResult:
        """Runs ``text`` (and any queued follow-ups); returns when the run ends.

        ``deps``: dependencies for this run's tools, hooks and instructions
        in place of the session's (never recorded; checked against the
        agent's ``deps_type``, InvalidInputError if they do not fit).

        ``input_id``: the caller's id for this prompt, recorded with it, so
        that a retry is safe: the same id and text again records nothing
        and returns the original run's result (waiting for it while it
        runs), in any process; the same id with other text raises
        InputConflictError, recording nothing.

        Raises SessionBusyError, recording nothing, if a run is in progress.
        """
        waiter: ThreadWaiter[RunResult] = ThreadWaiter()
        self._start(waiter, text, attachments, deps, input_id)
        return waiter.result(timeout)

    async def prompt_async(
        self,
        text: str,
        *,
        attachments: Sequence[SessionFileReference] = (),
        deps: object = None,
        input_id: str | None = None,
        detach_on_cancel: bool = False,
    ) -> RunResult:
        """``prompt`` for asyncio callers; never blocks the event loop.

        Cancelling the task that awaits it interrupts its run, as
        ``interrupt()`` does (recorded; queued follow-ups are kept), and
        the cancellation reaches the task once the interrupt is recorded.
        With ``detach_on_cancel=True`` a cancellation only ends the wait:
        the run goes on to its end (a service whose client went away).
        """
        if not isinstance(detach_on_cancel, bool):
            msg = "detach_on_cancel must be a bool"
            raise InvalidInputError(msg)
        # Answered straight onto this loop (turnlog.handles.run_waiting).
        waiter: LoopWaiter[RunResult] = LoopWaiter(asyncio.get_running_loop())
        self._start(waiter, text, attachments, deps, input_id)
        abandon = None if detach_on_cancel else lambda: self._abandon(waiter)
        return await await_run(waiter, abandon)

    def _abandon(self, waiter: RunWaiter[RunResult]) -> concurrent.futures.Future[None]:
        """Asks the session to interrupt the run ``waiter`` waits on."""
        abandon = requests.abandon(waiter)
        self._actor.tell(abandon)
        return abandon.done

    def follow_up(
        self,
        text: str,
        *,
        attachments: Sequence[SessionFileReference] = (),
        input_id: str | None = None,
    ) -> str:
        """Queues ``text`` to run after the current (or next) run's turns.

        Returns the submission id. With ``input_id``, a retry returns the
        original submission id and records nothing (see :meth:`prompt`).
        """
        result: str = self._actor.ask(requests.follow_up(text, attachments, input_id))
        return result

    def send_input(
        self, text: str, *, kind: str = "peer", input_id: str | None = None
    ) -> str:
        """Input from a peer agent or the host (``kind`` peer or system).

        It starts a turn, or waits behind the running one, without being a
        user prompt. Returns the submission id at once (with ``input_id``,
        a retry returns the original one; see :meth:`prompt`).
        """
        result: str = self._actor.ask(requests.peer_input(text, kind, input_id))
        return result

    def recorded_submission(
        self, input_id: str, text: str, *, kind: str = "prompt"
    ) -> str | None:
        """The submission id input ``input_id`` was recorded under, if it was.

        ``text`` and ``kind`` (prompt, follow_up, steer, peer, system) are
        what the caller sends with the id: a service checks a retry with
        this before it answers it. Read from the log's state of the
        session, so it holds in any process.

        Raises:
            InputConflictError: the id was recorded for other input.
        """
        return self._actor.query(requests.recorded_input(input_id, text, kind))

    def set_model_route(self, route: str) -> None:
        """Sends later model calls to the named route (recorded).

        Raises UsageError naming the known routes if there is no such route.
        """
        self._actor.ask(requests.change_route(route))

    def rewind(
        self, *, before_input: int | None = None, after_turn: int | None = None
    ) -> list[int]:
        """Sets the turns after a quiet point aside; returns their numbers.

        The point is ``before_input=N`` (before user input N, counted from
        1, that started a turn) or ``after_turn=N`` (0: before the first
        input); ``rt.history`` lists them. The model context and shared
        state go back to that point; the turns after it stay in the log,
        marked as rewound (audit and replay show them), and leave the
        context, the transcript's current view and the checkpoint. Usage
        totals keep counting. Edit and resend is ``rewind(before_input=N)``
        then ``prompt(new_text)``.

        Raises SessionBusyError while a turn runs (interrupt it first; its
        pending approvals close with it), InvalidInputError for a point
        that is not quiet, not there, or already rewound.
        """
        rewind = requests.rewind(before_input, after_turn)
        result: list[int] = self._actor.ask(rewind)
        return result

    def steer(
        self,
        text: str,
        *,
        attachments: Sequence[SessionFileReference] = (),
        input_id: str | None = None,
    ) -> str:
        """Adds ``text`` to the running turn before its next model call.

        The turn's tool calls that have not started are not run: each is
        answered as skipped because the user steered (recorded so), and
        calls already running finish; then the next model step takes
        ``text`` in (README, "Steering"). It returns once that is recorded.
        With no turn running, it waits for the next turn like a follow-up.
        Returns the submission id (with ``input_id``, a retry returns the
        original one and records nothing; see :meth:`prompt`).
        """
        result: str = self._actor.ask(requests.steer(text, attachments, input_id))
        return result

    def interrupt(self, *, clear_queue: bool = False) -> None:
        """Aborts the running turn.

        Queued follow-ups are kept, and run next, unless ``clear_queue``.
        Raises UsageError if no turn is running.
        """
        self._actor.ask(requests.interrupt(clear_queue=clear_queue))

    def approve(
        self,
        request_id: str,
        decision: ApprovalDecision | str,
        *,
        input_id: str | None = None,
    ) -> None:
        """Decides a pending approval request.

        A request of a child session (an agent tool's, listed by
        :meth:`pending_approvals`) is answered in that child.

        Answering a decided request again with the decision it was decided
        with does nothing (a retry is safe); ``input_id``, the caller's id
        for the answer, is recorded with the decision.

        Raises UsageError, recording nothing, if ``request_id`` is unknown,
        and InputConflictError if it was decided otherwise.
        """
        response = requests.approval(request_id, decision, input_id)
        child = self._child_asking(request_id)
        if child is not None:
            child.approve(request_id, response.decision, input_id=input_id)
            return
        self._actor.ask(Submit(response))

    def _child_asking(self, request_id: str) -> AgentSession | None:
        """The child session (of an agent tool) whose request this is, if any."""
        for child in self._children(self.session_id):
            if any(r.request_id == request_id for r in child.pending_approvals()):
                return child
        return None

    def queued(self) -> list[QueuedInput]:
        """Input waiting for its turn, oldest first (it survives restarts)."""
        return self._actor.query(QueuedQuery())

    def pending_approvals(self) -> list[ApprovalRequest]:
        """Approval requests waiting for a decision.

        With them, those of the child sessions its agent tools run now
        (each request's ``session_id`` names its child).
        """
        own: list[ApprovalRequest] = self._actor.query(PendingApprovalsQuery())
        own = list(own)  # the reply may be the actor's own list
        for child in self._children(self.session_id):
            own.extend(child.pending_approvals())
        return own

    def subscribe(self, *, buffer: int | None = None) -> Subscription:
        """Events from now on: RunStarted, RunEvent..., RunFinished per run.

        ``buffer`` bounds what waits unread (default: the run config's
        ``event_buffer``); past it, the oldest unread events are dropped for
        this subscriber only, and an ``EventsMissed`` item in their place
        tells it how many. The ends of runs and turns (``RunFinished``,
        ``TurnCompletedMsg``, ``TurnAbortedMsg``) are never dropped.
        """
        bound = requests.subscription_buffer(buffer, self._event_buffer)
        subscriber = self._actor.subscribe(bound)
        return Subscription(self._actor, subscriber)

    def messages(self) -> list[Message]:
        """The conversation's user and assistant messages, oldest first.

        The conversation as it happened: compaction changes what the model
        is sent (:meth:`context`), never this. Turns a rewind set aside are
        not in it.
        """
        return self._actor.query(MessagesQuery())

    def context(self) -> list[Item]:
        """The model context: the items the next model step is sent.

        After a compaction it is the compacted context: the user's most
        recent messages and the summary (an item whose ``turnlog_kind`` is
        ``compaction_summary``), or a native compaction's items, then
        everything since. Copies: changing them changes nothing.
        """
        return self._actor.query(ContextQuery())

    def shared_state(self) -> dict[str, Any]:
        """The session's shared state (a copy)."""
        return self._actor.query(SharedStateQuery())

    def update_shared_state(self, **changes: Any) -> dict[str, Any]:
        """Sets keys of the shared state (recorded); returns the new state."""
        update = requests.shared_state_update(changes)
        result: dict[str, Any] = self._actor.ask(update)
        return result

    def latest_run(self) -> RunResult | None:
        """How the last run ended, if one ran since the session was opened."""
        return self._actor.query(LatestRunQuery())

    def last_output(self) -> object:
        """The last answer accepted in the session, as the agent's ``output_type``.

        Read from the log (the checkpoint view) and validated again, so a
        session reopened in another process, with an agent of the same
        ``output_type``, gives the same object. None if the session has no
        such answer, or the agent has no ``output_type``.
        """
        self._actor.check_runtime_open()
        if self._recorded_answer is None:
            return None
        data, in_charge = self._recorded_answer(self.session_id)
        # The answer is in the type of the agent a handoff put in charge.
        agent = self._agent.handoff_graph().get(in_charge, self._agent)
        answer_format = agent.output_format
        if answer_format is None or data is msgspec.UNSET:
            return None
        return answer_format.load(data)

    def running(self) -> bool:
        """Whether a run is in progress."""
        return self._actor.query(RunningQuery())

    def wait_passivated(self, timeout: float | None = None) -> bool:
        """Waits until the session passivated here; False if ``timeout`` passed.

        Passivated: idle for its ``idle_timeout``, it gave back its lease
        (another process may take the session now) and its actor stopped.
        True at once if it is passive now. False if the session ended here
        instead (closed, failed, or taken by another process). A later call
        on the session starts it again.
        """
        requests.check_timeout(timeout)
        return self._actor.wait_passivated(timeout)

    def reachable(self) -> bool:
        """Whether this handle still reaches its session, without asking it.

        False once the session's actor stopped for good here (the session
        or the runtime was closed, its lease went to another process, or
        it failed); a passivated session is reachable (it revives on use).
        """
        return self._actor.alive()

    def active_run_handle(self) -> RunHandle | None:
        """The run in progress, or None."""
        active = self._actor.query(ActiveRunQuery())
        if active is None:
            return None
        submission_id, turn_id = active
        return RunHandle(self, submission_id, turn_id)

    def close(self, *, abort: bool = False, timeout: float | None = None) -> None:
        """Closes the session for good; returns once the close is recorded.

        Input still queued is dropped (recorded as dropped, reason
        "session closed") and never runs. A running turn finishes first
        (its approvals and tools too), then the session closes; with
        ``abort=True`` the turn is interrupted instead, as ``interrupt()``
        would, and the session closes at once. From the call on, new input
        is refused with SessionClosedError.

        Raises SessionClosedError if the session is closed already, and
        TimeoutError if ``timeout`` seconds pass before the running turn
        ends: the close is still due then, when the turn ends (call
        ``close(abort=True)`` to end it now).
        """
        close = requests.close(abort=abort, timeout=timeout)
        self._actor.ask(close)
        try:
            close.waiter.result(timeout)
        except TimeoutError:
            msg = (
                f"session {self.session_id!r}: its turn did not end within "
                f"{timeout} s; it closes when the turn ends"
            )
            raise TimeoutError(msg) from None

    def __repr__(self) -> str:
        return f"AgentSession({self.session_id!r})"


def _no_children(_session_id: str) -> list[AgentSession]:
    return []


__all__ = [
    "AgentSession",
    "RunHandle",
    "SessionEvent",
    "Subscription",
]
