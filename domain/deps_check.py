"""The deps check: that a run's ``deps`` are of the agent's ``deps_type``.

``deps`` are the user's live dependencies, handed to instructions, hooks
and tools in a :class:`~turnlog.domain.run_context.RunContext`: they stay
in this process and are never recorded, so a session reopened after a
restart gets them again from ``Runtime.create_session(deps=...)``. The
check runs at the boundary, before anything is written.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, Union

from turnlog.domain.errors import InvalidInputError


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


__all__ = ["deps_checker"]
