"""The live view follower: a store error is retried, never fatal or silent."""

from __future__ import annotations

import logging
import threading

import pytest

from turnlog import Agent, Runtime, ScriptedModel, StoreError
from turnlog.projections.checkpoints import CheckpointProjection


def test_the_view_follower_retries_a_store_error_and_goes_on(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="turnlog.projections.leader")
    with Runtime.open(sqlite_url) as rt:
        runner = rt.projections
        catch_up = runner.catch_up
        failures = [StoreError("the log is busy"), StoreError("the log is busy")]
        followed = threading.Event()

        def flaky(until: int | None = None) -> int:
            # Only the follower's own catch-ups fail: reads catch up too.
            if threading.current_thread().name != "turnlog-projections":
                return catch_up(until)
            if failures:
                raise failures.pop()
            position = catch_up(until)
            if position >= rt.store.max_position():
                followed.set()
            return position

        runner.catch_up = flaky  # type: ignore[method-assign]
        session = rt.create_session(Agent("a", model=ScriptedModel(["hi"])))
        session.prompt("hello", timeout=10)
        assert followed.wait(30), "the follower never caught up after the errors"
        assert not failures
        assert runner.position(CheckpointProjection.name) >= 1
    retried = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retried) == 2
    assert all(r.exc_info for r in retried)  # the error itself is logged
