"""The ApprovalBroker: gets a decision for every recorded approval request.

Policy ``allow`` and ``deny`` answer at once. Policy ``ask`` hands the
request to the session's approval provider on a worker thread, never on
the broker's own: a provider may answer by returning a decision, may
return None and answer later through ``session.approve(...)``, or may
resolve the request from inside ``decide()`` itself; none of these can
deadlock, because the broker never waits for the provider and the session
never waits for the broker.

Decisions go to the SessionActor as ``Decide`` messages; the session is the
single writer and records the first decision, refusing any later one. A
provider that raises, or returns something that is not a decision, has
decided nothing: that goes to the session as ``ApprovalProviderFailed``,
and the turn fails with it (the call is not run).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
from typing import Any

import pykka

from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import (
    ApprovalExpired,
    ApprovalSettled,
    AskApproval,
    ProviderAnswered,
    ResolveApproval,
)
from turnlog.domain.approval import ApprovalDecision
from turnlog.domain.errors import UsageError
from turnlog.domain.turn_facts import ApprovalProviderFailed, Decide

logger = logging.getLogger(__name__)


class ApprovalBrokerActor(pykka.ThreadingActor):
    """Routes approval requests to policies and providers."""

    # A runtime left open must not hold its process at exit (see Runtime).
    use_daemon_thread = True

    def __init__(self, io_loop: IoLoop, max_provider_threads: int = 8) -> None:
        super().__init__()
        self._io_loop = io_loop
        self._timers: dict[str, Any] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_provider_threads, thread_name_prefix="turnlog-approval"
        )
        self._pending: dict[str, AskApproval] = {}

    def on_receive(self, message: Any) -> Any:
        match message:
            case AskApproval(request=request, policy=policy, provider=provider):
                if policy in ("allow", "deny"):
                    _tell(message.session, Decide(request.request_id, policy, "policy"))
                    return None
                self._pending[request.request_id] = message
                if message.timeout is not None:
                    me = self.actor_ref
                    expired = ApprovalExpired(request.request_id)
                    self._timers[request.request_id] = self._io_loop.call_later(
                        message.timeout, lambda: me.tell(expired)
                    )
                if provider is not None:
                    me = self.actor_ref
                    request_id = request.request_id
                    try:
                        future = self._pool.submit(provider.decide, request)
                    except RuntimeError:
                        # The interpreter is exiting: the request stays
                        # pending in the log, to be asked again on reopening.
                        return None
                    future.add_done_callback(
                        lambda f: _tell(me, ProviderAnswered(request_id, f))
                    )
            case ProviderAnswered(request_id=request_id, future=future):
                ask = self._pending.get(request_id)
                if ask is not None:
                    self._provider_answered(ask, future)
            case ApprovalSettled(request_id=request_id):
                self._pending.pop(request_id, None)
                timer = self._timers.pop(request_id, None)
                if timer is not None:
                    timer.cancel()
            case ApprovalExpired(request_id=request_id):
                ask = self._pending.get(request_id)
                if ask is not None:
                    _tell(ask.session, Decide(request_id, "timeout", "timeout"))
            case ResolveApproval(request_id=request_id, decision=decision):
                ask = self._pending.get(request_id)
                if ask is None:
                    msg = f"approval request {request_id!r} is not pending"
                    raise UsageError(msg)
                _tell(ask.session, Decide(request_id, decision, "broker"))
            case _:
                msg = f"ApprovalBroker got an unknown message: {message!r}"
                raise TypeError(msg)
        return None

    def _provider_answered(
        self, ask: AskApproval, future: concurrent.futures.Future[Any]
    ) -> None:
        request_id = ask.request.request_id
        error = future.exception()
        if error is not None:
            logger.warning("approval provider failed on %s: %s", request_id, error)
            failure = f"{type(error).__name__}: {error}"
            _tell(ask.session, ApprovalProviderFailed(request_id, failure))
            return
        decision = future.result()
        if decision is None:
            return  # the provider answers later, through session.approve()
        if not isinstance(decision, ApprovalDecision):
            failure = f"it returned {decision!r}, not an ApprovalDecision or None"
            _tell(ask.session, ApprovalProviderFailed(request_id, failure))
            return
        _tell(ask.session, Decide(request_id, decision.kind, "provider"))

    def on_stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _tell(ref: pykka.ActorRef[Any], message: Any) -> None:
    """Tells ``ref``, unless it stopped: a session closed (or a runtime) while
    its approval was pending wants no decision, and must not stop the broker
    or print a traceback from a provider's thread."""
    with contextlib.suppress(pykka.ActorDeadError):
        ref.tell(message)
