"""turnlog as a service: an ASGI app over a Runtime, and ``turnlog serve``.

``create_app(runtime, agents, tokens)`` gives a Starlette app with the
JSON resources (sessions, prompts, input, approvals, transcript, audit),
an OpenAPI document at ``/openapi.json``, and each session's event stream
over SSE at ``/sessions/{id}/events``, resumable with ``Last-Event-ID``
from the log in any process; AG-UI clients drive sessions at ``/agui``,
and a web console is served at ``/``. Needs the ``service`` extra
(``pip install "turnlog[service]"``).
"""

from turnlog.service.app import create_app
from turnlog.service.auth import ServiceTokens, token_digest
from turnlog.service.context import ServiceContext
from turnlog.service.demo import demo_agent
from turnlog.service.feed import StreamEntry, parse_event_id
from turnlog.service.log_tail import CommitSignal, LocalCommitSignal
from turnlog.service.problems import Problem

__all__ = [
    "CommitSignal",
    "LocalCommitSignal",
    "Problem",
    "ServiceContext",
    "ServiceTokens",
    "StreamEntry",
    "create_app",
    "demo_agent",
    "parse_event_id",
    "token_digest",
]
