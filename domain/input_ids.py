"""Client-chosen input ids: a retried input is recorded once.

A caller may give any input (prompt, follow-up, steer, peer input, an
approval answer) an id of its own choosing (``input_id=``; over HTTP the
``Idempotency-Key`` header; over AG-UI the user message's id). The id is
recorded with the input, with a digest of what was asked, so the session
folded from its log knows every id it has seen, in any process and after
any restart:

- the same id with the same content is the same input: nothing more is
  recorded and the caller is answered with the original submission;
- the same id with other content is refused with
  :class:`~turnlog.domain.errors.InputConflictError`, recording nothing.

What the session keeps per id is small and fixed (the digest and the
submission id, about 150 bytes), so a session that took a million
identified inputs holds about 150 MB of them: ids are meant for inputs
that a client may retry, not as a store of their own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from turnlog.domain.errors import InputConflictError, InvalidInputError
from turnlog.domain.text import check_encodable

MAX_INPUT_ID_LENGTH = 200
"""The longest input id taken (an ``Idempotency-Key`` is usually a UUID)."""

_encoder = msgspec.json.Encoder(order="sorted")


def check_input_id(input_id: object) -> str:
    """``input_id`` if it is usable as an input id, else InvalidInputError."""
    if not isinstance(input_id, str):
        msg = f"input_id must be a str, not {type(input_id).__name__}"
        raise InvalidInputError(msg)
    if not input_id or len(input_id) > MAX_INPUT_ID_LENGTH:
        msg = f"input_id must have 1 to {MAX_INPUT_ID_LENGTH} characters"
        raise InvalidInputError(msg)
    return check_encodable(input_id, "input_id")


def input_digest(kind: str, text: str, attachments: Sequence[Any] = ()) -> str:
    """The digest of one input as the caller asked for it.

    ``kind`` is what the caller asked for (``prompt``, ``follow_up``,
    ``steer``, ``peer``, ``system``), not what it became: a prompt queued
    behind a running turn is still a prompt, so its retry matches it.
    """
    encoded = _encoder.encode(
        {"kind": kind, "text": text, "attachments": msgspec.to_builtins(attachments)}
    )
    return hashlib.sha256(encoded).hexdigest()


def seen_submission(
    seen: Mapping[str, Sequence[str]], input_id: str, digest: str
) -> str | None:
    """The submission id ``input_id`` was recorded under, if it was.

    ``seen`` maps each recorded input id to ``[digest, submission id]``.

    Raises:
        InputConflictError: the id was recorded for other content.
    """
    recorded = seen.get(input_id)
    if recorded is None:
        return None
    recorded_digest, submission_id = recorded
    if recorded_digest != digest:
        msg = (
            f"input id {input_id!r} was already used for other input "
            f"(submission {submission_id!r}); use a new id for new input"
        )
        raise InputConflictError(msg, input_id)
    return submission_id


def check_same_decision(
    request_id: str, decided: Mapping[str, str], decision: str
) -> bool:
    """Whether approval ``request_id`` was already decided ``decision``.

    False if it was not decided at all. The decision must be the one
    recorded, word for word: a request that another request's
    ``allow_session`` allowed was decided ``allow``.

    Raises:
        InputConflictError: it was decided otherwise.
    """
    recorded = decided.get(request_id)
    if recorded is None:
        return False
    if recorded == decision:
        return True
    msg = (
        f"approval request {request_id!r} was already decided {recorded!r}; "
        f"it cannot be decided {decision!r}"
    )
    raise InputConflictError(msg, request_id)
