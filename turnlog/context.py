"""The context instructions, hooks and tools are given, and the deps check.

:class:`RunContext` is what an instructions function and every middleware
hook (``info.context``) see; :class:`~turnlog.ToolContext` is a RunContext
with the call on top. ``deps`` are the user's live dependencies: they are
handed over in this process and never recorded, so a session reopened
after a restart gets them again from ``Runtime.create_session(deps=...)``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Union

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.run_context import RunContext

InstructionsFunction = Callable[..., str | Awaitable[str]]
"""Gives an agent's instructions for one model step (plain or async): it is
called with one argument, the step's :class:`RunContext`."""


def deps_checker(deps_type: object) -> Callable[[object], None]:
    """A check that ``deps`` are of ``deps_type``; refuses types it cannot check.

    Raises:
        InvalidInputError: ``deps_type`` cannot be checked at run time (a
            Protocol without ``@runtime_checkable``, a TypeVar...).
    """
    if deps_type is None or deps_type is Any:
        return _anything
    target = _runtime_type(deps_type)
    try:
        isinstance(None, target)
    except TypeError as error:
        msg = (
            f"deps_type {deps_type!r} cannot be checked at run time ({error}): "
            "use a class, a union of classes, or a @runtime_checkable Protocol"
        )
        raise InvalidInputError(msg) from None
    name = getattr(deps_type, "__qualname__", None) or repr(deps_type)

    def check(deps: object) -> None:
        if not isinstance(deps, target):
            msg = f"deps must be a {name}, not {type(deps).__name__}"
            raise InvalidInputError(msg)

    return check


def _runtime_type(deps_type: object) -> Any:
    """What ``isinstance`` can check of ``deps_type``: a generic's origin,
    each member of a union."""
    origin = typing.get_origin(deps_type)
    if origin is Union or origin is types.UnionType:
        return tuple(_runtime_type(arg) for arg in typing.get_args(deps_type))
    return origin if origin is not None else deps_type


def _anything(_: object) -> None:
    return None


__all__ = ["InstructionsFunction", "RunContext", "deps_checker"]
