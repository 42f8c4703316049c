"""``POST /agui``: a session driven by AG-UI clients.

The body is an AG-UI ``RunAgentInput``; its ``threadId`` is the session
id: the caller's tenant's session, or a new one of that tenant under that
id, running the agent ``forwardedProps.agent`` names or the default one;
another tenant's is a 404, like every resource (see
:mod:`turnlog.service.agui_threads`). The answer is the run's AG-UI events
over SSE, each written by the AG-UI SDK's own ``EventEncoder`` (see
:mod:`turnlog.service.agui_events` for the mapping).

Without ``resume``, the last message, a user message, is the prompt: the
run starts on the session (409 if the session is running, waiting on an
approval included) and streams until its turn ends, or until the turn
waits on approvals: then ``RUN_FINISHED`` has an ``interrupt`` outcome
listing the pending requests (tool, arguments; the interrupt id is the
request id). The turn waits in the session, durably, not in the request.
The message's id is the prompt's input id: a retry of the same message
starts nothing and streams that run again, its durable events from the
log (and, while it goes on, the rest as they come); the same id with
other text is a 409.

With ``resume``, each entry decides one of those requests: a ``resolved``
entry's payload is ``{"decision": "allow" | "allow_session" | "deny" |
"abort"}`` (or the bare string); a ``cancelled`` entry aborts, since an
abandoned approval leaves nothing to go on with. Every entry is checked
before any is applied. The run then streams the rest of the turn from the
log, from where it waited. A ``state`` object in the input is merged into
the session's shared state (recorded) before the run goes on.

Events come from a subscription to the session, taken before the run
starts or goes on, so deltas and durable events come in the order they
happened; only those of the run's own submission (or, for a resume, its
turn) are translated. A client that wants to catch up after a lost
connection reads the log: the SSE stream with ``Last-Event-ID``, or the
transcript.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pydantic
from ag_ui.core import BaseEvent, ResumeEntry, RunAgentInput, TextPart, UserMessage
from ag_ui.encoder import EventEncoder
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.routing import Route

from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.errors import InvalidInputError, SessionBusyError, TurnlogError
from turnlog.domain.input_ids import check_input_id
from turnlog.domain.protocol import (
    ApprovalRequestedMsg,
    Event,
    ToolCallFinishedMsg,
    ToolCallStartedMsg,
)
from turnlog.domain.run import EventsMissed, RunEvent
from turnlog.service.agui_events import AguiTranslator
from turnlog.service.agui_threads import AguiThreads, requested_agent
from turnlog.service.context import ServiceContext
from turnlog.service.parsing import parse_json
from turnlog.service.problems import Problem
from turnlog.service.retries import replayed_prompt
from turnlog.service.run_start import next_run_started
from turnlog.service.sse_framing import sse_response
from turnlog.session import AgentSession, Subscription

logger = logging.getLogger(__name__)

START_TIMEOUT = 30.0
"""Seconds to wait for a prompt's run to start."""

BUFFER = 10_000
"""Events an AG-UI stream's subscription holds for a slow client."""

_DECISIONS = ("allow", "allow_session", "deny", "abort")

CHILD_POLL = 0.25
"""Seconds between looks for a child session's approval requests while a
tool call of the run is open: a child's requests are not in the parent's
stream (an agent used as a tool runs a session of its own)."""


class Scope:
    """Which events belong to an AG-UI run: its submission's, or its turn's."""

    def __init__(
        self,
        submission_id: str | None,
        turn_id: str | None,
        replayed: list[Event] | None = None,
    ) -> None:
        self.submission_id = submission_id
        self.turn_id = turn_id
        self.replayed = replayed or []
        """For a retried prompt: the log's events, streamed before live ones."""

    def covers(self, event: Event) -> bool:
        """Whether ``event`` is of this run."""
        if self.turn_id is not None:
            return event.turn_id == self.turn_id
        return event.submission_id == self.submission_id


class AguiEndpoint:
    """The AG-UI face of a :class:`ServiceContext`."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self.threads = AguiThreads(context)

    def routes(self) -> list[Route]:
        """The endpoint's route."""
        return [Route("/agui", self.run, methods=["POST"])]

    async def run(self, request: Request) -> EventSourceResponse:
        tenant = self.context.tenant(request)
        run_input = await _decode(request)
        decisions = _decisions(run_input.resume) if run_input.resume else None
        prompt = None if decisions is not None else _prompt(run_input)
        message_id = "" if decisions is not None else _message_id(run_input)
        state = _state(run_input.state)
        owned = await self.threads.session_of(
            tenant,
            run_input.thread_id,
            requested_agent(run_input.forwarded_props),
            resuming=decisions is not None,
        )
        session = await self.context.session_async(owned)
        # Subscribed before the run starts or goes on: the subscription has
        # every event of it, deltas and durable ones in the order they came.
        subscription = await asyncio.to_thread(session.subscribe, buffer=BUFFER)
        try:
            watch_children = False
            if decisions is not None:
                scope, pending, watch_children = await self._resume(
                    session, decisions, state
                )
            else:
                assert prompt is not None
                scope = await self._prompt(
                    session, subscription, (prompt, message_id), state
                )
                pending = []
            shared = await asyncio.to_thread(session.shared_state)
        except BaseException:
            subscription.close()
            raise
        translator = AguiTranslator(owned.session_id, run_input.run_id, shared)
        return sse_response(
            self._events(
                session,
                translator,
                scope,
                pending,
                subscription,
                watch_children=watch_children,
            ),
            heartbeat=self.context.heartbeat,
        )

    async def _prompt(
        self,
        session: AgentSession,
        subscription: Subscription,
        message: tuple[str, str],
        state: dict[str, Any] | None,
    ) -> Scope:
        text, input_id = message
        async with self.context.prompt_lock(session.session_id):
            replay = await replayed_prompt(session, input_id, text)
            if replay is not None:  # a retried message: its run, again
                log = self.context.runtime.replay_events
                events = await asyncio.to_thread(log, session.session_id)
                return Scope(replay[0], None, _from_submission(events, replay[0]))
            if await asyncio.to_thread(session.running):
                raise SessionBusyError(f"session {session.session_id!r} is running")
            if state:
                await asyncio.to_thread(lambda: session.update_shared_state(**state))
            # The run outlives its stream: a client that goes away, or the
            # service stopping (which cancels this task), leaves it going.
            run = asyncio.ensure_future(
                session.prompt_async(text, input_id=input_id, detach_on_cancel=True)
            )
            started = asyncio.ensure_future(
                next_run_started(subscription, START_TIMEOUT)
            )
            await asyncio.wait(
                {run, started},
                timeout=START_TIMEOUT,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if run.done() and not started.done():
                run.result()  # raises what refused the prompt
                # It ran to its end before the read of the subscription
                # took its start (a loaded machine): the start is in the
                # subscription already, so it comes at once.
                await asyncio.wait({started}, timeout=START_TIMEOUT)
        submission = started.result() if started.done() else None
        if submission is None:
            raise Problem(503, "the run did not start in time")
        task: asyncio.Task[object] = run
        self.context.running_tasks.add(task)
        run.add_done_callback(self._forget)
        return Scope(submission, None)

    def _forget(self, run: asyncio.Future[Any]) -> None:
        self.context.running_tasks.discard(run)
        if not run.cancelled() and run.exception() is not None:
            logger.warning("run failed: %s", run.exception())

    async def _resume(
        self,
        session: AgentSession,
        decisions: dict[str, str],
        state: dict[str, Any] | None,
    ) -> tuple[Scope, list[ApprovalRequest], bool]:
        pending = {
            request.request_id: request
            for request in await asyncio.to_thread(session.pending_approvals)
        }
        unknown = sorted(set(decisions) - set(pending))
        if unknown:
            raise Problem(409, f"no pending approval {unknown[0]!r}", field="$.resume")
        running = await asyncio.to_thread(session.active_run_handle)
        parent_turn = running.turn_id if running is not None else None

        def turn_of(request: ApprovalRequest) -> str | None:
            # A child session's request waits in the parent's running turn.
            if request.session_id == session.session_id:
                return request.turn_id
            return parent_turn

        turns = {turn_of(pending[request_id]) for request_id in decisions}
        if len(turns) > 1:
            raise Problem(422, "resume entries of several turns", field="$.resume")
        if state:
            await asyncio.to_thread(lambda: session.update_shared_state(**state))
        for request_id, decision in decisions.items():
            await asyncio.to_thread(session.approve, request_id, decision)
        turn_id = turns.pop()
        left = [
            request
            for request in await asyncio.to_thread(session.pending_approvals)
            if turn_of(request) == turn_id
        ]
        # A child's call is still open: the resumed stream watches children.
        children = any(pending[r].session_id != session.session_id for r in decisions)
        return Scope(None, turn_id), left, children

    async def _events(
        self,
        session: AgentSession,
        translator: AguiTranslator,
        scope: Scope,
        pending: list[ApprovalRequest],
        subscription: Subscription,
        *,
        watch_children: bool = False,
    ) -> AsyncIterator[bytes]:
        try:
            for item in translator.start():
                yield _sse(item)
            if pending:  # a resume that left some of the turn's requests open
                for item in translator.interrupt(pending):
                    yield _sse(item)
                return
            open_calls: set[str] = set()
            backlog = [RunEvent(session.session_id, e) for e in scope.replayed]
            replayed_to = max((e.sequence for e in scope.replayed), default=None)
            while not translator.finished:
                poll = CHILD_POLL if open_calls or watch_children else None
                if backlog:  # a retried prompt's events from the log, first
                    batch, backlog = list(backlog), []
                else:
                    batch = await asyncio.to_thread(_next_batch, subscription, poll)
                    batch = _after(batch, replayed_to)
                if not batch:  # quiet while a call runs: a child may be asking
                    waiting = await self._children_waiting(session)
                    if waiting:
                        for item in translator.interrupt(waiting):
                            yield _sse(item)
                        return
                    continue
                for received in batch:
                    if isinstance(received, EventsMissed):
                        # Too slow a client: what it missed is in the log
                        # (the transcript, the SSE stream), not here.
                        for item in translator.error(
                            f"{received.count} events were missed", "events_missed"
                        ):
                            yield _sse(item)
                        return
                    if not isinstance(received, RunEvent):
                        continue
                    event = received.event
                    if not scope.covers(event):
                        continue
                    if scope.turn_id is None and event.turn_id is not None:
                        scope.turn_id = event.turn_id
                    if event.transient:
                        for item in translator.delta(event):
                            yield _sse(item)
                        continue
                    for item in translator.durable(event):
                        yield _sse(item)
                    if isinstance(event.msg, ToolCallStartedMsg):
                        open_calls.add(event.msg.call_id)
                    elif isinstance(event.msg, ToolCallFinishedMsg):
                        open_calls.discard(event.msg.call_id)
                    if isinstance(event.msg, ApprovalRequestedMsg):
                        waiting = await self._waiting(session, event)
                        if waiting:
                            for item in translator.interrupt(waiting):
                                yield _sse(item)
                    if translator.finished:
                        return
        except TurnlogError as error:
            for item in translator.error(str(error), type(error).__name__):
                yield _sse(item)
        finally:
            subscription.close()

    async def _children_waiting(self, session: AgentSession) -> list[ApprovalRequest]:
        """Approval requests of the child sessions the run's calls run now."""
        pending = await asyncio.to_thread(session.pending_approvals)
        return [r for r in pending if r.session_id != session.session_id]

    async def _waiting(
        self, session: AgentSession, event: Event
    ) -> list[ApprovalRequest]:
        """The turn's pending requests, if the one ``event`` asks is pending.

        One decided already (by another client) lets the run go on.
        """
        msg = event.msg
        assert isinstance(msg, ApprovalRequestedMsg)
        pending = await asyncio.to_thread(session.pending_approvals)
        if not any(request.request_id == msg.request_id for request in pending):
            return []
        return [request for request in pending if request.turn_id == event.turn_id]


def _next_batch(subscription: Subscription, timeout: float | None) -> list[Any]:
    """The next event and any behind it (a worker thread; blocks), or none
    after ``timeout`` seconds."""
    try:
        first = subscription.get(timeout)
    except TimeoutError:
        return []
    return [first, *subscription.drain()]


_ENCODER = EventEncoder()


def _sse(event: BaseEvent) -> bytes:
    """An AG-UI event as the SDK's encoder writes it (camelCase, no nulls,
    ``\n\n`` after it)."""
    return _ENCODER.encode(event).encode()


async def _decode(request: Request) -> RunAgentInput:
    content_type = request.headers.get("content-type", "application/json")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise Problem(415, "send the RunAgentInput as application/json")
    try:
        # The shared parser bounds nesting and names a lone surrogate's field
        # before pydantic sees the value.
        return RunAgentInput.model_validate(parse_json(await request.body()))
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        where = "$" + "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}"
            for part in first["loc"]
        )
        raise Problem(
            422, f"not a RunAgentInput: {first['msg']}", field=where
        ) from None


def _prompt(run_input: RunAgentInput) -> str:
    """The new user message's text: the last message's."""
    last = run_input.messages[-1] if run_input.messages else None
    if not isinstance(last, UserMessage):
        raise Problem(
            422, "the last message must be the user's prompt", field="$.messages"
        )
    if isinstance(last.content, str):
        text = last.content
    else:
        text = "\n".join(
            part.text for part in last.content if isinstance(part, TextPart)
        )
    if not text.strip():
        raise Problem(422, "the prompt is empty", field="$.messages")
    return text


def _message_id(run_input: RunAgentInput) -> str:
    """The prompt's id: the last message's (checked in :func:`_prompt`)."""
    message = run_input.messages[-1]
    try:
        return check_input_id(message.id)
    except InvalidInputError as error:
        index = len(run_input.messages) - 1
        raise Problem(422, str(error), field=f"$.messages[{index}].id") from None


def _from_submission(events: list[Event], submission_id: str) -> list[Event]:
    """The log's events from the first of ``submission_id``'s on."""
    for index, event in enumerate(events):
        if event.submission_id == submission_id:
            return events[index:]
    return []


def _after(batch: list[Any], replayed_to: int | None) -> list[Any]:
    """``batch`` without what a replay from the log already streamed.

    A retried prompt's stream is its durable events: live ones at or
    before the log's last are in it already, and deltas are left out
    (the durable message after them carries the whole text).
    """
    if replayed_to is None:
        return batch
    return [
        item
        for item in batch
        if not isinstance(item, RunEvent)
        or (not item.event.transient and item.event.sequence > replayed_to)
    ]


def _decisions(entries: list[ResumeEntry]) -> dict[str, str]:
    """Each resume entry's decision, by request id (all checked first)."""
    decisions: dict[str, str] = {}
    for index, entry in enumerate(entries):
        field = f"$.resume[{index}]"
        if entry.interrupt_id in decisions:
            raise Problem(422, "an interrupt is answered twice", field=field)
        if entry.status == "cancelled":
            decisions[entry.interrupt_id] = "abort"
            continue
        payload = entry.payload
        decision = payload.get("decision") if isinstance(payload, dict) else payload
        if decision not in _DECISIONS:
            raise Problem(
                422,
                f"payload.decision must be one of {list(_DECISIONS)}",
                field=f"{field}.payload",
            )
        decisions[entry.interrupt_id] = str(decision)
    return decisions


def _state(state: Any) -> dict[str, Any] | None:
    if state is None or state == {}:
        return None
    if not isinstance(state, dict):
        raise Problem(422, "state must be an object", field="$.state")
    return state


__all__ = ["AguiEndpoint", "Scope"]
