"""What a session's handles send its actor, made from the caller's arguments.

Every argument is checked here, on the caller's thread, before anything
is sent: bad input gets a clear error (InvalidInputError, or the domain's
check for input text) and reaches no actor, so it records nothing. The
handles (turnlog/session.py: ``AgentSession`` and ``RunHandle``) say
what each request means to a caller; this is only what it is made of.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Any

from turnlog.actors.messages import (
    AbandonRun,
    ChangeRoute,
    CloseSession,
    FollowUp,
    RecordedInputQuery,
    Rewind,
    RunWaiter,
    StartPrompt,
    Submit,
    UpdateSharedState,
)
from turnlog.domain.approval import ApprovalDecision, check_decision
from turnlog.domain.errors import InvalidInputError
from turnlog.domain.input_ids import check_input_id
from turnlog.domain.inputs import check_attachments, check_input
from turnlog.domain.lineage import check_point_args
from turnlog.domain.protocol import (
    ApprovalResponse,
    Interrupt,
    PeerInput,
    SessionFileReference,
    Steer,
)
from turnlog.domain.run import RunResult
from turnlog.domain.text import check_encodable


def prompt(
    text: str,
    attachments: Sequence[SessionFileReference],
    deps: object,
    input_id: str | None,
    check_deps: Callable[[object], None] | None,
    *,
    waiter: RunWaiter[RunResult],
) -> StartPrompt:
    """A prompt to run; its ``waiter`` is answered when the run ends."""
    check_input("prompt", text)
    refs = check_attachments(attachments)
    given_id = given_input_id(input_id)
    if deps is not None and check_deps is not None:
        check_deps(deps)
    return StartPrompt(text, refs, waiter, deps, given_id)


def abandon(waiter: RunWaiter[Any]) -> AbandonRun:
    """Interrupt the run ``waiter`` waits on; ``done`` is set once it is."""
    return AbandonRun(waiter, concurrent.futures.Future())


def follow_up(
    text: str,
    attachments: Sequence[SessionFileReference],
    input_id: str | None = None,
) -> FollowUp:
    """Input queued to run after the current (or next) run's turns."""
    check_input("follow_up", text)
    return FollowUp(text, check_attachments(attachments), given_input_id(input_id))


def steer(
    text: str,
    attachments: Sequence[SessionFileReference],
    input_id: str | None = None,
) -> Submit:
    """Text for the running turn's next model call."""
    check_input("steer", text)
    refs = check_attachments(attachments)
    return Submit(Steer(text, refs, given_input_id(input_id)))


def peer_input(text: str, kind: str, input_id: str | None) -> Submit:
    """Input from a peer agent or the host (``kind`` peer or system)."""
    check_input("peer", text)
    return Submit(PeerInput(text, kind, given_input_id(input_id)))


def recorded_input(input_id: str, text: str, kind: str) -> RecordedInputQuery:
    """Asks under which submission input ``input_id`` was recorded."""
    check_input(kind, text)
    return RecordedInputQuery(check_input_id(input_id), kind, text)


def rewind(before_input: int | None, after_turn: int | None) -> Rewind:
    """Sets the turns after a quiet point aside (one of the two names it)."""
    check_point_args(before_input, after_turn)
    return Rewind(before_input, after_turn)


def change_route(route: str) -> ChangeRoute:
    """Later model calls go to ``route``."""
    if not isinstance(route, str):
        msg = f"route must be a str, not {type(route).__name__}"
        raise InvalidInputError(msg)
    return ChangeRoute(route)


def interrupt(*, clear_queue: bool = False) -> Submit:
    """Aborts the running turn (dropping queued input if ``clear_queue``)."""
    if not isinstance(clear_queue, bool):
        msg = "clear_queue must be a bool"
        raise InvalidInputError(msg)
    return Submit(Interrupt(clear_queue=clear_queue))


def approval(
    request_id: str, decision: ApprovalDecision | str, input_id: str | None
) -> ApprovalResponse:
    """A decision on the pending request ``request_id``."""
    if not isinstance(request_id, str):
        msg = f"request_id must be a str, not {type(request_id).__name__}"
        raise InvalidInputError(msg)
    kind = check_decision(decision).kind
    return ApprovalResponse(request_id, kind, given_input_id(input_id))


def shared_state_update(changes: dict[str, Any]) -> UpdateSharedState:
    """Keys of the shared state to set (recorded)."""
    check_encodable(changes, "shared_state")
    return UpdateSharedState(changes)


def close(*, abort: bool, timeout: object) -> CloseSession:
    """Closes the session; its ``waiter`` is set once the close is recorded."""
    if not isinstance(abort, bool):
        msg = "abort must be a bool"
        raise InvalidInputError(msg)
    check_timeout(timeout)
    return CloseSession(abort, concurrent.futures.Future())


def subscription_buffer(buffer: object, default: int) -> int:
    """How many events may wait unread for a subscriber (``default``: the
    run config's ``event_buffer``)."""
    if buffer is None:
        return default
    if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
        msg = f"buffer must be a positive int, not {buffer!r}"
        raise InvalidInputError(msg)
    return buffer


def check_timeout(timeout: object) -> None:
    """A wait's ``timeout``: None (no limit) or seconds, 0 or more."""
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not timeout >= 0
    ):
        msg = f"timeout must be a number of seconds >= 0, not {timeout!r}"
        raise InvalidInputError(msg)


def given_input_id(input_id: str | None) -> str:
    """The input id an op carries ("" for none), checked at the boundary."""
    return "" if input_id is None else check_input_id(input_id)
