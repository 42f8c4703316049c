"""How a model call over HTTP fails, as ProviderError subclasses.

The turn records a failed step with the error's class name and message,
so each class names one kind of failure and each message says what the
server said (never the API key)::

    ProviderError                        (turnlog.domain.errors)
    ├── ProviderConnectionError          no connection, or it dropped before an answer
    ├── ProviderTimeoutError             connect, read or total timeout
    ├── ProviderHTTPError                the server answered with an error status
    │   ├── AuthenticationError          401 / 403: never retried
    │   ├── RateLimitError               429, after the retries
    │   ├── ServerError                  5xx (and 408), after the retries
    │   └── BadRequestError              any other 4xx: the request was refused
    ├── StreamError                      the answer arrived broken
    │   ├── StreamCutError               the stream ended before the response did
    │   └── MalformedStreamError         not SSE, not JSON, or not the expected shape
    ├── ResponseFailedError              the server reported a failure inside the stream
    └── EmptyResponseError               the model answered no text and no tool call

Every error keeps its constructor arguments in ``args`` so it pickles as a
plain exception (errors cross actor futures).
"""

from __future__ import annotations

from turnlog.domain.errors import ProviderError


class ProviderConnectionError(ProviderError):
    """The server could not be reached, or dropped the connection before answering."""


class ProviderTimeoutError(ProviderError):
    """The server took longer than a configured timeout."""


class ProviderHTTPError(ProviderError):
    """The server answered with an HTTP error status.

    Args:
        message: the whole message (status, endpoint and the server's words).
        status: the HTTP status code.
        server_message: the server's own error message, if it sent one.
        retry_after: seconds the server asked to wait (``Retry-After``).
        request_id: the server's request id (``x-request-id``), for support.
    """

    def __init__(
        self,
        message: str,
        status: int,
        server_message: str | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, status, server_message, retry_after, request_id)
        self.status = status
        self.server_message = server_message
        self.retry_after = retry_after
        self.request_id = request_id

    def __str__(self) -> str:
        return str(self.args[0])


class AuthenticationError(ProviderHTTPError):
    """The server refused the credentials (401) or the access (403)."""


class RateLimitError(ProviderHTTPError):
    """The server kept answering 429 (too many requests) through the retries."""


class ServerError(ProviderHTTPError):
    """The server kept failing (5xx, or 408) through the retries."""


class BadRequestError(ProviderHTTPError):
    """The server refused the request (a 4xx other than 401, 403, 408, 429)."""


class StreamError(ProviderError):
    """The streamed answer arrived broken."""


class StreamCutError(StreamError):
    """The stream ended, or the connection dropped, before the response completed."""


class MalformedStreamError(StreamError):
    """The stream was not well-formed SSE carrying the expected JSON events."""


class ResponseFailedError(ProviderError):
    """The server reported, inside the stream, that generating the response failed.

    Args:
        message: the whole message.
        code: the server's error code, if any.
    """

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message, code)
        self.code = code

    def __str__(self) -> str:
        return str(self.args[0])


class EmptyResponseError(ProviderError):
    """The model's answer held no text and no tool call."""
