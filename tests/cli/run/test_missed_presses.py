"""A Ctrl-C that readline would miss is sent again, and no other press is."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from turnlog.cli.run.missed_presses import PressWatch
from turnlog.cli.run.terminal import CtrlC

WAIT = 10.0


@dataclass
class Presses:
    """The Ctrl-C state the watch reads, set by each test."""

    handled: int = 0
    waiting_for_line: bool = True
    lines: int = 1


def watched(
    numbers: list[int],
    presses: Presses,
    during_grace: Callable[[], None] = lambda: None,
) -> list[str]:
    """Runs a watch over ``numbers`` (signal numbers, as CPython writes them);
    returns what it did. ``during_grace`` is what happens while it waits."""
    done: list[str] = []

    def wait(seconds: float) -> None:
        assert seconds > 0
        during_grace()

    watch = PressWatch(presses, resend=lambda: done.append("resent"), wait=wait)
    read_fd, write_fd = os.pipe()
    os.write(write_fd, bytes(numbers))
    os.close(write_fd)
    watch.watch(read_fd)  # returns at the pipe's end
    assert watch.resent == len(done)
    return done


def test_a_press_whose_handler_never_ran_at_the_prompt_is_sent_again() -> None:
    assert watched([signal.SIGINT], Presses()) == ["resent"]


def test_the_press_it_sent_again_is_not_sent_a_third_time() -> None:
    # The second byte is the resent signal's own.
    assert watched([signal.SIGINT, signal.SIGINT], Presses()) == ["resent"]


def test_a_press_whose_handler_ran_is_left_alone() -> None:
    presses = Presses()

    def handler_runs() -> None:
        presses.handled += 1
        presses.waiting_for_line = False  # it raised: the wait is over

    assert watched([signal.SIGINT], presses, handler_runs) == []


def test_a_press_during_a_turn_is_left_alone_even_if_a_prompt_follows() -> None:
    # Its handler counts it (the turn is interrupted) once the main thread
    # runs Python again; the next prompt may be up by then.
    presses = Presses(waiting_for_line=False, lines=1)

    def next_prompt() -> None:
        presses.waiting_for_line, presses.lines = True, 2

    assert watched([signal.SIGINT], presses, next_prompt) == []


def test_a_press_at_a_prompt_that_ended_meanwhile_is_left_alone() -> None:
    presses = Presses(lines=1)

    def another_line() -> None:
        presses.lines = 2  # answered, and the next question is up

    assert watched([signal.SIGINT], presses, another_line) == []


def test_other_signals_are_not_presses() -> None:
    assert watched([signal.SIGTERM, signal.SIGCHLD], Presses()) == []


@pytest.fixture
def sigint_recorded() -> Iterator[list[int]]:
    """SIGINT handled by a handler that only records it, for the test."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set from the main thread")
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: seen.append(number))
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_real_signal_reaches_the_watch_through_the_wakeup_fd(
    sigint_recorded: list[int],
) -> None:
    # The presses say the handler never ran (this one does not count), so
    # the watch sends the press again, through the pipe CPython wrote to.
    resent = threading.Event()
    previous = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(previous)
    watch = PressWatch(Presses(), resend=resent.set)
    watch.start()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert resent.wait(WAIT)
    finally:
        watch.stop()
    assert sigint_recorded == [signal.SIGINT]
    assert signal.set_wakeup_fd(previous) == previous  # given back by stop()


def test_ctrl_c_counts_handler_runs_and_the_lines_it_waits_for() -> None:
    ctrl_c = CtrlC()
    seen: list[tuple[bool, int]] = []

    class Terminal:
        def write(self, text: str) -> None:
            pass

        def read_line(self, prompt: str) -> str:
            seen.append((ctrl_c.waiting_for_line, ctrl_c.lines))
            ctrl_c._handle(signal.SIGINT, None)  # a press while it waits
            return "never"

    with pytest.raises(KeyboardInterrupt):
        ctrl_c.read_line(Terminal(), "you> ")
    assert seen == [(True, 1)]
    assert ctrl_c.handled == 1
    assert not ctrl_c.waiting_for_line
    ctrl_c._handle(signal.SIGINT, None)  # between questions: counted
    assert ctrl_c.take() == 1
