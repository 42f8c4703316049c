"""The public surface is exactly what ``__all__`` says (as httpx checks)."""

from __future__ import annotations

import types

import turnlog


def defined_by_turnlog(value: object) -> bool:
    if isinstance(value, types.UnionType):  # Op, EventMsg, SessionEvent
        return all(defined_by_turnlog(member) for member in value.__args__)
    return getattr(value, "__module__", "").startswith("turnlog")


def test_all_exports_every_public_name_and_nothing_else() -> None:
    public = {
        name
        for name, value in vars(turnlog).items()
        if not name.startswith("_") and defined_by_turnlog(value)
    }
    assert public == set(turnlog.__all__)


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert turnlog.__all__ == sorted(turnlog.__all__)
    for name in turnlog.__all__:
        assert getattr(turnlog, name) is not None
