"""``turnlog serve``: the HTTP service (see turnlog.service) on uvicorn."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from turnlog.cli.exits import EXIT_OK
from turnlog.cli.log_location import store_url
from turnlog.cli.run.command import RunOptions, build_agent
from turnlog.cli.run.settings import build_router, load_settings
from turnlog.domain.errors import UsageError


def command_serve(args: argparse.Namespace) -> int:
    """Runs ``turnlog serve`` until stopped."""
    try:
        # The service is an optional extra: the rest of the command line
        # must work without it.
        from turnlog.service.context import AgentSource  # noqa: PLC0415
        from turnlog.service.demo import DEMO_AGENT, demo_agent  # noqa: PLC0415
        from turnlog.service.limits import ConnectionLimits  # noqa: PLC0415
        from turnlog.service.serving import load_agent, serve  # noqa: PLC0415
    except ImportError as error:
        msg = (
            'turnlog serve needs the service extra: pip install "turnlog[service]" '
            f"({error})"
        )
        raise UsageError(msg) from None
    agents: dict[str, AgentSource] = {}
    if args.demo:
        agents[DEMO_AGENT] = demo_agent
    for spec in args.agent:
        name, source = load_agent(spec)
        agents[name] = source
    if not agents:
        router = build_router(load_settings(config=args.config))
        agent = build_agent(
            router, RunOptions(store=store_url(args), workspace=Path.cwd())
        )
        agents[agent.name] = agent
    if not 0 < args.port < 65536:
        msg = f"--port must be 1-65535, not {args.port}"
        raise UsageError(msg)
    if args.young_generation < 0:
        msg = f"--young-generation must be 0 or more, not {args.young_generation}"
        raise UsageError(msg)
    serve(
        store_url(args),
        agents,
        host=args.host,
        port=args.port,
        tokens_file=args.tokens,
        cors_origins=tuple(args.cors_origin),
        heartbeat=args.heartbeat,
        limits=ConnectionLimits(**_given_limits(args)),
        young_generation=args.young_generation,
    )
    return EXIT_OK


def _given_limits(args: argparse.Namespace) -> dict[str, Any]:
    """The connection limits given as options (the others keep their defaults)."""
    names = (
        "header_timeout",
        "keep_alive_timeout",
        "max_header_bytes",
        "max_headers",
        "max_connections",
    )
    return {
        name: getattr(args, name) for name in names if getattr(args, name) is not None
    }
