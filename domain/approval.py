"""Approval requests and decisions, as plain data."""

from __future__ import annotations

from typing import Literal

import msgspec

from turnlog.domain.errors import InvalidInputError

DecisionKind = Literal["allow", "allow_session", "deny", "abort"]
ApprovalPolicy = Literal["allow", "deny", "ask"]


class ApprovalRequest(msgspec.Struct, frozen=True):
    """A tool call waiting for a decision."""

    request_id: str
    session_id: str
    turn_id: str
    call_id: str
    tool_name: str
    arguments: str


class ApprovalDecision(msgspec.Struct, frozen=True):
    """A decision on an approval request.

    ``allow`` runs the call once; ``allow_session`` also allows later calls
    of the same tool in the session; ``deny`` answers the model with an error
    output; ``abort`` ends the turn as aborted.
    """

    kind: DecisionKind

    @classmethod
    def allow(cls) -> ApprovalDecision:
        """Allow this call once."""
        return cls("allow")

    @classmethod
    def allow_session(cls) -> ApprovalDecision:
        """Allow this tool for the rest of the session."""
        return cls("allow_session")

    @classmethod
    def deny(cls) -> ApprovalDecision:
        """Refuse the call; the model is told it was denied."""
        return cls("deny")

    @classmethod
    def abort(cls) -> ApprovalDecision:
        """Refuse the call and end the turn."""
        return cls("abort")


def check_decision(decision: object) -> ApprovalDecision:
    """``decision`` as an ApprovalDecision, or a clear InvalidInputError."""
    if isinstance(decision, ApprovalDecision):
        return decision
    if isinstance(decision, str) and decision in (
        "allow",
        "allow_session",
        "deny",
        "abort",
    ):
        return ApprovalDecision(decision)  # type: ignore[arg-type]
    msg = (
        "decision must be an ApprovalDecision (or one of 'allow', "
        f"'allow_session', 'deny', 'abort'), not {decision!r}"
    )
    raise InvalidInputError(msg)
