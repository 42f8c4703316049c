"""Errors as ``application/problem+json`` (RFC 9457), never a traceback.

Every refusal of the service is a :class:`Problem`: a status, a title and a
detail, and for bad input the ``field`` it is about. Errors of turnlog's
own tree map to a status here, in one place; anything else is a 500 whose
body says only that, while the log of the server keeps the traceback.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from turnlog.domain.errors import (
    ConcurrencyConflictError,
    InputRejectedError,
    InvalidInputError,
    SessionBusyError,
    SessionClosedError,
    TurnlogError,
    UnknownSessionError,
    UsageError,
)

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
"""The media type of every error body."""

_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    404: "Not found",
    405: "Method not allowed",
    408: "Request timeout",
    409: "Conflict",
    413: "Request body too large",
    414: "URI too long",
    415: "Unsupported media type",
    422: "Invalid input",
    431: "Request header fields too large",
    500: "Internal server error",
    503: "Service unavailable",
}


class Problem(Exception):
    """A refusal with its HTTP status; raised by handlers, rendered once.

    Args:
        status: the HTTP status code.
        detail: one sentence for the caller.
        field: the input field at fault (a JSON path such as ``$.text``).
        headers: extra response headers (``WWW-Authenticate`` for a 401).
    """

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.field = field
        self.headers = headers or {}

    def body(self) -> bytes:
        """The problem+json body."""
        fields: dict[str, Any] = {
            "type": "about:blank",
            "title": _TITLES.get(self.status, "Error"),
            "status": self.status,
            "detail": _text(self.detail),
        }
        if self.field is not None:
            fields["field"] = _text(self.field)
        return msgspec.json.encode(fields)

    def response(self) -> Response:
        """The problem as a response."""
        return Response(
            self.body(),
            status_code=self.status,
            media_type=PROBLEM_JSON,
            headers=self.headers,
        )


def _text(value: str) -> str:
    """``value`` as UTF-8 can carry it: a lone surrogate (which a detail may
    quote from the input) as its escape, so that the answer never fails."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def problem_of(error: BaseException) -> Problem:
    """The problem an error of a handler stands for."""
    match error:
        case Problem():
            return error
        case UnknownSessionError():
            return Problem(404, str(error))
        case InvalidInputError() | InputRejectedError():
            return Problem(422, str(error))
        case SessionBusyError() | ConcurrencyConflictError() | SessionClosedError():
            return Problem(409, str(error))
        case UsageError():
            return Problem(409, str(error))
        case TurnlogError():
            logger.warning("request failed: %s", error)
            return Problem(503, f"{type(error).__name__}: {error}")
        case _:
            logger.error("request failed", exc_info=error)
            return Problem(500, "the server failed to answer this request")


async def handle_error(_: Request, error: Exception) -> Response:
    """Starlette's exception handler: every error as problem+json."""
    return problem_of(error).response()


def invalid_body(error: msgspec.ValidationError) -> Problem:
    """A 422 naming the field a decoded body got wrong.

    msgspec ends its message with `` - at `$.path` `` (the object at fault)
    and names a missing or unknown field in backquotes; together they are
    the field.
    """
    message = str(error)
    path = "$"
    if " - at `" in message:
        message, _, at = message.rpartition(" - at `")
        path = at.rstrip("`")
    named = re.search(r"(?:unknown|required) field `([^`]*)`", message)
    if named is not None:
        path = f"{path}.{named.group(1)}"
    return Problem(422, message, field=None if path == "$" else path)


__all__ = ["PROBLEM_JSON", "Problem", "handle_error", "invalid_body", "problem_of"]
