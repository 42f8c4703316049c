"""Aggregate identities derived from the ids users see.

A session id is any short printable string chosen by the caller; the log
keys aggregates by UUID, so both ids are derived deterministically and a
session can be found again from its id alone.
"""

from __future__ import annotations

import functools
import hashlib
import uuid

from turnlog.domain.errors import InvalidInputError

NAMESPACE = uuid.UUID("6f1c7e0a-3b7e-4c55-9a51-2f4d2c1b9e10")
"""Fixed namespace for turnlog's name-based UUIDs; never change it."""

MAX_SESSION_ID_LENGTH = 200


def check_session_id(session_id: object) -> str:
    """Returns ``session_id`` if it is a usable session id, else raises."""
    if not isinstance(session_id, str):
        msg = f"session_id must be a str, not {type(session_id).__name__}"
        raise InvalidInputError(msg)
    if not session_id or len(session_id) > MAX_SESSION_ID_LENGTH:
        msg = f"session_id must have 1 to {MAX_SESSION_ID_LENGTH} characters"
        raise InvalidInputError(msg)
    if not session_id.isprintable():
        msg = "session_id must be printable (no control characters)"
        raise InvalidInputError(msg)
    return session_id


@functools.lru_cache(maxsize=4096)
def session_uuid(session_id: str) -> uuid.UUID:
    """The id of the Session aggregate of ``session_id``."""
    return uuid.uuid5(NAMESPACE, "session:" + session_id)


@functools.lru_cache(maxsize=4096)
def turn_uuid(session_id: str, number: int) -> uuid.UUID:
    """The id of turn ``number`` (1-based) of ``session_id``."""
    return uuid.uuid5(session_uuid(session_id), f"turn:{number}")


@functools.lru_cache(maxsize=4096)
def turn_id_text(session_id: str, number: int) -> str:
    """``str(turn_uuid(session_id, number))``: the turn id events and
    effects carry, formatted once (UUID.__str__ is Python, and a turn
    names its id in half a dozen events and effects)."""
    return str(turn_uuid(session_id, number))


def child_session_id(parent_session: str, turn: int, call_id: str) -> str:
    """The id of the child session that tool call ``call_id`` of turn
    ``turn`` of ``parent_session`` runs (an agent used as a tool).

    Derived, never drawn, so a parent revived after a crash finds the child
    its call started: ``<parent>:<turn>:<call id>``, or, where that would
    be too long for a session id, a name-based UUID of the three.
    """
    readable = f"{parent_session}:{turn}:{call_id}"
    if len(readable) <= MAX_SESSION_ID_LENGTH and readable.isprintable():
        return readable
    derived = uuid.uuid5(session_uuid(parent_session), f"child:{turn}:{call_id}")
    return f"child-{derived.hex}"


@functools.lru_cache(maxsize=4096)
def trace_id_of(session_id: str) -> str:
    """The trace id of a session: 16 bytes of a hash of its id, as hex.

    The one derivation of a trace id: ``turnlog traces``, the live
    OpenTelemetry export and every delivered ``Event`` use it, through
    :func:`session_trace_id`.
    """
    digest = hashlib.sha256(f"turnlog-trace:{session_id}".encode()).digest()
    return digest[:16].hex()


def session_trace_id(
    session_id: str, *, parent_session: str = "", root_session: str = ""
) -> str:
    """The trace ``session_id``'s spans and events belong to.

    A session of its own has its own trace; a child session (an agent used
    as a tool) joins the trace of the top of its tree of parents
    (``root_session``, or its ``parent_session`` in histories recorded
    before roots were).
    """
    return trace_id_of(root_session or parent_session or session_id)


def new_submission_id() -> str:
    """A fresh submission id (what ``submit`` returns to the caller)."""
    return uuid.uuid4().hex
