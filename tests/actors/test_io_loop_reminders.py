"""IoLoop.remind_later: a timer that is only the loop's own handle."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator

import pytest

from turnlog.actors.io_loop import IoLoop

WAIT = 10.0
caller_var: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")


@pytest.fixture
def io_loop() -> Iterator[IoLoop]:
    loop = IoLoop(name="test-reminders")
    yield loop
    loop.close()


class Calls:
    def __init__(self) -> None:
        self.seen: list[tuple[object, str, str]] = []
        self.done = threading.Event()

    def __call__(self, argument: object) -> None:
        self.seen.append((argument, threading.current_thread().name, caller_var.get()))
        self.done.set()


def test_a_reminder_set_from_another_thread_runs_on_the_loop_with_its_argument(
    io_loop: IoLoop,
) -> None:
    calls = Calls()
    caller_var.set("the caller's")
    io_loop.remind_later(0.01, calls, "session-1")
    assert calls.done.wait(WAIT)
    # On the loop's thread, and not in a copy of the caller's context.
    assert calls.seen == [("session-1", "test-reminders", "")]


def test_a_reminder_set_on_the_loop_runs_after_its_delay(io_loop: IoLoop) -> None:
    calls = Calls()
    io_loop.call_soon_threadsafe(io_loop.remind_later, 0.01, calls, 7)
    assert calls.done.wait(WAIT)
    assert calls.seen == [(7, "test-reminders", "")]


def test_many_reminders_due_together_each_run_once(io_loop: IoLoop) -> None:
    seen: list[int] = []
    all_done = threading.Event()

    def note(n: int) -> None:
        seen.append(n)
        if len(seen) == 50:
            all_done.set()

    for n in range(50):
        io_loop.remind_later(0.0, note, n)
    assert all_done.wait(WAIT)
    assert sorted(seen) == list(range(50))


def test_reminders_of_two_loops_may_run_at_the_same_moment() -> None:
    # Each waits for the other inside its callback: both must be running at
    # once, which a context shared between the loops would refuse.
    both = threading.Barrier(2, timeout=WAIT)
    met: list[str] = []
    done = threading.Event()

    def meet(name: str) -> None:
        both.wait()
        met.append(name)
        if len(met) == 2:
            done.set()

    first, second = IoLoop(name="test-first"), IoLoop(name="test-second")
    try:
        first.remind_later(0.0, meet, "first")
        second.remind_later(0.0, meet, "second")
        assert done.wait(WAIT)
        assert sorted(met) == ["first", "second"]
    finally:
        first.close()
        second.close()
