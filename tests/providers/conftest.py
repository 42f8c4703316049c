"""Fixtures for the provider tests: the fake server, an event loop, providers."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI
from provider_support import make_provider

T = TypeVar("T")


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A started fake server, stopped after the test."""
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for the test (providers keep their client on it)."""
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.run_until_complete(event_loop.shutdown_asyncgens())
    event_loop.close()


@pytest.fixture
def run(loop: asyncio.AbstractEventLoop) -> Callable[[Awaitable[T]], T]:
    """Runs a coroutine to completion on the test's loop."""

    def run_until_complete(awaitable: Awaitable[T]) -> T:
        return loop.run_until_complete(awaitable)

    return run_until_complete


@pytest.fixture(params=["responses", "chat", "anthropic"])
def dialect(request: pytest.FixtureRequest) -> str:
    """Each API in turn."""
    return str(request.param)


@pytest.fixture
def provider(
    dialect: str, fake: FakeOpenAI, loop: asyncio.AbstractEventLoop
) -> Iterator[Any]:
    """A provider of ``dialect`` pointed at the fake server, closed afterwards."""
    made = make_provider(dialect, fake.base_url)
    yield made
    loop.run_until_complete(made.aclose())
