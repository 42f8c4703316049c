"""Forks, rewinds and the quiet points, as resources of the service.

- ``POST /sessions/{id}/fork``: a new session of the caller's tenant
  whose history is the source's up to a quiet point (``before_input``,
  ``after_turn``, or the latest when neither is given). The fork's owner
  row is written before its first event, as ``POST /sessions`` does, and
  only once the point was found: a refused fork writes nothing.
- ``POST /sessions/{id}/rewind``: sets the turns after a point aside, in
  place; a 409 while a turn runs (interrupt it first).
- ``GET /sessions/{id}/history``: the points a fork or rewind may name.
- ``GET /sessions/{id}/lineage``: where the session came from, the
  tenant's sessions forked from it (as a tree), and what its rewinds set
  aside. ``GET /sessions/{id}`` carries ``forked_from`` and
  ``rewound_turns`` too (they are the checkpoint's).

Only the tenant's own sessions are forked or rewound (any other is the one
404), and a fork belongs to the tenant that made it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from turnlog.domain.errors import InvalidInputError, SessionBusyError, UsageError
from turnlog.domain.ids import check_session_id, new_submission_id
from turnlog.domain.lineage import SessionForked, SessionRewound, check_point_args
from turnlog.hosting.forking import record_fork
from turnlog.service.context import ServiceContext
from turnlog.service.problems import Problem
from turnlog.service.resources import SessionResources, decode_body, json_response
from turnlog.service.tenancy import OwnedSession
from turnlog.store.lineage import scan


class ForkInput(msgspec.Struct, forbid_unknown_fields=True):
    """``POST .../fork``: the point (at most one; none: the latest)."""

    before_input: int | None = None
    after_turn: int | None = None
    session_id: str | None = None
    keep_allowances: bool = False


class RewindInput(msgspec.Struct, forbid_unknown_fields=True):
    """``POST .../rewind``: the point (exactly one)."""

    before_input: int | None = None
    after_turn: int | None = None


def _check_point(before_input: int | None, after_turn: int | None) -> None:
    """A 422 naming the field, before anything is read or written."""
    for name, value in (("before_input", before_input), ("after_turn", after_turn)):
        if value is not None and value < (1 if name == "before_input" else 0):
            least = "1 (inputs are counted from 1)" if name == "before_input" else "0"
            raise Problem(422, f"{name} must be at least {least}", field=f"$.{name}")
    if before_input is not None and after_turn is not None:
        raise Problem(422, "name one point: before_input or after_turn")
    check_point_args(before_input, after_turn)


class LineageResources:
    """The handlers of forks, rewinds and history, beside the resources."""

    def __init__(self, context: ServiceContext, resources: SessionResources) -> None:
        self.context = context
        self.resources = resources

    def routes(self) -> list[Route]:
        """The routes (relative to where the app is mounted)."""
        return [
            Route("/sessions/{session_id}/fork", self.fork, methods=["POST"]),
            Route("/sessions/{session_id}/rewind", self.rewind, methods=["POST"]),
            Route("/sessions/{session_id}/history", self.history, methods=["GET"]),
            Route("/sessions/{session_id}/lineage", self.lineage, methods=["GET"]),
        ]

    async def fork(self, request: Request) -> Response:
        owned = await self.resources._owned(request)
        body = await decode_body(request, ForkInput)
        _check_point(body.before_input, body.after_turn)
        if body.session_id is not None:
            try:
                check_session_id(body.session_id)
            except InvalidInputError as error:
                raise Problem(422, str(error), field="$.session_id") from None
        return json_response(await asyncio.to_thread(self._fork, owned, body), 201)

    def _fork(self, owned: OwnedSession, body: ForkInput) -> dict[str, Any]:
        store = self.context.runtime.store
        source = owned.session_id
        # The point first: a point that is not there writes no owner row.
        scan(store, source).point(
            before_input=body.before_input, after_turn=body.after_turn
        )
        fork_id = body.session_id or f"session-{new_submission_id()[:16]}"
        if store.get_session(fork_id) is not None:
            msg = f"session {fork_id!r} exists already: choose another id"
            raise UsageError(msg)
        claimed = self.context.owners.claim_unless_taken(
            fork_id, owned.tenant, owned.agent
        )
        if claimed.tenant != owned.tenant:
            msg = f"session {fork_id!r} exists already: choose another id"
            raise UsageError(msg)
        record_fork(
            store,
            source,
            before_input=body.before_input,
            after_turn=body.after_turn,
            session_id=fork_id,
            keep_allowances=body.keep_allowances,
        )
        return self.resources._checkpoint(fork_id)

    async def rewind(self, request: Request) -> Response:
        owned = await self.resources._owned(request)
        body = await decode_body(request, RewindInput)
        if body.before_input is None and body.after_turn is None:
            raise Problem(422, "name the point: before_input or after_turn")
        _check_point(body.before_input, body.after_turn)
        session = await self.context.session_async(owned)
        # Not between a prompt and the start of its run.
        async with self.context.prompt_lock(owned.session_id):
            try:
                turns = await asyncio.to_thread(
                    lambda: session.rewind(
                        before_input=body.before_input, after_turn=body.after_turn
                    )
                )
            except SessionBusyError:
                raise Problem(
                    409,
                    f"a turn of {owned.session_id!r} is running: interrupt it "
                    "first (POST .../interrupt), then rewind",
                ) from None
        return json_response({"session_id": owned.session_id, "set_aside": turns})

    async def history(self, request: Request) -> Response:
        session_id = await self.resources._readable(request)
        runtime = self.context.runtime
        points = await asyncio.to_thread(runtime.history, session_id)
        return json_response(
            {"session_id": session_id, "points": msgspec.to_builtins(points)}
        )

    async def lineage(self, request: Request) -> Response:
        session_id = await self.resources._readable(request)
        tenant = self.context.tenant(request)
        return json_response(await asyncio.to_thread(self._lineage, tenant, session_id))

    def _lineage(self, tenant: str, session_id: str) -> dict[str, Any]:
        runtime = self.context.runtime
        checkpoint = runtime.checkpoints.load(session_id, context=False)
        if checkpoint is None:
            raise Problem(404, f"no session {session_id!r}")
        sources: list[dict[str, Any]] = []  # nearest first
        current = checkpoint
        while current.forked_from is not None and len(sources) < 100:
            sources.append(
                {
                    "session_id": current.forked_from["session_id"],
                    "position": current.forked_from["position"],
                    "fork": current.session_id,
                }
            )
            parent = runtime.checkpoints.load(
                current.forked_from["session_id"], context=False
            )
            if parent is None:
                break
            current = parent
        owned = {entry.session_id for entry in self.context.owners.list(tenant)}
        below: dict[str, list[tuple[str, int]]] = {}
        for summary in runtime.summaries.all():
            if summary.forked_from and summary.session_id in owned:
                fork = runtime.checkpoints.load(summary.session_id, context=False)
                where = (
                    -1
                    if fork is None or fork.forked_from is None
                    else fork.forked_from["position"]
                )
                below.setdefault(summary.forked_from, []).append(
                    (summary.session_id, where)
                )

        def tree(parent: str, depth: int) -> list[dict[str, Any]]:
            return [
                {
                    "session_id": child,
                    "position": position,
                    "forks": tree(child, depth + 1) if depth < 50 else [],
                }
                for child, position in sorted(below.get(parent, []), key=_by_point)
            ]

        rewinds = []
        spans: list[list[int]] = []  # positions strictly between, set aside
        for item in runtime.transcript.all(session_id):
            if item.name == "SessionForked":  # what its source had set aside
                forked = item.event()
                assert isinstance(forked, SessionForked)
                spans.extend(list(span) for span in forked.set_aside_positions)
            if item.name == "SessionRewound":
                event = item.event()
                assert isinstance(event, SessionRewound)
                rewinds.append(
                    {
                        "position": item.position,
                        "to_turn": event.to_turn,
                        "set_aside": list(event.rewound_turns),
                        # the events set aside: after ``after``, up to ``until``
                        "after": event.point_position,
                        "until": event.last_position,
                    }
                )
                spans.append([event.point_position, event.last_position + 1])
        return {
            "session_id": session_id,
            "forked_from": checkpoint.forked_from,
            "sources": sources,
            "forks": tree(session_id, 0),
            "rewound_turns": checkpoint.rewound_turns,
            "rewinds": rewinds,
            # a fork's history holds its source's rewinds too: each span once
            "set_aside_positions": [
                span for i, span in enumerate(spans) if span not in spans[:i]
            ],
        }


def _by_point(fork: tuple[str, int]) -> tuple[int, str]:
    return fork[1], fork[0]


__all__ = ["ForkInput", "LineageResources", "RewindInput"]
