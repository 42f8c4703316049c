"""Shared helpers of the provider tests (imported by conftest and the tests)."""

from __future__ import annotations

from typing import Any, TypeVar

from turnlog.domain.model import ModelRequest, ModelResponse, ToolSpec, user_message
from turnlog.providers import (
    AnthropicMessagesProvider,
    HttpModelProvider,
    OpenAIChatCompletionsProvider,
    OpenAIResponsesProvider,
    RetryPolicy,
    Timeouts,
)

T = TypeVar("T")

API_KEY = "sk-test-0123456789abcdefSECRET"
"""The key every test provider sends; it must never show up anywhere else."""

FAST_RETRY = RetryPolicy(
    max_attempts=3, initial_backoff=0.01, max_backoff=0.05, max_retry_sleep_per_turn=5.0
)
SHORT_TIMEOUTS = Timeouts(connect=5.0, read=5.0, write=5.0, total=20.0)

WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def make_provider(dialect: str, base_url: str, **settings: Any) -> HttpModelProvider:
    settings.setdefault("api_key", API_KEY)
    settings.setdefault("retry", FAST_RETRY)
    settings.setdefault("timeouts", SHORT_TIMEOUTS)
    if dialect == "responses":
        return OpenAIResponsesProvider("gpt-test", base_url=base_url, **settings)
    if dialect == "anthropic":
        # Anthropic's base URL is the root: the provider adds /v1/messages.
        root = base_url.removesuffix("/v1")
        return AnthropicMessagesProvider("claude-test", base_url=root, **settings)
    return OpenAIChatCompletionsProvider("gpt-test", base_url=base_url, **settings)


def key_header(dialect: str) -> tuple[str, str]:
    """The header the key goes in for ``dialect``, and its value."""
    if dialect == "anthropic":
        return "x-api-key", API_KEY
    return "authorization", f"Bearer {API_KEY}"


def expected_usage(dialect: str, usage: dict[str, int]) -> dict[str, int]:
    """turnlog's usage for a dialect: Anthropic reports cache writes (none
    unless asked for) and no reasoning tokens."""
    if dialect != "anthropic":
        return usage
    counts = {k: v for k, v in usage.items() if k != "reasoning_tokens"}
    return {**counts, "cache_write_input_tokens": 0}


def model_request(
    *items: dict[str, Any],
    tools: tuple[ToolSpec, ...] = (WEATHER,),
    instructions: str = "Be brief.",
    session_id: str = "s1",
    turn_id: str = "t1",
) -> ModelRequest:
    return ModelRequest(
        instructions=instructions,
        items=items or (user_message("What is the weather in Paris?"),),
        tools=tools,
        route="default",
        session_id=session_id,
        turn_id=turn_id,
        step=1,
    )


async def respond(
    provider: Any, request: ModelRequest
) -> tuple[ModelResponse, list[str]]:
    """The provider's response and the deltas it streamed meanwhile."""
    deltas: list[str] = []
    response = await provider.respond(request, deltas.append)
    return response, deltas
