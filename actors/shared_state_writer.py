"""A tool call's way to change its session's shared state, durably.

A tool runs on a worker thread or on the I/O loop, never on the session's
thread, and the session actor is the single writer of its session: so an
update is a message to that actor, which records ``SharedStateUpdated``
and answers once it is durable. The tool waits for that answer, so the
update is in the log before the call's output. An update from a call that
is no longer open (it timed out, or its turn ended) is refused: the log
never shows a change made after the call was answered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import pykka

from turnlog.actors.messages import UpdateSharedState
from turnlog.actors.session_state import SessionState
from turnlog.domain.errors import SessionClosedError, TurnlogError, UsageError
from turnlog.domain.text import check_encodable


class SharedStateWriter:
    """Updates one tool call's session's shared state (see ToolContext)."""

    def __init__(
        self,
        session: pykka.ActorRef[Any],
        session_id: str,
        turn_id: str,
        call_id: str,
        state: Mapping[str, Any],
    ) -> None:
        self._session = session
        self._session_id = session_id
        self._call = (turn_id, call_id)
        self.state: Mapping[str, Any] = state
        """The shared state as this call last saw it (after its own updates)."""

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Records ``changes``; returns the new state once it is durable."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._took(self._send(changes).result())
        msg = (
            "update_shared_state() would block the event loop: in an async "
            "tool, use 'await context.update_shared_state_async(...)'"
        )
        raise UsageError(msg)

    async def update_async(self, changes: dict[str, Any]) -> dict[str, Any]:
        """``update`` for async tools: waits without blocking the loop."""
        return self._took(await asyncio.wrap_future(self._send(changes)))

    def _send(self, changes: dict[str, Any]) -> concurrent.futures.Future[Any]:
        check_encodable(changes, "shared_state")
        waiter: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            self._session.tell(UpdateSharedState(changes, waiter, self._call))
        except pykka.ActorDeadError:
            msg = f"session {self._session_id!r} is closed: shared state not updated"
            raise SessionClosedError(msg) from None
        return waiter

    def _took(self, state: dict[str, Any]) -> dict[str, Any]:
        self.state = MappingProxyType(state)
        return dict(state)


def record_tool_update(state: SessionState, message: UpdateSharedState) -> None:
    """Records a tool's update on the session's thread; answers its waiter."""
    waiter = message.waiter
    assert waiter is not None

    def decide() -> list[Any]:
        state.session.update_shared_state(message.changes)
        return [state.session]

    if record_for_tool(state, waiter, message.call, decide, "shared state not updated"):
        waiter.set_result(dict(state.session.shared_state))


def record_for_tool(
    state: SessionState,
    waiter: concurrent.futures.Future[Any],
    call: tuple[str, str] | None,
    decide: Callable[[], list[Any]],
    refused: str,
) -> bool:
    """Records ``decide`` for a tool that waits on ``waiter``, on the
    session's thread; True once recorded (the caller then answers).

    Refused (the session closed, or the tool's ``call``, its turn and call
    ids, no longer running: ``refused`` says what did not happen), the
    waiter gets the error and nothing is recorded. Any other failure fails
    the actor, and the waiter first, so the tool never waits for good.
    """
    try:
        state.check_open()
        if call is not None:
            _check_call_open(state, *call, refused)
        state.record(decide)
    except TurnlogError as error:
        waiter.set_exception(error)
        return False
    except BaseException as error:
        waiter.set_exception(error)
        raise
    return True


def _check_call_open(
    state: SessionState, turn_id: str, call_id: str, refused: str
) -> None:
    turn = state.turn
    if turn is None or str(turn.id) != turn_id or call_id not in turn.open_calls:
        msg = (
            f"tool call {call_id!r} is no longer running (it timed out, or its "
            f"turn ended): {refused}"
        )
        raise UsageError(msg)
