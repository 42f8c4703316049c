"""How a SessionActor settles approvals: who is asked, and what follows.

Requests are recorded (``ApprovalRequested``) before the broker is asked;
the first decision a request gets is recorded and obeyed, any later one is
refused. What a decision does to the turn (run the call, answer it, go on
to the next step, or end the turn) is the turn flow's, reached through the
:class:`TurnControl` it passes in.
"""

from __future__ import annotations

from typing import Any, Protocol

from turnlog.actors.messages import ApprovalSettled, AskApproval, Decide
from turnlog.actors.session_state import SessionState
from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.errors import UsageError
from turnlog.domain.model import Item
from turnlog.domain.run import RunStatus
from turnlog.domain.turn import Turn


class TurnControl(Protocol):
    """What a decision may do to the running turn (the turn flow)."""

    def step_due(self, turn: Turn) -> int: ...

    def after_step_due(self, turn: Turn, due: int) -> None: ...

    def run_calls(self, calls: tuple[dict[str, Any], ...]) -> None: ...

    def close_open_work(self, turn: Turn, reason: str) -> None: ...

    def turn_ended(
        self, status: RunStatus, final_output: str | None, error: str | None
    ) -> None: ...


class Approvals:
    """The approval policy of one session, and the decisions it receives."""

    def __init__(self, state: SessionState, address: Any = None) -> None:
        # Where the broker sends decisions: the session's host when it has
        # one, so a decision reaches a session passivated meanwhile.
        self._state = state
        self._address = address if address is not None else state.actor_ref

    def needs_approval(self, tool: Any, arguments: str) -> bool:
        """Whether a call of ``tool`` must wait for a decision."""
        if self._state.settings.approval_policy == "allow":
            return False
        if tool.name in self._state.session.allowed_tools:
            return False
        return bool(tool.requires_approval(arguments))

    def ask(self, request: ApprovalRequest) -> None:
        """Asks the broker to decide a recorded request."""
        state, settings = self._state, self._state.settings
        state.services.approval_broker.tell(
            AskApproval(
                request,
                settings.approval_policy,
                settings.approval_provider,
                self._address,
                settings.approval_timeout,
            )
        )

    def pending(self) -> list[ApprovalRequest]:
        """The requests of the running turn that wait for a decision."""
        turn = self._state.turn
        if turn is None or not self._state.session.running:
            return []
        return [
            self.request(turn, request_id, call_id)
            for request_id, call_id in turn.pending_approvals.items()
        ]

    def request(self, turn: Turn, request_id: str, call_id: str) -> ApprovalRequest:
        """The request ``request_id`` of ``turn``, as the broker is asked it."""
        return ApprovalRequest(
            request_id,
            self._state.session_id,
            str(turn.id),
            call_id,
            turn.requested_calls[call_id],
            arguments_of(self._state.context, call_id),
        )

    def decide(self, message: Decide, turns: TurnControl) -> None:
        """Records ``message``'s decision and lets the turn go on."""
        state = self._state
        turn = state.turn
        request_id = message.request_id
        if (
            turn is None
            or not state.session.running
            or request_id not in turn.pending_approvals
        ):
            msg = (
                f"approval request {request_id!r} is not pending in session "
                f"{state.session_id!r} (unknown, stale or already decided)"
            )
            raise UsageError(msg)
        decision = message.decision
        session = state.session
        run_now: list[dict[str, Any]] = []
        settled = [request_id]
        due: list[int] = []

        def allow(request: str, decided_as: str, decided_by: str) -> None:
            call_id = turn.pending_approvals[request]
            turn.decide_approval(request, decided_as, decided_by)
            name = turn.requested_calls[call_id]
            arguments = arguments_of(state.context, call_id)
            tool = state.agent.tools_by_name.get(name)
            turn.start_tool_call(
                call_id,
                name,
                arguments,
                "" if tool is None else tool.tool_type,
                "" if tool is None else tool.mcp_server,
            )
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
                turns.close_open_work(turn, "aborted at approval")
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
                    due.append(turns.step_due(turn))
            return [session, turn]

        state.record(decide)
        for settled_id in settled:
            state.services.approval_broker.tell(ApprovalSettled(settled_id))
        if decision == "abort":
            turns.turn_ended("aborted", None, "aborted at approval")
        elif run_now:
            turns.run_calls(tuple(run_now))
        elif due:
            turns.after_step_due(turn, due[0])


def arguments_of(context: list[Item], call_id: str) -> str:
    """The arguments the model gave call ``call_id`` (from the context)."""
    for item in reversed(context):
        if item.get("type") == "function_call" and item.get("call_id") == call_id:
            return str(item.get("arguments", ""))
    return "{}"
