"""What counts as input: the kinds, and the check every input passes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.protocol import SessionFileReference
from turnlog.domain.text import check_encodable

INPUT_KINDS = frozenset({"prompt", "follow_up", "steer", "peer", "system"})
"""Kinds of input; only prompt, follow-up and steer become user messages."""


def check_input(kind: str, text: object) -> str:
    """``text`` if it is usable input of ``kind``, else InvalidInputError."""
    if kind not in INPUT_KINDS:
        msg = f"unknown input kind {kind!r}"
        raise InvalidInputError(msg)
    if not isinstance(text, str):
        msg = f"input text must be a str, not {type(text).__name__}"
        raise InvalidInputError(msg)
    return check_encodable(text, "input text")


def check_json_data(value: Any, what: str) -> Any:
    """``value`` if it is plain JSON data (what the log can hold), else raises.

    Strings, numbers, booleans, None, and lists and dicts (with string
    keys) of those, all text valid Unicode; anything else is refused
    here, before it is recorded.
    """
    check_encodable(value, what)
    try:
        encoded = msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        msg = f"{what} must be plain JSON data: {error}"
        raise InvalidInputError(msg) from None
    # What comes back from the log must equal what went in: tuples, sets
    # and non-string keys would come back changed, so they are refused.
    if msgspec.json.decode(encoded) != value:
        msg = f"{what} must be plain JSON data (lists, not tuples or sets; str keys)"
        raise InvalidInputError(msg)
    return value


def check_attachments(
    values: Sequence[SessionFileReference],
) -> tuple[SessionFileReference, ...]:
    """``values`` as a tuple if each is a well-formed SessionFileReference."""
    if type(values) is tuple and not values:
        return ()  # the default, on every prompt: no ABC check for nothing
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        msg = "attachments must be a sequence of SessionFileReference"
        raise InvalidInputError(msg)
    for index, value in enumerate(values):
        if not isinstance(value, SessionFileReference):
            msg = f"attachments must be SessionFileReference objects, not {value!r}"
            raise InvalidInputError(msg)
        try:  # msgspec does not check field types on construction
            msgspec.convert(msgspec.structs.asdict(value), SessionFileReference)
        except msgspec.ValidationError as error:
            msg = f"bad attachment {value!r}: {error}"
            raise InvalidInputError(msg) from None
        check_encodable(value, f"attachments[{index}]")
    return tuple(values)
