"""turnlog.providers exports exactly its public names (as httpx checks)."""

from __future__ import annotations

import turnlog.providers


def test_all_exports_every_public_name_and_nothing_else() -> None:
    public = {
        name
        for name, value in vars(turnlog.providers).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "").startswith("turnlog")
    }
    assert public == set(turnlog.providers.__all__)


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert turnlog.providers.__all__ == sorted(turnlog.providers.__all__)
    for name in turnlog.providers.__all__:
        assert getattr(turnlog.providers, name) is not None
