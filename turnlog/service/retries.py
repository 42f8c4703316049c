"""Retried requests: the ``Idempotency-Key`` header is the input's id.

A client that lost a response sends the request again with the same key:
the session recorded the key with the input (``input_id``), so the retry
is answered as the original was, from the log, in any server process.
The same key with another body is a 409 problem; nothing is recorded.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.input_ids import check_input_id
from turnlog.service.problems import Problem
from turnlog.session import AgentSession

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The request header that carries a client's id for its input."""


def idempotency_key(request: Request) -> str | None:
    """The request's ``Idempotency-Key``, checked; None without one."""
    raw = request.headers.get(IDEMPOTENCY_HEADER)
    if raw is None:
        return None
    try:
        return check_input_id(raw)
    except InvalidInputError as error:
        raise Problem(422, str(error), field=IDEMPOTENCY_HEADER) from None


async def replayed_prompt(
    session: AgentSession, key: str, text: str
) -> tuple[str, bool] | None:
    """(the original submission id, whether its run still goes on) for a
    prompt whose key was recorded; None for a new key.

    Raises InputConflictError (a 409) if the key was recorded for other input.
    """
    original = await asyncio.to_thread(session.recorded_submission, key, text)
    if original is None:
        return None
    active = await asyncio.to_thread(session.active_run_handle)
    return original, active is not None and active.submission_id == original


def running(session_id: str, submission_id: str | None) -> dict[str, object]:
    """The body of a prompt answered before its run ended (a 202)."""
    return {
        "session_id": session_id,
        "submission_id": submission_id,
        "status": "running",
    }


__all__ = [
    "IDEMPOTENCY_HEADER",
    "idempotency_key",
    "replayed_prompt",
    "running",
]
