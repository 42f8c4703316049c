"""Every provider takes an httpx transport: requests go through it, not the
network (as httpx's own ``transport=`` seam)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from fake_openai_wire import Reply, render_events
from provider_support import API_KEY, model_request

from turnlog.providers import (
    HttpModelProvider,
    OpenAIChatCompletionsProvider,
    OpenAIResponsesProvider,
)

DIALECTS = {
    "responses": (OpenAIResponsesProvider, "/v1/responses"),
    "chat": (OpenAIChatCompletionsProvider, "/v1/chat/completions"),
}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_provider_sends_its_requests_through_the_given_transport(
    dialect: str,
) -> None:
    kind, path = DIALECTS[dialect]
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content)
        events = render_events(Reply(text="via the transport"), dialect, "m", True)
        assert body["model"] == "m"
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=b"".join(events),
        )

    provider: HttpModelProvider = kind(
        "m",
        api_key=API_KEY,
        base_url="http://api.invalid/v1",  # never resolved: the transport answers
        transport=httpx.MockTransport(answer),
    )

    async def call() -> list[str]:
        deltas: list[str] = []
        try:
            response = await provider.respond(model_request(), deltas.append)
        finally:
            await provider.aclose()
        assert response.output[-1]["content"] == "via the transport"
        return deltas

    deltas = asyncio.run(call())
    assert "".join(deltas) == "via the transport"
    assert [request.url.path for request in seen] == [path]
    assert seen[0].headers["authorization"] == f"Bearer {API_KEY}"
