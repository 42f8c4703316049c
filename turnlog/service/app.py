"""``create_app``: the service as one ASGI app, mountable anywhere.

Each face is its own set of routes over one shared
:class:`~turnlog.service.context.ServiceContext` (kept in
``app.state.turnlog``): the JSON resources
(:mod:`turnlog.service.resources`), the event stream
(:mod:`turnlog.service.stream`), AG-UI (:mod:`turnlog.service.agui`) and
the web console (:mod:`turnlog.service.console`); a new face adds its
routes beside them.
The app never needs its lifespan to run (Starlette does not run a mounted
app's lifespan): what must be bound to the event loop is made on the first
request. Its lifespan, when it runs, or ``app.state.turnlog.close()``,
stops the streams; the runtime stays the caller's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from turnlog.domain.errors import TurnlogError
from turnlog.runtime import Runtime
from turnlog.service.agui import AguiEndpoint
from turnlog.service.auth import ServiceTokens
from turnlog.service.console import Console
from turnlog.service.context import AgentSource, ServiceContext
from turnlog.service.limits import MAX_BODY, BodyLimit
from turnlog.service.lineage import LineageResources
from turnlog.service.log_tail import CommitSignal
from turnlog.service.openapi import openapi_document
from turnlog.service.overview import Overview
from turnlog.service.problems import Problem, handle_error
from turnlog.service.resources import SessionResources, json_response
from turnlog.service.stream import EventStream

OPENAPI_PATH = "/openapi.json"
"""Where the OpenAPI document is served (relative to the app's mount)."""


def create_app(
    runtime: Runtime,
    agents: Mapping[str, AgentSource],
    tokens: ServiceTokens,
    *,
    default_agent: str | None = None,
    cors_origins: Sequence[str] = (),
    max_body: int = MAX_BODY,
    heartbeat: float = 15.0,
    signal: CommitSignal | None = None,
) -> Starlette:
    """The turnlog service over ``runtime``, as a Starlette (ASGI) app.

    Args:
        runtime: the runtime to serve (the caller opens and closes it).
        agents: the agents clients may start sessions with, by name; a
            value may be a function that makes a new agent per session.
        tokens: the tenants' bearer tokens.
        default_agent: the agent of ``POST /sessions`` without ``agent``.
        cors_origins: origins allowed by CORS; none (CORS off) by default.
        max_body: bytes a request body may have.
        heartbeat: seconds between keep-alive comments on idle streams.
        signal: when streams look at the log again (see
            :mod:`turnlog.service.log_tail`).
    """
    context = ServiceContext(
        runtime,
        agents,
        tokens,
        default_agent=default_agent,
        heartbeat=heartbeat,
        signal=signal,
    )

    async def openapi(_: Request) -> Response:
        return json_response(openapi_document())

    async def health(_: Request) -> Response:
        return json_response({"ok": True})

    resources = SessionResources(context)
    routes: list[BaseRoute] = [
        Route(OPENAPI_PATH, openapi, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        *resources.routes(),
        *LineageResources(context, resources).routes(),
        *EventStream(context).routes(),
        *AguiEndpoint(context).routes(),
        *Overview(context).routes(),
        *Console().routes(),
    ]
    middleware = [Middleware(BodyLimit, max_body=max_body)]
    if cors_origins:
        middleware.insert(
            0,
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=[
                    "Authorization",
                    "Content-Type",
                    "Idempotency-Key",
                    "Last-Event-ID",
                ],
            ),
        )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        context.bind_loop()
        try:
            yield
        finally:
            context.close()

    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            # turnlog's own errors are answers (404, 409, 422...), not
            # crashes: handled here, they are not logged as server errors.
            Problem: handle_error,
            TurnlogError: handle_error,
            HTTPException: _http_problem,
            Exception: handle_error,
        },
        lifespan=lifespan,
    )
    app.state.turnlog = context
    return app


async def _http_problem(_: Request, error: Exception) -> Response:
    """Starlette's own refusals (no such route, method) as problem+json."""
    assert isinstance(error, HTTPException)
    return Problem(error.status_code, str(error.detail)).response()


__all__ = ["OPENAPI_PATH", "create_app"]
