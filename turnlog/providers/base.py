"""What every HTTP model provider has: configuration, a client, closing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from turnlog.domain.errors import UsageError
from turnlog.providers.http import DEFAULT_BASE_URL, HttpEndpoint
from turnlog.providers.settings import RetryPolicy, Timeouts


class HttpModelProvider:
    """The configuration and HTTP client shared by the OpenAI-style providers.

    Args:
        model: the model name sent with each request.
        api_key: sent only in the ``Authorization`` header; None sends no
            header (local servers often need none).
        base_url: the API root (default ``https://api.openai.com/v1``).
        timeouts: connect / read / write / total timeouts.
        retry: when and how long to retry.
        headers: extra headers sent with every request.
        options: extra request fields merged into every request body
            (``temperature``, ``reasoning``, ...); the fields turnlog fills
            itself (model, input, tools, stream, ...) are refused.
        max_connections: connections kept to the server at most.
        transport: the httpx transport requests go through (default: the
            network), e.g. ``httpx.MockTransport`` in tests.
    """

    RESERVED_OPTIONS: frozenset[str] = frozenset({"model", "stream"})
    """Request fields that ``options`` may not set (the dialect fills them)."""

    API_KEY_HEADER: str | None = None
    """The header the API key goes in as it is; None: ``Authorization: Bearer``."""

    PROVIDER_NAME: str = "openai"
    """Whose API this is, as OpenTelemetry's ``gen_ai.provider.name`` names it.

    An OpenAI-compatible server (vLLM, Ollama, ...) is spoken to with
    OpenAI's API and reported as ``openai``, as the GenAI conventions do;
    the model names tell them apart."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            msg = "a provider needs a non-empty model name"
            raise UsageError(msg)
        self.model = model
        self.options: dict[str, Any] = dict(options or {})
        clash = sorted(set(self.options) & self.RESERVED_OPTIONS)
        if clash:
            msg = f"options may not set {', '.join(clash)}: the provider sets them"
            raise UsageError(msg)
        self._endpoint = HttpEndpoint(
            base_url=base_url,
            api_key=api_key,
            timeouts=timeouts or Timeouts(),
            retry=retry or RetryPolicy(),
            headers=headers,
            max_connections=max_connections,
            transport=transport,
            api_key_header=self.API_KEY_HEADER,
        )

    @property
    def provider_name(self) -> str:
        """Whose API this is (``gen_ai.provider.name``); see PROVIDER_NAME."""
        return self.PROVIDER_NAME

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._endpoint.base_url

    @property
    def timeouts(self) -> Timeouts:
        """The timeouts in force."""
        return self._endpoint.timeouts

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy in force."""
        return self._endpoint.retry

    async def aclose(self) -> None:
        """Closes the HTTP client and its connections."""
        await self._endpoint.aclose()

    def close(self) -> None:
        """Closes the HTTP client from outside the loop that runs the provider.

        The Runtime runs providers on its own I/O loop thread: call this
        before closing the runtime, so no connection is left open.
        """
        self._endpoint.close()

    def __repr__(self) -> str:
        # Never the API key: it stays in the client's headers.
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"
        )
