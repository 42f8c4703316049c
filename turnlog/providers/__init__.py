"""Model providers that talk to OpenAI-style and Anthropic HTTP APIs.

``OpenAIResponsesProvider`` speaks the Responses API (``/responses``, with
native compaction); ``OpenAIChatCompletionsProvider`` speaks Chat
Completions (``/chat/completions``), the dialect of vLLM, llama.cpp and
Ollama; ``AnthropicMessagesProvider`` speaks Anthropic's Messages API
(``/v1/messages``). All three stream text deltas to the session's
subscribers, retry what is worth retrying, and fail with the
ProviderError subclasses below.
Close a provider (``await aclose()``, or ``close()`` from another thread)
when done with it.
"""

from turnlog.domain.errors import ProviderError
from turnlog.providers.anthropic import AnthropicMessagesProvider
from turnlog.providers.base import HttpModelProvider
from turnlog.providers.chat_completions import OpenAIChatCompletionsProvider
from turnlog.providers.errors import (
    AuthenticationError,
    BadRequestError,
    EmptyResponseError,
    MalformedStreamError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    RateLimitError,
    ResponseFailedError,
    ServerError,
    StreamCutError,
    StreamError,
)
from turnlog.providers.responses import OpenAIResponsesProvider
from turnlog.providers.settings import RetryPolicy, Timeouts

__all__ = [
    "AnthropicMessagesProvider",
    "AuthenticationError",
    "BadRequestError",
    "EmptyResponseError",
    "HttpModelProvider",
    "MalformedStreamError",
    "OpenAIChatCompletionsProvider",
    "OpenAIResponsesProvider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ResponseFailedError",
    "RetryPolicy",
    "ServerError",
    "StreamCutError",
    "StreamError",
    "Timeouts",
]
