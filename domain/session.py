"""The Session aggregate: the small, durable core of one agent session.

It holds identity, the agent config digest, shared state, the running turn,
usage totals and the model route. Transcripts and model context are kept
out of it on purpose (they are rebuilt from Turn events): loading a Session
must stay cheap however long the conversation grows.

Invariants (a violation raises and records nothing):
- at most one running turn;
- usage totals only grow;
- a closed session accepts no further commands.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from eventsourcing.domain import Aggregate

from turnlog.domain.errors import (
    InvariantViolation,
    SessionBusyError,
    SessionClosedError,
)
from turnlog.domain.events import (
    TurnlogCreated,
    TurnlogEvent,
    register_stable_topic,
    trigger_session_event,
)
from turnlog.domain.handoff import AgentHandedOff  # noqa: F401 - loads with it
from turnlog.domain.ids import session_uuid, turn_id_text, turn_uuid
from turnlog.domain.inputs import check_input, check_json_data
from turnlog.domain.jobs import CLOSED_JOB_OUTPUT, interrupt_jobs
from turnlog.domain.lineage import SessionForked
from turnlog.domain.model import check_usage
from turnlog.domain.session_changes import (
    ModelRouteChanged,
    SharedStateUpdated,
    ToolAllowedForSession,
    UsageRecorded,
)
from turnlog.domain.session_queue import (
    InputQueued,
    QueuedInputDropped,
    QueuedInputTaken,
)


class SessionCreated(TurnlogCreated):
    """A session came into being."""

    session_id: str
    """The caller's id for the session."""
    agent_name: str
    agent_digest: str
    """Digest of the agent configuration the session was created with."""
    shared_state: dict[str, Any]
    model_route: str
    parent_session: str = ""
    """The session whose tool call runs this one (an agent used as a tool);
    "" for a session of its own, and in histories recorded before this."""
    parent_call: str = ""
    """The parent's tool call that runs this session ("" if none)."""
    root_session: str = ""
    """The session at the top of this one's tree of parents ("" if none):
    its trace is the one this session's spans join."""

    def apply(self, aggregate: Session) -> None:
        aggregate.session_id = self.session_id
        aggregate.agent_name = self.agent_name
        aggregate.agent_digest = self.agent_digest
        aggregate.shared_state = dict(self.shared_state)
        aggregate.model_route = self.model_route
        aggregate.parent_session = self.parent_session
        aggregate.parent_call = self.parent_call
        aggregate.root_session = self.root_session


class TurnStarted(TurnlogEvent):
    """A turn began; it is the session's only running turn until it ends."""

    turn_id: str
    number: int
    submission_id: str
    input_id: str = ""
    """The caller's id for the input that started the turn ("" if none)."""
    input_digest: str = ""
    """Digest of that input as the caller asked for it (domain.input_ids)."""

    def apply(self, aggregate: Session) -> None:
        aggregate.active_turn = self.number
        aggregate.turn_count = self.number
        if aggregate.queued:
            aggregate.queued = [
                q for q in aggregate.queued if q["submission_id"] != self.submission_id
            ] or ()
        aggregate.note_input_id(self.input_id, self.input_digest, self.submission_id)


class TurnCompleted(TurnlogEvent):
    """The running turn ended normally."""

    turn_id: str
    number: int
    final_output: str | None
    approvals: dict[str, str] | None = None
    """How the turn's approval requests were decided (request id ->
    decision), so a repeated answer is known after the turn; None if it
    had none, and in histories recorded before this."""

    def apply(self, aggregate: Session) -> None:
        aggregate.active_turn = None
        aggregate.note_decisions(self.approvals)


class TurnAborted(TurnlogEvent):
    """The running turn ended early.

    ``failed`` separates a failure (provider error, crash) from an abort
    that someone asked for (interrupt, rejected input, a stopping hook).
    """

    turn_id: str
    number: int
    reason: str
    failed: bool
    approvals: dict[str, str] | None = None
    """As ``TurnCompleted.approvals``."""

    def apply(self, aggregate: Session) -> None:
        aggregate.active_turn = None
        aggregate.note_decisions(self.approvals)


class ContextRewritten(TurnlogEvent):
    """The model context was rewritten (compaction): a new context epoch.

    The context now starts in turn ``turn_number``; turns before it are no
    longer read to rebuild it.
    """

    turn_number: int
    reasons: list[str]

    def apply(self, aggregate: Session) -> None:
        aggregate.context_epoch += 1
        aggregate.context_start_turn = self.turn_number
        aggregate.last_rewrite_reasons = list(self.reasons) or ()
        if "compaction" in self.reasons:
            aggregate.compaction_count += 1


class SessionClosed(TurnlogEvent):
    """The session was closed; it accepts nothing further."""

    def apply(self, aggregate: Session) -> None:
        aggregate.closed = True


class Session(Aggregate):
    """One agent session's durable state. Create with :meth:`create`."""

    session_id: str
    agent_name: str
    agent_digest: str
    shared_state: dict[str, Any]
    model_route: str
    # Class defaults: snapshots taken before these existed load without them.
    parent_session: str = ""
    parent_call: str = ""
    root_session: str = ""

    def trigger_event(self, event_class: type[Any], **kwargs: Any) -> None:
        """Triggers ``event_class`` stamped with this session's id."""
        trigger_session_event(self, event_class, kwargs)

    def __init__(self) -> None:
        self.turn_count = 0
        self.active_turn: int | None = None
        self.usage_totals: dict[str, int] = {}
        self.last_usage: dict[str, int] | None = None
        self.closed = False
        # queued, last_rewrite_reasons, turn_owners, set_aside(_positions),
        # job_results: () when empty (domain.session_snapshot.EMPTY_AS_TUPLE).
        self.queued: Sequence[dict[str, Any]] = ()
        self.allowed_tools: frozenset[str] = frozenset()
        self.context_epoch = 0
        self.context_start_turn = 1
        self.compaction_count = 0
        self.last_rewrite_reasons: Sequence[str] = ()
        self.handed_to = ""  # the agent a handoff put in charge (AgentHandedOff)
        self.turn_owners: Sequence[list[Any]] = ()  # a fork's sources' turns
        self.set_aside: Sequence[list[int]] = ()  # turn ranges rewound (lineage)
        self.set_aside_positions: Sequence[list[int]] = ()  # their log positions
        # Every input id recorded: id -> [digest, submission id] (input_ids).
        self.input_ids: dict[str, list[str]] = {}
        # How the approval requests of ended turns were decided: id -> decision.
        self.decided_approvals: dict[str, str] = {}
        # Background jobs (domain.jobs): job id -> what JobStarted said, and
        # the results that wait for the model's next step.
        self.running_jobs: dict[str, dict[str, Any]] = {}
        self.job_results: Sequence[dict[str, Any]] = ()

    def note_input_id(self, input_id: str, digest: str, submission_id: str) -> None:
        """Remembers input ``input_id`` (from an event being applied)."""
        if input_id:
            self.input_ids[input_id] = [digest, submission_id]

    def note_decisions(self, approvals: dict[str, str] | None) -> None:
        """Remembers an ended turn's decisions (from an event being applied)."""
        if approvals:
            self.decided_approvals.update(approvals)

    @classmethod
    def create(
        cls,
        session_id: str,
        *,
        agent_name: str,
        agent_digest: str,
        shared_state: dict[str, Any],
        model_route: str,
        parent_session: str = "",
        parent_call: str = "",
        root_session: str = "",
    ) -> Session:
        """A new session with ``session_id``; the caller checks it is new.

        ``parent_session`` and ``parent_call`` name the tool call that runs
        it, for a child session (an agent used as a tool); ``root_session``
        the top of its tree of parents.
        """
        check_json_data(shared_state, "shared state")
        return cls._create(
            SessionCreated,
            id=session_uuid(session_id),
            session_id=session_id,
            agent_name=agent_name,
            agent_digest=agent_digest,
            shared_state=shared_state,
            model_route=model_route,
            parent_session=parent_session,
            parent_call=parent_call,
            root_session=root_session,
        )

    @classmethod
    def fork(cls, session_id: str, **fields: Any) -> Session:
        """A new session ``session_id`` forked at a quiet point of another.

        ``fields`` are those of :class:`SessionForked`; the caller read
        them from the source's log and checks the id is new.
        """
        check_json_data(fields["shared_state"], "shared state")
        return cls._create(
            SessionForked, id=session_uuid(session_id), session_id=session_id, **fields
        )

    @property
    def running(self) -> bool:
        """Whether a turn is running."""
        return self.active_turn is not None

    def active_turn_id(self) -> uuid.UUID | None:
        """The aggregate id of the running turn, if one runs."""
        if self.active_turn is None:
            return None
        return turn_uuid(self.session_id, self.active_turn)

    def _check_open(self) -> None:
        if self.closed:
            msg = f"session {self.session_id!r} is closed"
            raise SessionClosedError(msg)

    def queue_input(
        self,
        submission_id: str,
        kind: str,
        text: str,
        attachments: list[dict[str, Any]],
        *,
        input_id: str = "",
        input_digest: str = "",
        rewritten_by: Sequence[str] = (),
        original_text: str | None = None,
    ) -> None:
        """Queues input to run after the current (or next) turn, in order.

        ``input_id``, ``input_digest``: the caller's new id for it and the
        digest of what it asked (domain.input_ids).
        """
        self._check_open()
        check_input(kind, text)
        self._check_input_id(input_id, submission_id)
        self.trigger_event(
            InputQueued,
            submission_id=submission_id,
            kind=kind,
            text=text,
            attachments=list(attachments),
            input_id=input_id,
            input_digest=input_digest,
            rewritten_by=list(rewritten_by),
            original_text=original_text,
        )

    def _check_input_id(self, input_id: str, submission_id: str) -> None:
        recorded = self.input_ids.get(input_id)
        if recorded is not None and recorded[1] != submission_id:
            msg = f"input id {input_id!r} is already recorded"
            raise InvariantViolation(msg)

    def take_queued(self, submission_id: str, turn_number: int) -> dict[str, Any]:
        """Takes a queued input into the running turn; returns it."""
        self._check_running(turn_number)
        for queued in self.queued:
            if queued["submission_id"] == submission_id:
                self.trigger_event(
                    QueuedInputTaken,
                    submission_id=submission_id,
                    turn_id=turn_id_text(self.session_id, turn_number),
                )
                return queued
        msg = f"input {submission_id!r} is not queued"
        raise InvariantViolation(msg)

    def drop_queued(self, reason: str) -> list[str]:
        """Drops every queued input; returns their submission ids."""
        dropped = [q["submission_id"] for q in self.queued]
        if dropped:
            self.trigger_event(
                QueuedInputDropped, submission_ids=dropped, reason=reason
            )
        return dropped

    def allow_tool_for_session(self, tool_name: str, request_id: str) -> None:
        """Lets later calls of ``tool_name`` run without approval."""
        self._check_open()
        if tool_name not in self.allowed_tools:
            self.trigger_event(
                ToolAllowedForSession, tool_name=tool_name, request_id=request_id
            )

    def start_turn(
        self, submission_id: str, input_id: str = "", input_digest: str = ""
    ) -> int:
        """Starts the next turn and returns its number.

        ``input_id`` and ``input_digest``: the caller's id of the input that
        starts it (new, or that of the queued input it takes) and its digest.
        """
        self._check_open()
        if self.active_turn is not None:
            msg = (
                f"session {self.session_id!r} is running turn "
                f"{self.active_turn}; wait for it or queue a follow-up"
            )
            raise SessionBusyError(msg)
        self._check_input_id(input_id, submission_id)
        number = self.turn_count + 1
        self.trigger_event(
            TurnStarted,
            turn_id=turn_id_text(self.session_id, number),
            number=number,
            submission_id=submission_id,
            input_id=input_id,
            input_digest=input_digest or self.input_ids.get(input_id, [""])[0],
        )
        return number

    def _check_running(self, number: int) -> None:
        if self.active_turn != number:
            msg = f"turn {number} is not running in session {self.session_id!r}"
            raise InvariantViolation(msg)

    def complete_turn(
        self,
        number: int,
        final_output: str | None,
        approvals: dict[str, str] | None = None,
    ) -> None:
        """Ends the running turn normally (``approvals``: its decisions)."""
        self._check_running(number)
        self.trigger_event(
            TurnCompleted,
            turn_id=turn_id_text(self.session_id, number),
            number=number,
            final_output=final_output,
            approvals=dict(approvals) if approvals else None,
        )

    def abort_turn(
        self,
        number: int,
        reason: str,
        *,
        failed: bool,
        approvals: dict[str, str] | None = None,
    ) -> None:
        """Ends the running turn early, as a failure or an abort."""
        self._check_running(number)
        self.trigger_event(
            TurnAborted,
            turn_id=turn_id_text(self.session_id, number),
            number=number,
            reason=reason,
            failed=failed,
            approvals=dict(approvals) if approvals else None,
        )

    def record_usage(
        self,
        number: int,
        step: int,
        route: str,
        usage: dict[str, int] | None,
        kind: str = "model",
    ) -> None:
        """Adds one model call's usage to the totals."""
        self._check_running(number)
        self.trigger_event(
            UsageRecorded,
            turn_id=turn_id_text(self.session_id, number),
            step=step,
            route=route,
            kind=kind,
            usage=check_usage(usage),
        )

    def rewrite_context(self, number: int, reasons: list[str]) -> None:
        """Starts a new context epoch in the running turn."""
        self._check_running(number)
        self.trigger_event(ContextRewritten, turn_number=number, reasons=list(reasons))

    def update_shared_state(self, changes: dict[str, Any]) -> None:
        """Sets keys of the shared state; records nothing if none change."""
        self._check_open()
        check_json_data(changes, "shared state")
        changed = {
            key: value
            for key, value in changes.items()
            if self.shared_state.get(key, _MISSING) != value
        }
        if changed:
            self.trigger_event(SharedStateUpdated, changes=changed)

    def change_route(self, route: str) -> None:
        """Sends later model calls to ``route``."""
        self._check_open()
        if route != self.model_route:
            self.trigger_event(ModelRouteChanged, route=route)

    def close(self) -> list[str]:
        """Closes the session for good; a running turn must end first.

        Input still queued will never run: it is dropped first, recorded
        (``QueuedInputDropped``, reason :data:`CLOSE_REASON`). Background
        jobs still running are recorded as interrupted: a closed session
        records nothing more, so their results will be dropped. Returns the
        submission ids dropped.
        """
        self._check_open()
        if self.active_turn is not None:
            msg = "cannot close a session while a turn is running"
            raise SessionBusyError(msg)
        dropped = self.drop_queued(CLOSE_REASON)
        interrupt_jobs(self, CLOSED_JOB_OUTPUT)
        self.trigger_event(SessionClosed)
        return dropped


_MISSING = object()

CLOSE_REASON = "session closed"
"""Why input still queued when its session closed was dropped."""

register_stable_topic(Session)

# The Session's events, those of domain.session_changes included.
__all__ = [
    "ContextRewritten",
    "InputQueued",
    "ModelRouteChanged",
    "QueuedInputDropped",
    "QueuedInputTaken",
    "Session",
    "SessionClosed",
    "SessionCreated",
    "SharedStateUpdated",
    "ToolAllowedForSession",
    "TurnAborted",
    "TurnCompleted",
    "TurnStarted",
    "UsageRecorded",
]
