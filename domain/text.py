"""Text the log can hold: valid Unicode, which UTF-8 can encode.

A Python ``str`` can hold lone surrogates (U+D800 to U+DFFF), which no
UTF-8 encoder accepts: ``os.listdir`` makes them from file names that are
not UTF-8 (``surrogateescape``), and so can a careless decoder. Stored
events are UTF-8 JSON, so such text must never reach an event. Two rules:

- input from a caller that is not valid Unicode is refused at the boundary
  (``check_encodable``), and nothing is recorded;
- output that turnlog records on someone's behalf (a tool's output, a model
  step, a hook's text) is made encodable (``encodable_data``): every
  surrogate becomes U+FFFD, and the caller records a note saying so.

Surrogates are the only code points UTF-8 cannot encode; control
characters (NUL included) are valid Unicode and are kept as they are.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from turnlog.domain.errors import InvalidInputError

REPLACEMENT = "\ufffd"
"""What each code point that is not valid Unicode becomes (U+FFFD)."""

_SURROGATE = re.compile("[\ud800-\udfff]")

T = TypeVar("T")


def encodable_text(text: str) -> tuple[str, int]:
    """``text`` with each surrogate replaced by U+FFFD, and how many were."""
    if text.isascii():  # the common case costs one scan in C
        return text, 0
    return _SURROGATE.subn(REPLACEMENT, text)


def _anything(_: Any) -> None:
    return None


# Encoding in C is the quick way to learn that nothing needs replacing:
# msgspec refuses a lone surrogate in any string or key. Values it cannot
# encode (live objects in a fact) are encoded as null: only text matters.
_probe = msgspec.json.Encoder(enc_hook=_anything)


def encodable_data(value: Any) -> tuple[Any, int]:
    """``value`` with every string in it made encodable (keys included).

    Walks dicts, lists, tuples and msgspec structs (rebuilt with the
    changed fields); other values are returned as they are.
    Returns the value (the same object when nothing changed) and the number
    of code points replaced.
    """
    try:
        _probe.encode(value)
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
        return _encodable(value)  # a surrogate somewhere, or keys to look at
    return value, 0


def _encodable(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return encodable_text(value)
    if isinstance(value, dict):
        pairs = [(_encodable(k), _encodable(v)) for k, v in value.items()]
        total = sum(kc + vc for (_, kc), (_, vc) in pairs)
        return ({k: v for (k, _), (v, _) in pairs}, total) if total else (value, 0)
    if isinstance(value, list | tuple):
        results = [_encodable(item) for item in value]
        total = sum(count for _, count in results)
        if not total:
            return value, 0
        rebuilt = [item for item, _ in results]
        return (rebuilt if isinstance(value, list) else tuple(rebuilt)), total
    if isinstance(value, msgspec.Struct):
        changes = {}
        total = 0
        for field in value.__struct_fields__:
            new, count = _encodable(getattr(value, field))
            if count:
                changes[field] = new
                total += count
        return (
            (msgspec.structs.replace(value, **changes), total) if total else (value, 0)
        )
    return value, 0


def replacement_note(count: int, what: str) -> str:
    """The note recorded with ``what`` when ``count`` code points were replaced."""
    noun, verb = ("character", "was") if count == 1 else ("characters", "were")
    return (
        f"[turnlog: {count} {noun} of {what} {verb} not valid Unicode "
        "and replaced with U+FFFD]"
    )


def unencodable_at(value: Any, where: str) -> str | None:
    """Where in ``value`` the first text that is not valid Unicode is, or None.

    Looks into strings, dict keys and values, lists, tuples and msgspec
    structs; ``where`` names ``value`` in the answer (``"shared_state['k']"``).
    """
    if isinstance(value, str):
        if value.isascii():
            return None
        found = _SURROGATE.search(value)
        if found is None:
            return None
        return f"{where} holds U+{ord(found.group()):04X} at index {found.start()}"
    if isinstance(value, dict):
        for key, item in value.items():
            spot = unencodable_at(key, f"a key of {where}")
            if spot is None:
                spot = unencodable_at(item, f"{where}[{key!r}]")
            if spot is not None:
                return spot
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            spot = unencodable_at(item, f"{where}[{index}]")
            if spot is not None:
                return spot
        return None
    if isinstance(value, msgspec.Struct):
        for field in value.__struct_fields__:
            spot = unencodable_at(getattr(value, field), f"{where}.{field}")
            if spot is not None:
                return spot
    return None


def check_encodable(value: T, what: str) -> T:
    """``value`` if every string in it is valid Unicode, else InvalidInputError.

    The error names where the offending text is; nothing is recorded.
    """
    spot = unencodable_at(value, what)
    if spot is not None:
        msg = (
            f"{spot}, a lone surrogate: text that is not valid Unicode "
            "(UTF-8 cannot encode it) is refused, and nothing was recorded"
        )
        raise InvalidInputError(msg)
    return value
