"""``turnlog serve``: the service on uvicorn, over a runtime it opens.

The agents come from user code (``--agent module:attribute``, an Agent or
a function returning one), from the settings ``turnlog run`` reads, or
the offline demo agent (``--demo``). Tokens come from ``--tokens FILE``
or ``TURNLOG_SERVICE_TOKENS``; with neither, one token is made for the
tenant ``default`` and printed once, so a fresh machine can try it.
"""

from __future__ import annotations

import importlib
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

from turnlog.agent import Agent
from turnlog.collector import SERVICE_YOUNG_GENERATION, prepare_collector
from turnlog.domain.errors import InvalidInputError
from turnlog.runtime import Runtime
from turnlog.service.app import create_app
from turnlog.service.auth import TOKENS_ENV, ServiceTokens
from turnlog.service.context import AgentSource
from turnlog.service.limits import MAX_BODY, ConnectionLimits
from turnlog.service.malloc_arenas import limit_malloc_arenas

DEFAULT_TENANT = "default"


def load_agent(spec: str) -> tuple[str, AgentSource]:
    """The agent ``module:attribute`` names, and its name.

    The attribute is an Agent, or a function of no arguments returning
    one (called once here to learn the name, then once per session).
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        msg = f"--agent takes module:attribute, not {spec!r}"
        raise InvalidInputError(msg)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        msg = f"--agent {spec}: cannot import {module_name!r}: {error}"
        raise InvalidInputError(msg) from None
    value = getattr(module, attribute, None)
    if isinstance(value, Agent):
        return value.name, value
    if callable(value):
        made = value()
        if isinstance(made, Agent):
            factory: Callable[[], Agent] = value
            return made.name, factory
    msg = f"--agent {spec}: not a turnlog.Agent, nor a function returning one"
    raise InvalidInputError(msg)


def load_tokens(path: Path | None) -> tuple[ServiceTokens, str | None]:
    """The tokens from ``path`` or the environment; else a new one (returned)."""
    if path is not None:
        return ServiceTokens.from_file(path), None
    tokens = ServiceTokens.from_environment()
    if tokens is not None:
        return tokens, None
    token = secrets.token_urlsafe(32)
    return ServiceTokens([(DEFAULT_TENANT, token)]), token


def serve(
    store: str | None,
    agents: dict[str, AgentSource],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens_file: Path | None = None,
    cors_origins: tuple[str, ...] = (),
    max_body: int = MAX_BODY,
    heartbeat: float = 15.0,
    limits: ConnectionLimits | None = None,
    young_generation: int = SERVICE_YOUNG_GENERATION,
) -> None:
    """Serves ``agents`` over the log at ``store`` until stopped.

    Each connection is held to ``limits`` (the defaults of
    :class:`ConnectionLimits` if None) before the app sees a request. The
    garbage collector's first threshold is raised to ``young_generation``
    (0: left as Python has it) when serving begins (turnlog.collector).
    """
    # uvicorn is the optional extra, needed only to serve.
    import uvicorn  # noqa: PLC0415

    from turnlog.service.http_protocol import protocol_with  # noqa: PLC0415

    limit_malloc_arenas()
    tokens, made = load_tokens(tokens_file)
    with Runtime.open(store) as runtime:
        app = create_app(
            runtime,
            agents,
            tokens,
            cors_origins=cors_origins,
            max_body=max_body,
            heartbeat=heartbeat,
        )
        if made is not None:
            print(
                f"turnlog serve: no tokens configured ({TOKENS_ENV} or --tokens); "
                f"tenant {DEFAULT_TENANT!r} has this token for this run:\n"
                f"  Authorization: Bearer {made}",
                file=sys.stderr,
                flush=True,
            )
        print(
            f"turnlog serve: {_agent_list(agents)} on http://{host}:{port} "
            f"(log: {runtime.location})",
            file=sys.stderr,
            flush=True,
        )
        limits = limits or ConnectionLimits()
        # Everything is imported and set up: what exists now lives as long
        # as the process, and no full collection need walk it again; and
        # the young generation is widened (turnlog.collector says why).
        prepare_collector(young_generation)
        uvicorn.run(
            app,
            host=host,
            port=port,
            http=protocol_with(limits),
            timeout_keep_alive=limits.keep_alive_timeout,
            limit_concurrency=limits.max_connections,
            log_level="warning",
            access_log=False,
        )


def _agent_list(agents: dict[str, AgentSource]) -> str:
    """``agent demo`` or ``agents a, b``: the served agents' names, for people."""
    names = sorted(agents)
    return ("agent " if len(names) == 1 else "agents ") + ", ".join(names)


__all__ = ["DEFAULT_TENANT", "load_agent", "load_tokens", "serve"]
