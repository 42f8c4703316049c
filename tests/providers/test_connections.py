"""Connections: reused between calls, closed on cancellation, one client
per loop, closable from another thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply, Trickle
from provider_support import make_provider, model_request

from turnlog.domain.errors import UsageError


async def cancelled_mid_stream(provider: Any) -> asyncio.Task[Any]:
    """Starts a call, cancels it once it streams; returns its task to await."""
    streaming = asyncio.Event()
    task = asyncio.create_task(
        provider.respond(model_request(), lambda _: streaming.set())
    )
    await streaming.wait()
    task.cancel()
    return task


def test_successive_calls_reuse_one_connection(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(
        Reply(text="one", chunks=3), Reply(text="two", chunks=3), Reply(text="3")
    )

    async def three_calls() -> None:
        for _ in range(3):
            await provider.respond(model_request())

    run(three_calls())
    assert len({request.client_port for request in fake.requests}) == 1


def test_cancelling_a_streaming_call_closes_the_stream(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Trickle(interval=0.005))

    async def cancel_mid_stream() -> None:
        task = await cancelled_mid_stream(provider)
        with pytest.raises(asyncio.CancelledError):
            await task

    run(cancel_mid_stream())
    assert fake.client_gone.wait(10)  # the server saw the connection closed


def test_a_call_after_a_cancelled_one_works(
    fake: FakeOpenAI, provider: Any, run: Any
) -> None:
    fake.script(Trickle(interval=0.005), Reply(text="fresh"))

    async def cancel_then_call() -> Any:
        task = await cancelled_mid_stream(provider)
        with pytest.raises(asyncio.CancelledError):
            await task
        return await provider.respond(model_request())

    response = run(cancel_then_call())
    assert response.output[0]["content"] == "fresh"


def test_a_provider_used_from_a_new_loop_gets_a_new_client(
    fake: FakeOpenAI, dialect: str
) -> None:
    provider = make_provider(dialect, fake.base_url)
    fake.script(Reply(text="a"), Reply(text="b"))
    for _ in range(2):
        loop = asyncio.new_event_loop()
        try:
            response = loop.run_until_complete(provider.respond(model_request()))
            loop.run_until_complete(provider.aclose())
        finally:
            loop.close()
        assert response.output
    assert len(fake.requests) == 2


def test_close_from_another_thread_closes_the_client_on_its_loop(
    fake: FakeOpenAI, dialect: str
) -> None:
    """What an owner of a Runtime does: the provider runs on the runtime's loop."""
    provider = make_provider(dialect, fake.base_url)
    fake.script(Reply(text="hi"), Reply(text="again"))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        future = asyncio.run_coroutine_threadsafe(
            provider.respond(model_request()), loop
        )
        assert future.result(timeout=10).output
        provider.close()
        with pytest.raises(UsageError):  # close() on the loop itself would block it
            asyncio.run_coroutine_threadsafe(_close_inside(provider), loop).result(10)
        provider.close()
        provider.close()  # nothing left to close: a no-op
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    assert len({request.client_port for request in fake.requests}) == 2


async def _close_inside(provider: Any) -> None:
    await provider.respond(model_request())
    provider.close()
