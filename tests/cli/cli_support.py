"""Helpers shared by the command-line tests (this folder is on ``sys.path``)."""

from __future__ import annotations

from turnlog.store import Store


def max_position(url: str) -> int:
    """The position of the last event in the log at ``url``."""
    store = Store(url)
    try:
        return store.max_position()
    finally:
        store.close()
