"""The protocol face of a session: submit Ops, read Events."""

from __future__ import annotations

from turnlog.actors.messages import Submit
from turnlog.actors.subscribers import SubscriptionClosed
from turnlog.domain.approval import check_decision
from turnlog.domain.errors import InvalidInputError
from turnlog.domain.input_ids import check_input_id
from turnlog.domain.protocol import (
    ApprovalResponse,
    Event,
    Interrupt,
    Op,
    PeerInput,
    Shutdown,
    Steer,
    UserInput,
)
from turnlog.domain.run import RunEvent
from turnlog.domain.text import check_encodable
from turnlog.session import AgentSession


class AgentHandle:
    """The protocol face of a session: submit Ops, read Events."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session
        self._events = session._actor.subscribe(session._event_buffer, only_events=True)

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.session.session_id

    def submit(self, op: Op) -> str:
        """Submits ``op``; returns its submission id.

        It returns at once, except for input that would be queued behind a
        running turn while the agent has a user_prompt hook: that returns
        once the hook accepted it and it is recorded, and raises
        InputRejectedError, recording nothing, if the hook refused it.
        """
        ops = (UserInput, PeerInput, Steer, Interrupt, ApprovalResponse, Shutdown)
        if not isinstance(op, ops):
            msg = f"not an Op: {op!r}"
            raise InvalidInputError(msg)
        check_encodable(op, type(op).__name__)
        given_id = getattr(op, "input_id", "")
        if given_id:
            check_input_id(given_id)
        target = self.session
        if isinstance(op, ApprovalResponse):
            check_decision(op.decision)
            # A child session's request is answered in that child.
            target = self.session._child_asking(op.request_id) or target
        result: str = target._actor.ask(Submit(op))
        return result

    def next_event(self, timeout: float | None = 30.0) -> Event:
        """The next Event; raises TimeoutError if none comes in time.

        Raises SessionClosedError once the session is closed (and its
        events are read), RuntimeClosedError once the runtime is closed.
        """
        self.session._actor.check_runtime_open()
        try:
            item = self._events.get(timeout)
        except SubscriptionClosed:
            raise self.session._actor.closed_error() from None
        if isinstance(item, RunEvent):
            return item.event
        return self.next_event(timeout)  # an EventsMissed marker: skip it

    async def next_event_async(self) -> Event:
        """``next_event`` for asyncio callers, waited for on their loop (no
        thread held: see ``Subscriber.get_async``)."""
        while True:
            self.session._actor.check_runtime_open()
            try:
                item = await self._events.get_async()
            except SubscriptionClosed:
                raise self.session._actor.closed_error() from None
            if isinstance(item, RunEvent):
                return item.event
            # an EventsMissed marker: skip it

    def close(self) -> None:
        """Stops reading events (the session stays open)."""
        self._events.close()
