"""``rt.approvals``: decide approval requests through the runtime's broker.

An approval provider that holds the broker may resolve a request from
inside its own ``decide()`` (it runs on a worker thread, and the broker
never waits for it), or from anywhere else later.
"""

from __future__ import annotations

import pykka

from turnlog.actors.approval_broker import ApprovalBrokerActor
from turnlog.actors.messages import ResolveApproval
from turnlog.domain.approval import ApprovalDecision, check_decision
from turnlog.domain.errors import InvalidInputError, RuntimeClosedError

ASK_TIMEOUT: float | None = None
"""As long as the broker lives (see turnlog.handles.actor_handle.ASK_TIMEOUT)."""


class ApprovalBroker:
    """The runtime's approval broker, as callers and providers see it."""

    def __init__(self, ref: pykka.ActorRef[ApprovalBrokerActor]) -> None:
        self._ref = ref

    def resolve(self, request_id: str, decision: ApprovalDecision | str) -> None:
        """Decides the pending request ``request_id``.

        Raises UsageError if the broker has no such pending request. The
        session records the first decision a request gets; a later one
        (the user's, a timeout's) is dropped.
        """
        if not isinstance(request_id, str):
            msg = f"request_id must be a str, not {type(request_id).__name__}"
            raise InvalidInputError(msg)
        kind = check_decision(decision).kind
        try:
            self._ref.ask(ResolveApproval(request_id, kind), timeout=ASK_TIMEOUT)
        except pykka.ActorDeadError:
            msg = "the runtime was closed"
            raise RuntimeClosedError(msg) from None
