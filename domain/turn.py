"""The Turn aggregate: what happened inside one turn (its events: turn_events.py).

A turn holds its input, its model steps, the tool calls those steps asked
for, and approvals. Its lifecycle markers (started, completed, aborted)
are Session events, saved in the same transaction as the turn's own.

Invariants (a violation raises and records nothing):
- model steps run one at a time, numbered 1, 2, ...;
- a tool call starts once and finishes once, and only after it started;
- an approval is decided (or fails) once, and only after it was requested.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eventsourcing.domain import Aggregate

from turnlog.domain.errors import InvalidInputError, InvariantViolation
from turnlog.domain.events import (
    create_session_aggregate,
    register_stable_topic,
    trigger_session_event,
)
from turnlog.domain.ids import turn_id_text, turn_uuid
from turnlog.domain.inputs import check_input
from turnlog.domain.model import Item
from turnlog.domain.turn_events import (
    ApprovalDecided,
    ApprovalFailed,
    ApprovalRequested,
    ChildSessionStarted,
    HookContextAdded,
    InputAccepted,
    InputRejected,
    ModelStepCompleted,
    ModelStepFailed,
    ModelStepStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnOpened,
    WarningRaised,
)

APPROVAL_DECISIONS = frozenset({"allow", "allow_session", "deny", "abort", "timeout"})


class Turn(Aggregate):
    """One turn of a session. Create with :meth:`open`."""

    session_id: str
    number: int
    submission_id: str

    def trigger_event(self, event_class: type[Any], **kwargs: Any) -> None:
        """Triggers ``event_class`` stamped with this session's id."""
        trigger_session_event(self, event_class, kwargs)

    def __init__(self) -> None:
        self.steps = 0
        self.step_open = False
        self.open_calls: dict[str, str] = {}
        self.finished_calls: frozenset[str] = frozenset()
        self.pending_approvals: dict[str, str] = {}
        self.requested_calls: dict[str, str] = {}
        self.compaction_open: str | None = None  # (domain.compaction)
        self.answer_rejections = 0  # final answers refused (domain.answers)
        self.decided: dict[str, str] = {}  # approval request id -> decision

    def unanswered_calls(self) -> dict[str, str]:
        """Calls of the last step without an output yet (id -> tool name)."""
        return {
            call_id: name
            for call_id, name in self.requested_calls.items()
            if call_id not in self.finished_calls
        }

    def unstarted_calls(self) -> dict[str, str]:
        """Calls of the last step neither answered nor started (id -> tool
        name), in the order the model asked for them; with those waiting
        for an approval decision."""
        return {
            call_id: name
            for call_id, name in self.unanswered_calls().items()
            if call_id not in self.open_calls
        }

    @classmethod
    def open(cls, session_id: str, number: int, submission_id: str) -> Turn:
        """Opens the record of turn ``number`` of ``session_id``."""
        turn: Turn = create_session_aggregate(
            cls,
            TurnOpened,
            turn_uuid(session_id, number),
            {
                "session_id": session_id,
                "number": number,
                "submission_id": submission_id,
            },
        )
        return turn

    @property
    def id_text(self) -> str:
        """``str(self.id)``, as events and effects carry it, formatted once
        a process (turnlog.domain.ids.turn_id_text)."""
        return turn_id_text(self.session_id, self.number)

    def accept_input(
        self,
        submission_id: str,
        kind: str,
        text: str,
        attachments: list[dict[str, Any]] | None = None,
        input_id: str = "",
        *,
        rewritten_by: Sequence[str] = (),
        original_text: str | None = None,
    ) -> None:
        """Records input that enters this turn (``input_id``: the caller's
        id), as the user_prompt hooks rewrote it if they did."""
        check_input(kind, text)
        self.trigger_event(
            InputAccepted,
            submission_id=submission_id,
            kind=kind,
            text=text,
            attachments=list(attachments or []),
            input_id=input_id,
            rewritten_by=list(rewritten_by),
            original_text=original_text,
        )

    def reject_input(self, submission_id: str, reason: str) -> None:
        """Records that input was refused, without its content."""
        self.trigger_event(InputRejected, submission_id=submission_id, reason=reason)

    def start_step(self, route: str, model: str = "", provider: str = "") -> int:
        """Starts the next model step and returns its number.

        Args:
            route: the model route the step takes.
            model: the model the route's provider is asked for, if it says.
            provider: who serves it (``gen_ai.provider.name``), if known.
        """
        if self.step_open:
            msg = f"model step {self.steps} is still running"
            raise InvariantViolation(msg)
        if self.unanswered_calls():
            msg = "every tool call of the last step needs an output first"
            raise InvariantViolation(msg)
        step = self.steps + 1
        self.trigger_event(
            ModelStepStarted, step=step, route=route, model=model, provider=provider
        )
        return step

    def _check_step_open(self, step: int) -> None:
        if not self.step_open or step != self.steps:
            msg = f"model step {step} is not running"
            raise InvariantViolation(msg)

    def complete_step(
        self,
        step: int,
        output: list[Item],
        usage: dict[str, int] | None,
        diagnostics: dict[str, Any] | None = None,
        response_model: str = "",
    ) -> None:
        """Records the output of the running model step."""
        self._check_step_open(step)
        self.trigger_event(
            ModelStepCompleted,
            step=step,
            output=output,
            usage=usage,
            diagnostics=dict(diagnostics or {}),
            response_model=response_model,
        )

    def fail_step(self, step: int, error_type: str, message: str) -> None:
        """Records that the running model step failed."""
        self._check_step_open(step)
        self.trigger_event(
            ModelStepFailed, step=step, error_type=error_type, message=message
        )

    def start_tool_call(
        self,
        call_id: str,
        name: str,
        arguments: str,
        tool_type: str = "",
        mcp_server: str = "",
    ) -> None:
        """Records that a tool call is about to run.

        ``tool_type`` and ``mcp_server`` say what runs it (see
        :class:`ToolCallStarted`).
        """
        if call_id not in self.requested_calls:
            msg = f"tool call {call_id!r} was never requested by the model"
            raise InvariantViolation(msg)
        if call_id in self.open_calls or call_id in self.finished_calls:
            msg = f"tool call {call_id!r} was already started"
            raise InvariantViolation(msg)
        self.trigger_event(
            ToolCallStarted,
            call_id=call_id,
            name=name,
            arguments=arguments,
            step=self.steps,
            tool_type=tool_type,
            mcp_server=mcp_server,
        )

    def start_child_session(self, call_id: str, child_session: str, agent: str) -> None:
        """Records that started call ``call_id`` runs ``agent`` as a child."""
        if call_id not in self.open_calls:
            msg = f"tool call {call_id!r} is not running"
            raise InvariantViolation(msg)
        self.trigger_event(
            ChildSessionStarted,
            call_id=call_id,
            child_session=child_session,
            agent=agent,
        )

    def finish_tool_call(
        self,
        call_id: str,
        output: str,
        *,
        is_error: bool,
        media: Sequence[Mapping[str, str]] = (),
        skipped: str = "",
    ) -> None:
        """Records a tool call's output (with its image and audio parts).

        A requested call may be answered without having started (an unknown
        tool, a denied approval, a call ``skipped`` because the user
        steered); every call is answered exactly once.
        """
        if call_id in self.finished_calls:
            msg = f"tool call {call_id!r} already finished"
            raise InvariantViolation(msg)
        name = self.open_calls.get(call_id) or self.requested_calls.get(call_id)
        if name is None:
            msg = f"tool call {call_id!r} was never requested by the model"
            raise InvariantViolation(msg)
        self.trigger_event(
            ToolCallFinished,
            call_id=call_id,
            name=name,
            output=output,
            is_error=is_error,
            media=[dict(part) for part in media],
            skipped=skipped,
        )

    def request_approval(
        self, request_id: str, call_id: str, name: str, arguments: str
    ) -> None:
        """Records that a tool call waits for a decision."""
        if request_id in self.pending_approvals:
            msg = f"approval {request_id!r} was already requested"
            raise InvariantViolation(msg)
        self.trigger_event(
            ApprovalRequested,
            request_id=request_id,
            call_id=call_id,
            name=name,
            arguments=arguments,
        )

    def decide_approval(
        self, request_id: str, decision: str, decided_by: str, input_id: str = ""
    ) -> None:
        """Records the decision on a pending approval (``input_id``: the
        caller's id for its answer, if it gave one)."""
        if decision not in APPROVAL_DECISIONS:
            msg = f"unknown approval decision {decision!r}"
            raise InvalidInputError(msg)
        call_id = self.pending_approvals.get(request_id)
        if call_id is None:
            msg = f"approval {request_id!r} is not pending"
            raise InvariantViolation(msg)
        self.trigger_event(
            ApprovalDecided,
            request_id=request_id,
            call_id=call_id,
            decision=decision,
            decided_by=decided_by,
            input_id=input_id,
        )

    def fail_approval(self, request_id: str, error: str) -> None:
        """Records that the provider asked about a pending approval failed."""
        call_id = self.pending_approvals.get(request_id)
        if call_id is None:
            msg = f"approval {request_id!r} is not pending"
            raise InvariantViolation(msg)
        self.trigger_event(
            ApprovalFailed, request_id=request_id, call_id=call_id, error=error
        )

    def add_hook_context(self, hook: str, text: str) -> None:
        """Records context a middleware hook added for the model."""
        if not isinstance(text, str) or not text:
            msg = f"{hook} context must be a non-empty str"
            raise InvalidInputError(msg)
        self.trigger_event(HookContextAdded, hook=hook, text=text)

    def warn(self, message: str) -> None:
        """Records a warning."""
        self.trigger_event(WarningRaised, message=message)


register_stable_topic(Turn)
