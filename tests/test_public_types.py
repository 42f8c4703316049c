"""The public face says what it takes and returns: no ``Any`` standing in for
a type turnlog knows.

``Any`` is left only where the value is the caller's own: the values of a
JSON object (``dict[str, Any]``: shared state, tool arguments, a schema),
what a user's callable returns (``Callable[..., Any]``) and ``**kwargs``
passed on to a constructor.
"""

from __future__ import annotations

import builtins
import collections.abc
import inspect
import sys
import typing
from collections.abc import Callable, Iterator

import pytest

import turnlog
import turnlog.testing

JSON_OBJECTS = (dict, collections.abc.Mapping)


def anys_in(hint: object, where: str) -> Iterator[str]:
    """Where ``Any`` occurs in ``hint``, except in the places it is honest."""
    if hint is typing.Any:
        yield where
        return
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin in JSON_OBJECTS and arguments[:1] == (str,):
        arguments = arguments[:1]  # a JSON object's values are the caller's
    elif origin is collections.abc.Callable and arguments[:1] == (Ellipsis,):
        return  # a user's callable: what it returns is its own business
    for argument in arguments:
        if isinstance(argument, list):  # Callable's parameter list
            for parameter in argument:
                yield from anys_in(parameter, where)
        else:
            yield from anys_in(argument, where)


class TypeCheckingNames(dict[str, object]):
    """Names a module imports only for the type checker, as stand-in types.

    Anything the module itself defines or imports (``Any`` included) is
    looked up there, so a stand-in can never hide an ``Any``.
    """

    def __init__(self, module: str) -> None:
        super().__init__()
        self._known = vars(sys.modules[module])

    def __missing__(self, name: str) -> object:
        if name in self._known or hasattr(builtins, name):
            raise KeyError(name)
        return type(name, (), {})


def hints_of(function: Callable[..., object]) -> dict[str, object]:
    """Annotated parameters and return of ``function``, ``**kwargs`` left out."""
    localns = TypeCheckingNames(function.__module__)
    hints = typing.get_type_hints(function, localns=localns)
    try:
        parameters = inspect.signature(function).parameters
    except ValueError:
        return hints
    for name, parameter in parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            hints.pop(name, None)
    return hints


def public_members(owner: type) -> Iterator[tuple[str, Callable[..., object]]]:
    for name, member in vars(owner).items():
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(member, property) and member.fget is not None:
            yield name, member.fget
        elif isinstance(member, staticmethod | classmethod):
            yield name, member.__func__
        elif inspect.isfunction(member):
            yield name, member


def fields_of(owner: type) -> dict[str, object]:
    """The annotated fields of ``owner`` and of its turnlog bases."""
    fields: dict[str, object] = {}
    for base in reversed(owner.__mro__):
        if not base.__module__.startswith("turnlog"):
            continue
        localns = TypeCheckingNames(base.__module__)
        module = vars(sys.modules[base.__module__])
        for name, annotation in vars(base).get("__annotations__", {}).items():
            postponed = isinstance(annotation, str)  # __future__ annotations
            fields[name] = (
                eval(annotation, module, localns) if postponed else annotation
            )
    return fields


def anys_on_the_public_face() -> list[str]:
    found: list[str] = []
    exported = [(name, getattr(turnlog, name)) for name in turnlog.__all__]
    exported.append(("testing.wait_for", turnlog.testing.wait_for))
    for name, value in exported:
        if inspect.isfunction(value):
            for parameter, hint in hints_of(value).items():
                found += anys_in(hint, f"{name}({parameter})")
        elif inspect.isclass(value) and value.__module__.startswith("turnlog"):
            for field, hint in fields_of(value).items():
                if not field.startswith("_"):
                    found += anys_in(hint, f"{name}.{field}")
            for member_name, member in public_members(value):
                for parameter, hint in hints_of(member).items():
                    found += anys_in(hint, f"{name}.{member_name}({parameter})")
    return found


def test_no_public_signature_of_turnlog_takes_or_returns_any() -> None:
    assert anys_on_the_public_face() == []


def test_the_check_reads_the_signatures_it_should() -> None:
    # A check that found nothing because it read nothing would pass too.
    hints = hints_of(turnlog.Subscription.get)
    assert hints["return"] == turnlog.SessionEvent


@pytest.mark.parametrize(
    ("hint", "honest"),
    [
        (dict[str, typing.Any], True),
        (collections.abc.Mapping[str, typing.Any] | None, True),
        (Callable[..., typing.Any], True),
        (typing.Any, False),
        (collections.abc.Sequence[typing.Any], False),
        (dict[typing.Any, str], False),
        (Callable[[typing.Any], bool], False),
    ],
)
def test_the_check_tells_an_honest_any_from_a_missing_type(
    hint: object, honest: bool
) -> None:
    assert (list(anys_in(hint, "here")) == []) is honest
