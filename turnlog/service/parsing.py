"""What a request sends, parsed strictly: JSON bodies, numbers, path ids.

Every function here either returns a value the handlers can use as it is
or raises a :class:`~turnlog.service.problems.Problem` (4xx) that names
the field at fault and why, before anything is recorded.

- **JSON bodies** may nest at most :data:`MAX_JSON_DEPTH` levels (objects
  and arrays together). The depth is measured on the bytes before any
  decoder runs, so no nesting, however deep, reaches Python's recursion
  limit (a 2 KB body of 999 brackets was a ``RecursionError``). Their
  size is bounded by :class:`~turnlog.service.limits.BodyLimit`.
- A string escape that is half of a UTF-16 surrogate pair (``"\\ud800"``)
  is valid JSON syntax but no Unicode text: it is refused naming the
  field that holds it, not with the decoder's "Input data was truncated".
- **Numbers in a query** are ASCII digits only (``str.isdigit`` also
  accepts ``²`` and ``٣``, which ``int`` then refuses or reads) and within
  a stated range.
- **Session ids in a path** that no session can have (control
  characters, over 200 characters) are a 404 before any query, like any
  session that does not exist.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, TypeVar

import msgspec

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.ids import check_session_id
from turnlog.service.problems import Problem, invalid_body

T = TypeVar("T")

MAX_JSON_DEPTH = 64
"""Levels of objects and arrays a JSON body may nest (the body itself is 1).

Far beyond what a prompt, a decision or an agent's shared state needs,
and far below Python's recursion limit (1,000), which every layer that
walks the value (the log's encoder, the views, the console) shares.
"""

MAX_QUERY_INTEGER = 2**63 - 1
"""The largest number a query may give (a log position is a 64-bit integer)."""

# A JSON string literal (escapes included), or one bracket. Strings are
# matched whole so that brackets inside them do not count.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASCII_DIGITS = re.compile(r"[0-9]{1,19}")


def decode_json(body: bytes, kind: type[T]) -> T:
    """``body`` as ``kind`` (a msgspec-decodable type), or a 400/422 problem.

    Raises:
        Problem: 400 for a body that is not JSON; 422 for one nested too
            deep, holding a lone surrogate or a number out of range, or
            not of ``kind`` (naming the field, as msgspec reports it).
    """
    _check_depth(body)
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as error:
        raise _located(body) or invalid_body(error) from None
    except msgspec.DecodeError as error:
        raise _located(body) or Problem(
            400, f"the body is not valid JSON: {error}"
        ) from None
    except RecursionError:  # a backstop: _check_depth measured the nesting
        raise _too_deep(None) from None


def parse_json(body: bytes) -> Any:
    """``body`` as plain JSON values (dicts, lists, str, int, float, bool, None).

    For a face whose own library validates the value afterwards (AG-UI's
    pydantic models): the depth, surrogate and range checks of
    :func:`decode_json`, with no type.
    """
    return decode_json(body, Any)


def _check_depth(body: bytes) -> None:
    """Raises a 422 if ``body`` nests deeper than :data:`MAX_JSON_DEPTH`.

    Only the brackets outside strings count; the field named is the
    member of the top-level object that holds the deep value.
    """
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return  # too few brackets to nest that deep (most bodies: no scan)
    depth = 0
    top_is_object = False
    key: bytes | None = None
    for match in _TOKENS.finditer(body):
        token = match.group()
        if token[0] == ord('"'):
            if depth == 1:
                key = token  # the last string at the top: the member's key
            continue
        if token in (b"[", b"{"):
            if depth == 0:
                top_is_object = token == b"{"
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise _too_deep(key if top_is_object else None)
        else:
            depth -= 1


def _too_deep(key: bytes | None) -> Problem:
    field = None
    if key is not None:
        try:
            field = _member("$", json.loads(key))
        except ValueError:  # an undecodable key: the body as a whole, then
            field = None
    return Problem(
        422,
        f"the JSON nests deeper than {MAX_JSON_DEPTH} levels of objects and arrays",
        field=field,
    )


def _located(body: bytes) -> Problem | None:
    """A problem naming the value msgspec refused for what it holds, if any.

    msgspec refuses a lone surrogate escape as truncated or malformed
    input and an out-of-range number without its key; Python's json
    module reads both (a lone surrogate as such, 1e999 as infinity), so
    its reading shows which field holds them.
    """
    surrogates = _SURROGATE_ESCAPE.search(body) is not None
    try:
        value = json.loads(body)
    except ValueError:  # not JSON even to Python: msgspec's message stands
        return None
    for path, item, is_key in _walk("$", value):
        if surrogates and isinstance(item, str) and _SURROGATE.search(item):
            char = _SURROGATE.search(item)
            assert char is not None
            where = "a key of this object" if is_key else "this string"
            return Problem(
                422,
                f"{where} holds a lone UTF-16 surrogate escape "
                f"(\\u{ord(char.group()):04x}), which is not a Unicode "
                "character; send the character itself or a full surrogate pair",
                field=path,
            )
        if isinstance(item, float) and not math.isfinite(item):
            return Problem(
                422, "the number is out of range (it must be finite)", field=path
            )
    return None


def _walk(path: str, value: Any) -> Iterator[tuple[str, Any, bool]]:
    """Every value and key in ``value`` with its JSON path, without recursion.

    Yields ``(path, item, is_key)``; a key is reported at its object's path.
    """
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        yield where, item, False
        if isinstance(item, dict):
            for key, member in reversed(item.items()):
                yield where, key, True
                stack.append((_member(where, key), member))
        elif isinstance(item, list):
            stack.extend(
                (f"{where}[{index}]", member)
                for index, member in reversed(list(enumerate(item)))
            )


def _member(path: str, key: str) -> str:
    """``path.key``, with a key that is not a plain name quoted."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def query_integer(
    text: str | None,
    name: str,
    *,
    minimum: int = 1,
    maximum: int = MAX_QUERY_INTEGER,
) -> int | None:
    """The query parameter ``name`` as an integer, or None if absent.

    Args:
        text: the parameter's value as sent (None when it was not sent).
        name: the parameter, named in the problem.
        minimum: the smallest value accepted.
        maximum: the largest value accepted.

    Raises:
        Problem: 422 naming ``name`` unless ``text`` is ASCII digits
            (no sign, no spaces) for a number from ``minimum`` to
            ``maximum``.
    """
    if text is None:
        return None
    if _ASCII_DIGITS.fullmatch(text) is None or not (minimum <= int(text) <= maximum):
        raise Problem(
            422,
            f"{name} must be a whole number from {minimum} to {maximum}, "
            "in ASCII digits",
            field=name,
        )
    return int(text)


def path_session_id(session_id: str) -> str:
    """A session id from a path; a 404 for one no session can have.

    Checked before any query: a database may refuse such an id outright
    (PostgreSQL refuses NUL in text), which is no failure of the log.
    """
    try:
        return check_session_id(session_id)
    except InvalidInputError as error:
        raise Problem(404, f"no session {session_id!r}: {error}") from None


__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_QUERY_INTEGER",
    "decode_json",
    "parse_json",
    "path_session_id",
    "query_integer",
]
