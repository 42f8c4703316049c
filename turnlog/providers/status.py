"""Reading an HTTP error answer: its error class, message and Retry-After."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from typing import Any

import httpx
import msgspec

from turnlog.providers.errors import (
    AuthenticationError,
    BadRequestError,
    ProviderHTTPError,
    RateLimitError,
    ServerError,
)

MAX_MESSAGE_CHARS = 500


def status_error(
    response: httpx.Response, body: bytes, where: str, redact: Callable[[str], str]
) -> ProviderHTTPError:
    """The error for an HTTP error answer from ``where``, with the server's message.

    ``redact`` removes the API key from the server's words, should it
    echo the key back.
    """
    status = response.status_code
    # Redacted before anything is cut short, so no part of a key survives.
    redacted = redact(body.decode("utf-8", "replace")).encode()
    server_message = server_error_message(redacted)
    # x-request-id from OpenAI-style servers, request-id from Anthropic.
    request_id = response.headers.get("x-request-id") or response.headers.get(
        "request-id"
    )
    error_class: type[ProviderHTTPError]
    if status in (401, 403):
        error_class = AuthenticationError
    elif status == 429:
        error_class = RateLimitError
    elif status >= 500 or status == 408:
        error_class = ServerError
    else:
        error_class = BadRequestError
    detail = server_message or response.reason_phrase or "no message"
    message = f"HTTP {status} from {where}: {detail}"
    if request_id:
        message += f" (request id {request_id})"
    return error_class(
        message,
        status,
        server_message,
        parse_retry_after(response.headers),
        request_id,
    )


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds the server asked to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` is either seconds or an HTTP date; None if absent or
    unreadable. ``now`` (a Unix time) is for tests.
    """
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def server_error_message(body: bytes) -> str | None:
    """The server's message in an error body, in the shapes servers use.

    ``{"error": {"message": ...}}`` (OpenAI, llama.cpp), ``{"error": "..."}``
    (Ollama), ``{"message": ...}`` (vLLM), else the start of the body text.
    """
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return None
    try:
        payload = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return shorten(text)
    message: Any = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("code")
        elif isinstance(error, str):
            message = error
        if message is None:
            message = payload.get("message") or payload.get("detail")
    if isinstance(message, str) and message:
        return shorten(message)
    return shorten(text)


def shorten(text: str) -> str:
    """``text``, cut to MAX_MESSAGE_CHARS: error messages stay one readable line."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return text[: MAX_MESSAGE_CHARS - 1] + "…"
