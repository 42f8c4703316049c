"""Domain events of one session, turned into its durable EventMsg stream.

The live stream a SessionActor publishes and a replay of the log are both
made here, from the same domain events in the same order, so they agree by
construction (replay == live minus transient messages).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from turnlog.domain import answers, compaction
from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.domain.chain import event_seq
from turnlog.domain.handoff import AgentHandedOff
from turnlog.domain.ids import session_trace_id, trace_id_of
from turnlog.domain.jobs import JobFinished, JobStarted
from turnlog.domain.model import final_text
from turnlog.domain.protocol import (
    AgentHandedOffMsg,
    AgentMessageMsg,
    AnswerRejectedMsg,
    ApprovalDecidedMsg,
    ApprovalFailedMsg,
    ApprovalRequestedMsg,
    ContextRewrittenMsg,
    Event,
    FrontendMsg,
    HookContextAddedMsg,
    InputAcceptedMsg,
    InputQueuedMsg,
    InputRejectedMsg,
    JobFinishedMsg,
    JobStartedMsg,
    ModelRouteChangedMsg,
    ModelStepCompletedMsg,
    ModelStepFailedMsg,
    ModelStepStartedMsg,
    QueuedInputDroppedMsg,
    RenderBlock,
    SessionClosedMsg,
    SessionCreatedMsg,
    SessionFileReference,
    SharedStateUpdatedMsg,
    ToolAllowedForSessionMsg,
    ToolCallFinishedMsg,
    ToolCallStartedMsg,
    TurnAbortedMsg,
    TurnCompletedMsg,
    TurnStartedMsg,
    UsageRecordedMsg,
    WarningRaisedMsg,
    event_id,
)


class EventTranslator:
    """Turns domain events of one session into its durable EventMsgs.

    It keeps the little state the envelopes need (the running turn's id
    and submission, the usage totals), so it must see a session's events in
    log order, from the start or from :meth:`resume`.

    An envelope's id, timestamp and trace come from the log alone (the
    stored event's session seq and timestamp, the session's lineage), so
    whoever translates a stored event gives its messages the same ones.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.trace_id = trace_id_of(session_id)
        """The session's trace (its root's, once a child's creation is seen)."""
        self._timestamp: datetime | None = None  # of the event being translated
        self.turn_id: str | None = None
        self.submission_id: str | None = None
        self.usage_totals: dict[str, int] = {}
        self.context_epoch = 0
        self.answer: Any = msgspec.UNSET
        """The running turn's accepted answer (its TurnCompleted carries it)."""

    def resume(
        self,
        *,
        turn_id: str | None,
        submission_id: str | None,
        usage_totals: dict[str, int],
        context_epoch: int = 0,
        parent_session: str = "",
        root_session: str = "",
    ) -> None:
        """Sets the state a session revived mid-history had reached."""
        self.trace_id = session_trace_id(
            self.session_id, parent_session=parent_session, root_session=root_session
        )
        self.turn_id = turn_id
        self.submission_id = submission_id
        self.usage_totals = dict(usage_totals)
        self.context_epoch = context_epoch

    def _wrap(self, sequence: int, msgs: Sequence[Any]) -> list[Event]:
        session_id, timestamp, trace_id = (
            self.session_id,
            self._timestamp,
            self.trace_id,
        )
        if len(msgs) == 1:  # nearly every event: no loop to set up
            return [
                Event(
                    session_id,
                    self.submission_id,
                    self.turn_id,
                    sequence,
                    msgs[0],
                    event_id(session_id, sequence, 0),
                    timestamp,
                    trace_id,
                )
            ]
        return [
            Event(
                session_id,
                self.submission_id,
                self.turn_id,
                sequence,
                msg,
                event_id(session_id, sequence, index),
                timestamp,
                trace_id,
            )
            for index, msg in enumerate(msgs)
        ]

    def transient(self, msg: Any, timestamp: datetime) -> Event:
        """``msg``, never recorded (a text delta), streamed at ``timestamp``."""
        return Event(
            self.session_id,
            self.submission_id,
            self.turn_id,
            0,
            msg,
            None,
            timestamp,
            self.trace_id,
        )

    def translate(self, event: object, sequence: int) -> list[Event]:
        """The Events that ``event`` (its session sequence ``sequence``) yields."""
        self._timestamp = getattr(event, "timestamp", None)
        may_match = _SESSION_CASE_OF.get(type(event))
        if may_match is None:  # a class seen the first time
            may_match = _note_match(_SESSION_CASE_OF, _SESSION_CASES, type(event))
        if not may_match:
            # Most of a turn's events are its Turn's: none of the classes
            # below can match them, and trying each costs an isinstance.
            return self._translate_turn_event(event, sequence)
        match event:
            # A turn's most frequent events first: each case tried is an
            # isinstance, and no class here is another's subclass.
            case s.UsageRecorded(route=route, usage=usage, kind=kind):
                self.note(event)
                msg = UsageRecordedMsg(route, kind, usage, dict(self.usage_totals))
                return self._wrap(sequence, [msg])
            case s.TurnStarted(turn_id=turn_id, number=number):
                self.note(event)
                return self._wrap(sequence, [TurnStartedMsg(turn_id, number)])
            case s.TurnCompleted(turn_id=turn_id, final_output=final_output):
                done = TurnCompletedMsg(turn_id, final_output, self.answer)
                out = self._wrap(sequence, [done])
                self.note(event)
                return out
            case s.TurnAborted(turn_id=turn_id, reason=reason, failed=failed):
                out = self._wrap(sequence, [TurnAbortedMsg(turn_id, reason, failed)])
                self.note(event)
                return out
            case s.SessionCreated(agent_name=agent_name, model_route=route):
                self.note(event)
                return self._wrap(
                    sequence, [SessionCreatedMsg(event.session_id, agent_name, route)]
                )
            case s.ContextRewritten(reasons=reasons):
                self.note(event)
                rewritten = ContextRewrittenMsg(self.context_epoch, list(reasons))
                return self._wrap(sequence, [rewritten])
            case s.InputQueued(submission_id=sub, text=text, kind=kind):
                return self._wrap(sequence, [InputQueuedMsg(sub, text, kind)])
            case s.QueuedInputDropped(submission_ids=ids, reason=reason):
                return self._wrap(sequence, [QueuedInputDroppedMsg(list(ids), reason)])
            case s.ToolAllowedForSession(tool_name=tool_name):
                return self._wrap(sequence, [ToolAllowedForSessionMsg(tool_name)])
            case s.SharedStateUpdated(changes=changes):
                return self._wrap(sequence, [SharedStateUpdatedMsg(changes)])
            case s.ModelRouteChanged(route=route):
                return self._wrap(sequence, [ModelRouteChangedMsg(route)])
            case AgentHandedOff(from_agent=a, to_agent=b, call_id=c, reason=r):
                return self._wrap(sequence, [AgentHandedOffMsg(a, b, c, r)])
            case JobStarted(job_id=job_id, name=name, call_id=call_id):
                return self._wrap(sequence, [JobStartedMsg(job_id, name, call_id)])
            case JobFinished(job_id=job_id, name=name, output=output):
                ended = JobFinishedMsg(
                    job_id, name, output, event.is_error, event.interrupted
                )
                return self._wrap(sequence, [ended])
            case s.SessionClosed():
                return self._wrap(sequence, [SessionClosedMsg()])
            case _:
                return self._translate_turn_event(event, sequence)

    def note(self, event: object) -> None:
        """Keeps the state ``event`` changes, without making its messages.

        The one place the translator's state changes: :meth:`translate`
        calls it too. Alone, it is all a session nobody listens to needs
        (the log keeps the messages, to replay). Only the classes in
        ``_STATE_CASES`` change the state; a test holds this over every
        recorded history.
        """
        may_change = _STATE_CASE_OF.get(type(event))
        if may_change is None:  # a class seen the first time
            may_change = _note_match(_STATE_CASE_OF, _STATE_CASES, type(event))
        if not may_change:  # most of a turn's events
            return
        match event:
            case s.UsageRecorded(usage=usage):
                totals = self.usage_totals
                for key, value in (usage or {}).items():
                    totals[key] = totals.get(key, 0) + value
            case s.TurnStarted(turn_id=turn_id, submission_id=sub):
                self.turn_id, self.submission_id = turn_id, sub
            case s.TurnCompleted():
                self.turn_id = self.submission_id = None
                self.answer = msgspec.UNSET
            case s.TurnAborted():
                self.turn_id = self.submission_id = None
            case answers.AnswerAccepted(output=output):
                self.answer = output
            case s.ContextRewritten():
                self.context_epoch += 1
            case s.SessionCreated():
                if event.parent_session and event.session_id == self.session_id:
                    self.trace_id = session_trace_id(
                        self.session_id,
                        parent_session=event.parent_session,
                        root_session=event.root_session,
                    )

    def _translate_turn_event(self, event: object, sequence: int) -> list[Event]:
        may_match = _TURN_CASE_OF.get(type(event))
        if may_match is None:  # a class seen the first time
            may_match = _note_match(_TURN_CASE_OF, _TURN_CASES, type(event))
        if not may_match:
            # A TurnOpened, say, yields no message: without this it was
            # tried against every case below, an isinstance each.
            return []
        match event:
            # A turn's most frequent events first: each case tried is an
            # isinstance, and no class here is another's subclass.
            case t.ModelStepStarted(step=step, route=route):
                return self._wrap(sequence, [ModelStepStartedMsg(step, route)])
            case t.ModelStepCompleted(step=step, output=output, usage=u, diagnostics=d):
                msgs: list[Any] = []
                answer = final_text(output)
                if answer is not None:
                    msgs.append(AgentMessageMsg(answer))
                msgs.append(ModelStepCompletedMsg(step, u, d))
                return self._wrap(sequence, msgs)
            case t.ToolCallStarted(call_id=call_id, name=name, arguments=arguments):
                return self._wrap(
                    sequence, [ToolCallStartedMsg(call_id, name, arguments)]
                )
            case t.ToolCallFinished(call_id=c, name=n, output=o, is_error=e):
                finished = ToolCallFinishedMsg(c, n, o, e, event.skipped)
                return self._wrap(sequence, [finished])
            case t.InputAccepted(text=text, kind=kind, attachments=attachments):
                refs = tuple(
                    msgspec.convert(a, SessionFileReference) for a in attachments
                )
                return self._wrap(sequence, [InputAcceptedMsg(text, kind, refs)])
            case t.InputRejected(reason=reason):
                return self._wrap(sequence, [InputRejectedMsg(reason)])
            case t.ModelStepFailed(step=step, error_type=error_type, message=message):
                return self._wrap(
                    sequence, [ModelStepFailedMsg(step, error_type, message)]
                )
            case t.ApprovalRequested(request_id=r, call_id=c, name=n, arguments=a):
                return self._wrap(sequence, [ApprovalRequestedMsg(r, c, n, a)])
            case t.ApprovalDecided(request_id=r, call_id=c, decision=d, decided_by=b):
                return self._wrap(sequence, [ApprovalDecidedMsg(r, c, d, b)])
            case t.ApprovalFailed(request_id=r, call_id=c, error=error):
                return self._wrap(sequence, [ApprovalFailedMsg(r, c, error)])
            case compaction.CompactionStarted(compaction_id=cid):
                return self._compaction(sequence, cid, "Context compacting", "pending")
            case compaction.ContextCompacted(compaction_id=cid):
                return self._compaction(sequence, cid, "Context compacted", "complete")
            case compaction.CompactionFailed(compaction_id=cid, message=message):
                return self._compaction(
                    sequence, cid, "Context compaction failed", "complete", message
                )
            case compaction.CompactionCancelled(compaction_id=cid):
                return self._compaction(
                    sequence, cid, "Context compaction cancelled", "complete"
                )
            case t.HookContextAdded(hook=hook, text=text):
                return self._wrap(sequence, [HookContextAddedMsg(hook, text)])
            case t.WarningRaised(message=message):
                return self._wrap(sequence, [WarningRaisedMsg(message)])
            case answers.AnswerAccepted():
                self.note(event)  # the answer is told with the turn's end
                return []
            case answers.AnswerRejected(
                step=step, attempt=n, rejected_by=by, reason=why
            ):
                rejected = AnswerRejectedMsg(step, n, by, why, event.final)
                return self._wrap(sequence, [rejected])
            case _:
                return []

    def _compaction(
        self, sequence: int, cid: str, title: str, state: str, body: str = ""
    ) -> list[Event]:
        block = RenderBlock(cid, title, state, body)
        return self._wrap(sequence, [FrontendMsg(COMPACTION_CAPABILITY, block)])


_SESSION_CASES: tuple[type[Any], ...] = (
    s.UsageRecorded,
    s.TurnStarted,
    s.TurnCompleted,
    s.TurnAborted,
    s.SessionCreated,
    s.ContextRewritten,
    s.InputQueued,
    s.QueuedInputDropped,
    s.ToolAllowedForSession,
    s.SharedStateUpdated,
    s.ModelRouteChanged,
    AgentHandedOff,
    JobStarted,
    JobFinished,
    s.SessionClosed,
)
"""The classes of ``EventTranslator.translate``'s cases, in their order
(tests/domain/test_translation_cases.py holds the two together)."""

_SESSION_CASE_OF: dict[type[Any], bool] = {}

_TURN_CASES: tuple[type[Any], ...] = (
    t.ModelStepStarted,
    t.ModelStepCompleted,
    t.ToolCallStarted,
    t.ToolCallFinished,
    t.InputAccepted,
    t.InputRejected,
    t.ModelStepFailed,
    t.ApprovalRequested,
    t.ApprovalDecided,
    t.ApprovalFailed,
    compaction.CompactionStarted,
    compaction.ContextCompacted,
    compaction.CompactionFailed,
    compaction.CompactionCancelled,
    t.HookContextAdded,
    t.WarningRaised,
    answers.AnswerAccepted,
    answers.AnswerRejected,
)
"""The classes of ``EventTranslator._translate_turn_event``'s cases, in
their order (tests/domain/test_translation_cases.py holds the two together)."""

_TURN_CASE_OF: dict[type[Any], bool] = {}

_STATE_CASES: tuple[type[Any], ...] = (
    s.UsageRecorded,
    s.TurnStarted,
    s.TurnCompleted,
    s.TurnAborted,
    answers.AnswerAccepted,
    s.ContextRewritten,
    s.SessionCreated,
)
"""The classes of ``EventTranslator.note``'s cases, in their order: the
events whose translation changes the translator's state."""

_STATE_CASE_OF: dict[type[Any], bool] = {}


def _note_match(
    known: dict[type[Any], bool], cases: tuple[type[Any], ...], cls: type[Any]
) -> bool:
    """Whether an event of class ``cls`` may match one of ``cases``, noted
    in ``known`` (read first by the callers, without a call)."""
    may_match = known[cls] = issubclass(cls, cases)
    return may_match


COMPACTION_CAPABILITY = "compaction"
"""The FrontendMsg capability of the compaction notice."""


def replay(session_id: str, events: Iterable[object]) -> list[Event]:
    """The durable Event stream of a session from its events, in order."""
    translator = EventTranslator(session_id)
    out: list[Event] = []
    for event in events:
        out.extend(translator.translate(event, event_seq(event)))
    return out
