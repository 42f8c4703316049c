"""How a SessionActor settles approvals: who is asked, and what follows.

A mixin of the SessionActor (through TurnFlow). Requests are recorded
(``ApprovalRequested``) before the broker is asked; the first decision a
request gets is recorded and obeyed, any later one is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pykka

from turnlog.actors.messages import ApprovalSettled, AskApproval, Decide, RunCalls
from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.errors import UsageError
from turnlog.domain.model import Item
from turnlog.domain.run import RunStatus
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn


class ApprovalFlow:
    """Approval handling of a SessionActor (state lives on the actor)."""

    actor_ref: pykka.ActorRef[Any]
    _services: Any
    _settings: Any
    _session: Session
    _session_id: str
    _turn: Turn | None
    _context: list[Item]

    def _record(
        self,
        decide: Callable[[], Sequence[Any]],
        before_publish: Callable[[], None] | None = None,
    ) -> None:
        raise NotImplementedError

    def _step_due(self, turn: Turn) -> int:
        raise NotImplementedError

    def _after_step_due(self, turn: Turn, due: int) -> None:
        raise NotImplementedError

    def _tell_turn(self, message: Any) -> None:
        raise NotImplementedError

    def _close_open_work(self, turn: Turn, reason: str) -> None:
        raise NotImplementedError

    def _turn_ended(
        self, status: RunStatus, final_output: str | None, error: str | None
    ) -> None:
        raise NotImplementedError

    def _needs_approval(self, tool: Any, arguments: str) -> bool:
        if self._settings.approval_policy == "allow":
            return False
        if tool.name in self._session.allowed_tools:
            return False
        return bool(tool.requires_approval(arguments))

    def _ask_approval(self, request: ApprovalRequest) -> None:
        self._services.approval_broker.tell(
            AskApproval(
                request,
                self._settings.approval_policy,
                self._settings.approval_provider,
                self.actor_ref,
                self._settings.approval_timeout,
            )
        )

    def _pending_approvals(self) -> list[ApprovalRequest]:
        turn = self._turn
        if turn is None or not self._session.running:
            return []
        return [
            self._approval_request(turn, request_id, call_id)
            for request_id, call_id in turn.pending_approvals.items()
        ]

    def _approval_request(
        self, turn: Turn, request_id: str, call_id: str
    ) -> ApprovalRequest:
        return ApprovalRequest(
            request_id,
            self._session_id,
            str(turn.id),
            call_id,
            turn.requested_calls[call_id],
            arguments_of(self._context, call_id),
        )

    def _decide(self, message: Decide) -> None:
        turn = self._turn
        request_id = message.request_id
        if (
            turn is None
            or not self._session.running
            or request_id not in turn.pending_approvals
        ):
            msg = (
                f"approval request {request_id!r} is not pending in session "
                f"{self._session_id!r} (unknown, stale or already decided)"
            )
            raise UsageError(msg)
        decision = message.decision
        session = self._session
        run_now: list[dict[str, Any]] = []
        settled = [request_id]
        due: list[int] = []

        def allow(request: str, decided_as: str, decided_by: str) -> None:
            call_id = turn.pending_approvals[request]
            turn.decide_approval(request, decided_as, decided_by)
            name = turn.requested_calls[call_id]
            arguments = arguments_of(self._context, call_id)
            turn.start_tool_call(call_id, name, arguments)
            run_now.append({"call_id": call_id, "name": name, "arguments": arguments})

        def decide() -> list[Any]:
            call_id = turn.pending_approvals[request_id]
            if decision in ("allow", "allow_session"):
                allow(request_id, decision, message.decided_by)
            if decision == "allow_session":
                name = turn.requested_calls[call_id]
                session.allow_tool_for_session(name, request_id)
                # Calls of the same tool waiting beside this one are covered.
                for other, other_call in list(turn.pending_approvals.items()):
                    if turn.requested_calls[other_call] == name:
                        allow(other, "allow", "session allowance")
                        settled.append(other)
            elif decision == "abort":
                turn.decide_approval(request_id, decision, message.decided_by)
                self._close_open_work(turn, "aborted at approval")
                session.abort_turn(turn.number, "aborted at approval", failed=False)
            elif decision != "allow":
                turn.decide_approval(request_id, decision, message.decided_by)
                reason = (
                    "approval timed out; the call was not run"
                    if decision == "timeout"
                    else "the call was denied approval and was not run"
                )
                turn.finish_tool_call(call_id, reason, is_error=True)
                if not turn.unanswered_calls():
                    due.append(self._step_due(turn))
            return [session, turn]

        self._record(decide)
        for settled_id in settled:
            self._services.approval_broker.tell(ApprovalSettled(settled_id))
        if decision == "abort":
            self._turn_ended("aborted", None, "aborted at approval")
        elif run_now:
            self._tell_turn(RunCalls(tuple(run_now)))
        elif due:
            self._after_step_due(turn, due[0])


def arguments_of(context: list[Item], call_id: str) -> str:
    """The arguments the model gave call ``call_id`` (from the context)."""
    for item in reversed(context):
        if item.get("type") == "function_call" and item.get("call_id") == call_id:
            return str(item.get("arguments", ""))
    return "{}"
