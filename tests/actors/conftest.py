"""What the actor tests share: an actor pool of their own."""

from __future__ import annotations

from collections.abc import Iterator

import pykka
import pytest

from turnlog.actors.actor_pool import ActorPool

WAIT = 10.0


@pytest.fixture
def pool() -> Iterator[ActorPool]:
    """A pool apart from the runtime's, whose actors are stopped after."""
    own = ActorPool(idle_seconds=WAIT, name="TestWorker")
    yield own
    pykka.ActorRegistry.stop_all(timeout=WAIT)
