"""What counts as input: the kinds, and the check every input passes."""

from __future__ import annotations

from turnlog.domain.errors import InvalidInputError

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
    return text
