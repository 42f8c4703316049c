"""Read-only overviews for a person: the agents served, and how each turn
and model step of a session went (tokens and time), for the console's
chart.

``GET /agents`` names the agents a client may start a session with (and
the default one), so a client can offer a choice rather than guess.
``GET /sessions/{id}/executions`` gives the newest turns of the
executions view, each with its model steps (when each started and ended,
the tokens it reported), read from the session's own step events.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from turnlog.domain.ids import turn_uuid
from turnlog.domain.turn_events import (
    ModelStepCompleted,
    ModelStepFailed,
    ModelStepStarted,
)
from turnlog.projections.executions import Execution
from turnlog.projections.readers import TranscriptItem
from turnlog.service.context import ServiceContext
from turnlog.service.parsing import path_session_id, query_integer
from turnlog.service.resources import json_response

TURNS_DEFAULT = 20
"""Turns ``GET .../executions`` gives when no ``limit`` is asked."""
TURNS_MAX = 200
"""The most turns one ``GET .../executions`` gives."""

_STEP_EVENTS = frozenset({"ModelStepStarted", "ModelStepCompleted", "ModelStepFailed"})
"""The transcript's step events, by name: only these are decoded."""


def _limit(request: Request) -> int:
    """``?limit=``, ASCII digits from 1 to ``TURNS_MAX``, or a 422."""
    # query_integer bounds the digits before int(), which refuses over
    # 4,300 of them with a ValueError (a 500 here before).
    limit = query_integer(request.query_params.get("limit"), "limit", maximum=TURNS_MAX)
    return TURNS_DEFAULT if limit is None else limit


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 6)


def _steps(
    session_id: str, turns: list[Execution], items: list[TranscriptItem]
) -> dict[int, list[dict[str, Any]]]:
    """Each turn's model steps (by turn number), from its step events."""
    numbers = {str(turn_uuid(session_id, turn.number)): turn.number for turn in turns}
    steps: dict[tuple[int, int], dict[str, Any]] = {}
    started: dict[tuple[int, int], datetime] = {}
    for item in items:
        number = numbers.get(item.originator_id)
        if number is None or item.name not in _STEP_EVENTS:
            continue
        event = item.event()
        if not isinstance(
            event, ModelStepStarted | ModelStepCompleted | ModelStepFailed
        ):
            continue  # read from _STEP_EVENTS' names: this tells the type checker
        key = (number, event.step)
        step = steps.setdefault(
            key,
            {
                "step": event.step,
                "outcome": "running",
                "usage": {},
                "started_at": None,
                "ended_at": None,
                "seconds": None,
            },
        )
        if isinstance(event, ModelStepStarted):
            started[key] = event.timestamp
            step["started_at"] = _iso(event.timestamp)
            continue
        completed = isinstance(event, ModelStepCompleted)
        step["outcome"] = "completed" if completed else "failed"
        step["ended_at"] = _iso(event.timestamp)
        step["seconds"] = _seconds(started.get(key), event.timestamp)
        if isinstance(event, ModelStepCompleted) and event.usage:
            step["usage"] = dict(event.usage)
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for (number, _), step in sorted(steps.items()):
        by_turn.setdefault(number, []).append(step)
    return by_turn


def executions_report(
    context: ServiceContext, session_id: str, limit: int
) -> dict[str, Any]:
    """The newest ``limit`` turns of a session, oldest first, with their steps.

    Blocking (it reads the views): call it off the event loop.
    """
    runtime = context.runtime
    page = runtime.executions.page(session_id, limit=limit)
    turns = page.executions
    items = (
        runtime.transcript.all(session_id, from_position=turns[0].position)
        if turns
        else []
    )
    steps = _steps(session_id, turns, items)
    return {
        "session_id": session_id,
        "has_more": page.has_more,
        "turns": [
            {
                "turn_id": turn.turn_id,
                "number": turn.number,
                "outcome": turn.outcome,
                "reason": turn.reason,
                "model_calls": turn.model_calls,
                "tool_calls": turn.tool_calls,
                "usage": turn.usage,
                "started_at": _iso(turn.started_at),
                "ended_at": _iso(turn.ended_at),
                "seconds": _seconds(turn.started_at, turn.ended_at),
                "steps": steps.get(turn.number, []),
                **_answer(turn),
            }
            for turn in turns
        ],
    }


def _answer(turn: Execution) -> dict[str, Any]:
    """``output``: the turn's validated answer, only where it has one."""
    return {} if turn.output is msgspec.UNSET else {"output": turn.output}


class Overview:
    """The overview routes, over one :class:`ServiceContext`."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def routes(self) -> list[Route]:
        """``GET /agents`` and ``GET /sessions/{id}/executions``."""
        return [
            Route("/agents", self.agents, methods=["GET"]),
            Route(
                "/sessions/{session_id}/executions", self.executions, methods=["GET"]
            ),
        ]

    async def agents(self, request: Request) -> Response:
        self.context.tenant(request)
        return json_response(
            {
                "agents": sorted(self.context.agents),
                "default": self.context.default_agent,
            }
        )

    async def executions(self, request: Request) -> Response:
        tenant = self.context.tenant(request)
        owned = await self.context.owned_async(
            tenant, path_session_id(request.path_params["session_id"])
        )
        limit = _limit(request)
        report = await asyncio.to_thread(
            executions_report, self.context, owned.session_id, limit
        )
        return json_response(report)


__all__ = ["TURNS_DEFAULT", "TURNS_MAX", "Overview", "executions_report"]
