"""The JSON resources: sessions, prompts, input, approvals, transcript, audit.

Each handler authenticates first, then finds the tenant's session (a 404
for anyone else's), then decodes and checks its body completely before it
calls turnlog, so a refused request records nothing. Calls that may block
(a session's actor, the database) run on worker threads, never on the
event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import datetime
from typing import Any, Literal, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from turnlog.domain.chain import SEQ_FIELD
from turnlog.domain.errors import (
    InputConflictError,
    SessionBusyError,
    UsageError,
)
from turnlog.domain.run import RunResult
from turnlog.projections.anchors import expected_heads
from turnlog.projections.readers import TranscriptItem
from turnlog.service.context import ServiceContext, unknown_session
from turnlog.service.listing import session_entries
from turnlog.service.parsing import decode_json, path_session_id, query_integer
from turnlog.service.problems import Problem
from turnlog.service.retries import idempotency_key, replayed_prompt, running
from turnlog.service.run_start import next_run_started
from turnlog.service.tenancy import OwnedSession
from turnlog.store.verify import verify_session

logger = logging.getLogger(__name__)

T = TypeVar("T")

START_TIMEOUT = 30.0
"""Seconds a prompt waits for its run to start before answering 202."""

DEFAULT_PAGE = 100
"""Batches a transcript page has without ``limit``."""

MAX_PAGE = 1000
"""Batches a transcript page has at most (a larger ``limit`` reads as this)."""

_ENVELOPE = frozenset(
    {"originator_id", "originator_version", "timestamp", "session_id"}
)


class CreateSession(msgspec.Struct, forbid_unknown_fields=True):
    """``POST /sessions``."""

    agent: str | None = None
    shared_state: dict[str, Any] | None = None


class TextInput(msgspec.Struct, forbid_unknown_fields=True):
    """``POST .../prompts``, ``.../follow-ups``, ``.../steer``."""

    text: str


class InterruptInput(msgspec.Struct, forbid_unknown_fields=True):
    """``POST .../interrupt``."""

    clear_queue: bool = False


class DecisionInput(msgspec.Struct, forbid_unknown_fields=True):
    """``POST .../approvals/{request_id}``."""

    decision: Literal["allow", "allow_session", "deny", "abort"]


def json_response(value: Any, status: int = 200) -> Response:
    """``value`` as a JSON response (msgspec encodes structs and dates)."""
    return Response(
        msgspec.json.encode(value), status_code=status, media_type="application/json"
    )


async def decode_body(request: Request, kind: type[T]) -> T:
    """The request's JSON body as ``kind``, or a 400/415/422 problem.

    An empty body is ``{}``; see :mod:`turnlog.service.parsing` for what
    a body may hold.
    """
    content_type = request.headers.get("content-type", "application/json")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise Problem(415, "send the body as application/json")
    return decode_json(await request.body() or b"{}", kind)


def record(item: TranscriptItem) -> dict[str, Any]:
    """A stored event as JSON: log position, session sequence, time, name, fields."""
    event = item.event()
    seq = getattr(event, SEQ_FIELD, None)
    timestamp = getattr(event, "timestamp", None)
    fields = (
        {field.name: getattr(event, field.name) for field in dataclasses.fields(event)}
        if dataclasses.is_dataclass(event)
        else {}
    )
    return {
        "position": item.position,
        "sequence": seq if isinstance(seq, int) else None,
        "time": timestamp.isoformat() if isinstance(timestamp, datetime) else None,
        "event": item.name,
        "data": {
            key: value
            for key, value in fields.items()
            if key not in _ENVELOPE and not key.startswith("_") and key != SEQ_FIELD
        },
    }


class SessionResources:
    """The handlers, over one :class:`ServiceContext`."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def routes(self) -> list[Route]:
        """The resources' routes (relative to where the app is mounted)."""
        return [
            Route("/sessions", self.list_sessions, methods=["GET"]),
            Route("/sessions", self.create_session, methods=["POST"]),
            Route("/sessions/{session_id}", self.read_session, methods=["GET"]),
            Route("/sessions/{session_id}/prompts", self.prompt, methods=["POST"]),
            Route(
                "/sessions/{session_id}/follow-ups", self.follow_up, methods=["POST"]
            ),
            Route("/sessions/{session_id}/steer", self.steer, methods=["POST"]),
            Route("/sessions/{session_id}/interrupt", self.interrupt, methods=["POST"]),
            Route("/sessions/{session_id}/approvals", self.approvals, methods=["GET"]),
            Route(
                "/sessions/{session_id}/approvals/{request_id}",
                self.decide,
                methods=["POST"],
            ),
            Route(
                "/sessions/{session_id}/transcript", self.transcript, methods=["GET"]
            ),
            Route("/sessions/{session_id}/audit", self.audit, methods=["GET"]),
            Route("/sessions/{session_id}/children", self.children, methods=["GET"]),
        ]

    async def _owned(self, request: Request) -> OwnedSession:
        tenant = self.context.tenant(request)
        session_id = path_session_id(request.path_params["session_id"])
        return await self.context.owned_async(tenant, session_id)

    async def _readable(self, request: Request) -> str:
        """The id of a session the tenant may read: one of its own, or a
        child session (an agent its tool calls ran) under one of its own.
        A child is read here, never driven: its input is its parent's."""
        tenant = self.context.tenant(request)
        session_id = path_session_id(request.path_params["session_id"])
        if self.context.owners.known(tenant, session_id) is not None:
            return session_id
        return await asyncio.to_thread(self._readable_by, tenant, session_id)

    def _readable_by(self, tenant: str, session_id: str) -> str:
        if self.context.owners.get(tenant, session_id) is not None:
            return session_id
        stored = self.context.runtime.store.get_session(session_id)
        root = "" if stored is None else stored.root_session
        if root and self.context.owners.get(tenant, root) is not None:
            return session_id
        raise unknown_session(session_id)

    async def list_sessions(self, request: Request) -> Response:
        tenant = self.context.tenant(request)
        runtime, owners = self.context.runtime, self.context.owners
        entries = await asyncio.to_thread(
            lambda: session_entries(runtime, owners.list(tenant))
        )
        return json_response({"sessions": entries})

    async def create_session(self, request: Request) -> Response:
        tenant = self.context.tenant(request)
        body = await decode_body(request, CreateSession)
        name = body.agent or self.context.default_agent
        if name is None:
            raise Problem(422, "name the agent", field="$.agent")
        self.context.agent(name)  # an unknown agent is refused before anything

        def create() -> dict[str, Any]:  # one worker thread for both steps
            owned, _ = self.context.create(tenant, name, body.shared_state)
            return self._checkpoint(owned.session_id)

        return json_response(await asyncio.to_thread(create), 201)

    def _checkpoint(self, session_id: str) -> dict[str, Any]:
        checkpoint = self.context.runtime.checkpoints.load(session_id)
        if checkpoint is None:
            raise Problem(404, f"no session {session_id!r}")
        fields = msgspec.to_builtins(checkpoint)
        del fields["context"], fields["conversation"]
        fields["messages"] = msgspec.to_builtins(checkpoint.messages())
        return dict(fields)

    async def read_session(self, request: Request) -> Response:
        session_id = await self._readable(request)
        return json_response(await asyncio.to_thread(self._checkpoint, session_id))

    async def prompt(self, request: Request) -> Response:
        owned = await self._owned(request)
        body = await decode_body(request, TextInput)
        wait = request.query_params.get("wait", "false").lower()
        if wait not in ("true", "false", "1", "0"):
            raise Problem(422, "wait must be true or false", field="wait")
        key = idempotency_key(request)
        if wait in ("true", "1"):
            # No run id to report early: the run's own result says it all,
            # and a busy session refuses it (SessionBusyError, a 409). A
            # retried key answers the original run's result. A client that
            # goes away leaves its run going (detach_on_cancel).
            session = await self.context.session_async(owned)
            result = await session.prompt_async(
                body.text, input_id=key, detach_on_cancel=True
            )
            return json_response(_run_json(result))
        session = await self.context.session_async(owned)
        # One prompt at a time from here: its run is the next.
        async with self.context.prompt_lock(owned.session_id):
            replay = None
            if key is not None:
                replay = await replayed_prompt(session, key, body.text)
            if replay is not None:  # a retry: answered as the original was
                original, goes_on = replay
                if goes_on:
                    return json_response(running(owned.session_id, original), 202)
                result = await session.prompt_async(
                    body.text, input_id=key, detach_on_cancel=True
                )
                return json_response(_run_json(result))
            if await asyncio.to_thread(session.running):
                raise SessionBusyError(f"session {owned.session_id!r} is running")
            subscription = await asyncio.to_thread(session.subscribe)
            try:
                run = asyncio.ensure_future(  # it outlives the request
                    session.prompt_async(body.text, input_id=key, detach_on_cancel=True)
                )
                started = asyncio.ensure_future(
                    next_run_started(subscription, START_TIMEOUT)
                )
                await asyncio.wait(
                    {run, started},
                    timeout=START_TIMEOUT,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                subscription.close()
            if run.done():
                result = run.result()  # raises what refused the prompt
                return json_response(_run_json(result))
        submission = started.result() if started.done() else None
        self.context.running_tasks.add(run)
        run.add_done_callback(_forget_run(self.context))
        return json_response(running(owned.session_id, submission), 202)

    async def follow_up(self, request: Request) -> Response:
        owned = await self._owned(request)
        body = await decode_body(request, TextInput)
        key = idempotency_key(request)
        session = await self.context.session_async(owned)
        submission = await asyncio.to_thread(
            lambda: session.follow_up(body.text, input_id=key)
        )
        return json_response({"submission_id": submission}, 202)

    async def steer(self, request: Request) -> Response:
        owned = await self._owned(request)
        body = await decode_body(request, TextInput)
        key = idempotency_key(request)
        session = await self.context.session_async(owned)
        submission = await asyncio.to_thread(
            lambda: session.steer(body.text, input_id=key)
        )
        return json_response({"submission_id": submission}, 202)

    async def interrupt(self, request: Request) -> Response:
        owned = await self._owned(request)
        body = await decode_body(request, InterruptInput)
        session = await self.context.session_async(owned)
        await asyncio.to_thread(lambda: session.interrupt(clear_queue=body.clear_queue))
        return json_response({"interrupted": True}, 202)

    async def approvals(self, request: Request) -> Response:
        owned = await self._owned(request)
        return json_response(
            {"approvals": await asyncio.to_thread(self._pending, owned.session_id)}
        )

    def _pending(self, session_id: str) -> list[dict[str, Any]]:
        live = self.context.live(session_id)
        if live is not None:
            return [
                {
                    "request_id": r.request_id,
                    "call_id": r.call_id,
                    "tool_name": r.tool_name,
                    "arguments": r.arguments,
                    "turn_id": r.turn_id,
                    "session_id": r.session_id,  # a child's names the child
                }
                for r in live.pending_approvals()
            ]
        checkpoint = self.context.runtime.checkpoints.load(session_id, context=False)
        pending = None if checkpoint is None else checkpoint.pending_approval
        if pending is None:
            return []
        return [
            {
                "request_id": pending["request_id"],
                "call_id": pending["call_id"],
                "tool_name": pending["name"],
                "arguments": pending["arguments"],
                "turn_id": pending["turn_id"],
            }
        ]

    async def children(self, request: Request) -> Response:
        session_id = await self._readable(request)
        return json_response(await asyncio.to_thread(self._children, session_id))

    def _children(self, session_id: str) -> dict[str, Any]:
        """The session's child sessions (agents its tool calls ran), each
        with its own children, and the tree's usage summed by agent."""
        runtime = self.context.runtime

        def tree(parent: str) -> list[dict[str, Any]]:
            out = []
            for child in runtime.children(parent):
                stored = runtime.store.get_session(child.session_id)
                out.append(
                    {
                        "session_id": child.session_id,
                        "agent": child.agent,
                        "parent_call": child.parent_call,
                        "started": stored is not None,
                        "running": stored is not None and stored.running,
                        "turn_count": 0 if stored is None else stored.turn_count,
                        "usage": {} if stored is None else stored.usage_totals,
                        "children": tree(child.session_id),
                    }
                )
            return out

        return {
            "children": tree(session_id),
            "usage_by_agent": runtime.usage_by_agent(session_id),
        }

    async def decide(self, request: Request) -> Response:
        owned = await self._owned(request)
        body = await decode_body(request, DecisionInput)
        request_id = request.path_params["request_id"]
        key = idempotency_key(request)
        session = await self.context.session_async(owned)

        def decide() -> None:
            # A decided request answered again with its decision is a retry:
            # answered as the first time; with another, a 409 conflict.
            try:
                session.approve(request_id, body.decision, input_id=key)
            except InputConflictError:
                raise
            except UsageError as error:
                if type(error) is UsageError:  # neither pending nor decided
                    raise Problem(404, f"no pending approval {request_id!r}") from None
                raise

        await asyncio.to_thread(decide)
        return json_response({"request_id": request_id, "decision": body.decision})

    async def transcript(self, request: Request) -> Response:
        session_id = await self._readable(request)
        query = request.query_params
        before = query_integer(query.get("before"), "before")
        limit = query_integer(query.get("limit"), "limit") or DEFAULT_PAGE
        page = await asyncio.to_thread(
            self.context.runtime.transcript.page,
            session_id,
            before_position=before,
            max_batches=min(limit, MAX_PAGE),
        )
        return json_response(
            {
                "items": [record(item) for item in page.items],
                "has_more": page.has_more,
                "next_before": page.next_before,
            }
        )

    async def audit(self, request: Request) -> Response:
        session_id = await self._readable(request)
        return json_response(await asyncio.to_thread(self._audit, session_id))

    def _audit(self, session_id: str) -> dict[str, Any]:
        runtime = self.context.runtime
        items = runtime.transcript.all(session_id)
        if not items:
            raise Problem(404, f"no session {session_id!r}")
        store = runtime.store
        report = verify_session(store, session_id, expected_heads(store, session_id))
        return {
            "session_id": session_id,
            "timeline": [record(item) for item in items],
            "verification": {
                "ok": report.ok,
                "events": report.events,
                "problem": None
                if report.problem is None
                else msgspec.to_builtins(report.problem),
                "head": None
                if report.head is None
                else msgspec.to_builtins(report.head),
            },
        }


def _run_json(result: RunResult) -> dict[str, Any]:
    # as_json: the typed answer is an object of the user's, never encoded;
    # ``output`` is the answer as recorded.
    return result.as_json()


def _forget_run(context: ServiceContext) -> Any:
    def forget(task: asyncio.Task[object]) -> None:
        context.running_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("run failed: %s", task.exception())

    return forget


__all__ = ["SessionResources", "decode_body", "json_response", "record"]
