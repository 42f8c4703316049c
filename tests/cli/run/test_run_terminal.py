"""Ctrl-C as ``turnlog run`` takes it: counted, raised only while typing."""

from __future__ import annotations

import os
import signal

import pytest
from run_support import ScriptedTerminal

from turnlog.cli.run.terminal import CtrlC


class SigintWhileTyping(ScriptedTerminal):
    """A terminal whose user presses Ctrl-C while the line is read."""

    def read_line(self, prompt: str) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        return "typed anyway"


def test_presses_are_counted_once_each() -> None:
    ctrl_c = CtrlC()
    assert ctrl_c.take() == 0
    ctrl_c.press()
    ctrl_c.press()
    assert ctrl_c.take() == 2
    assert ctrl_c.take() == 0


def test_sigint_is_counted_not_raised_and_given_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    ctrl_c = CtrlC()
    ctrl_c.install()
    try:
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt here
        assert ctrl_c.take() == 1
    finally:
        ctrl_c.restore()
    assert signal.getsignal(signal.SIGINT) is before


def test_sigint_ends_a_line_being_typed() -> None:
    ctrl_c = CtrlC()
    ctrl_c.install()
    try:
        with pytest.raises(KeyboardInterrupt):
            ctrl_c.read_line(SigintWhileTyping(), "you> ")
        assert ctrl_c.take() == 0  # raised, not also counted
    finally:
        ctrl_c.restore()


def test_a_press_just_before_the_question_ends_it_at_once() -> None:
    ctrl_c = CtrlC()
    terminal = ScriptedTerminal(["never read"])
    ctrl_c.press()
    with pytest.raises(KeyboardInterrupt):
        ctrl_c.read_line(terminal, "you> ")
    assert terminal.prompts == []
    assert ctrl_c.read_line(terminal, "you> ") == "never read"
