"""The terminal of ``turnlog run``: where it writes and reads, and Ctrl-C.

Ctrl-C is counted by a signal handler rather than raised as
KeyboardInterrupt at whatever line the main thread is on, so it never
lands inside the runtime (half-way through an ask to an actor, say); the
chat loop looks at the count between events. It is raised only while the
loop waits for the user to type (:meth:`CtrlC.read_line`), where it is
meant to end the wait.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any, Protocol

from turnlog.cli.run.missed_presses import PressWatch


class Terminal(Protocol):
    """Where the loop writes and reads (the real terminal, or a test's)."""

    def write(self, text: str) -> None:
        """Shows ``text`` now (no newline is added)."""
        ...

    def read_line(self, prompt: str) -> str:
        """A line typed after ``prompt``; EOFError at the end of input."""
        ...


class StdioTerminal:
    """The process's stdin and stdout."""

    def __init__(self) -> None:
        # A model's text must never crash the session on a narrow encoding.
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")

    def write(self, text: str) -> None:
        """Writes and flushes, so streamed text shows as it arrives."""
        sys.stdout.write(text)
        sys.stdout.flush()

    def read_line(self, prompt: str) -> str:
        """``input(prompt)``."""
        return input(prompt)


class CtrlC:
    """Ctrl-C presses, counted; raised as KeyboardInterrupt only where asked.

    ``install()`` takes over SIGINT and ``restore()`` gives it back. Use it
    from the main thread only, where Python runs signal handlers; tests
    call ``press()`` instead of sending SIGINT.
    """

    def __init__(self) -> None:
        # No lock: the handler runs on the main thread between two bytecodes
        # of whatever that thread is doing, so a lock the main thread held
        # there would deadlock. Presses only ever grow and ``take`` keeps
        # its own mark, so a press landing inside ``take`` is counted next.
        self._presses = 0
        self._taken = 0
        self._raising = False
        self._previous: Any = None
        self._watch: PressWatch | None = None
        self.handled = 0
        """How many times the SIGINT handler has run (see missed_presses)."""
        self.lines = 0
        """How many times ``read_line`` has begun waiting."""

    @property
    def waiting_for_line(self) -> bool:
        """Whether ``read_line`` is waiting (a press there ends the wait)."""
        return self._raising

    def install(self) -> None:
        """Handles SIGINT from now on, and sends again a press that readline
        would miss (see turnlog.cli.run.missed_presses)."""
        self._previous = signal.signal(signal.SIGINT, self._handle)
        if hasattr(signal, "pthread_kill"):  # POSIX, where readline is
            self._watch = PressWatch(self)
            self._watch.start()

    def restore(self) -> None:
        """Gives SIGINT back to whoever had it before ``install``."""
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        self.handled += 1
        if self._raising:
            raise KeyboardInterrupt
        self.press()

    def press(self) -> None:
        """Counts one press."""
        self._presses += 1

    def take(self) -> int:
        """The presses since the last ``take``."""
        presses = self._presses
        new = presses - self._taken
        self._taken = presses
        return new

    def read_line(self, terminal: Terminal, prompt: str) -> str:
        """``terminal.read_line(prompt)``; a Ctrl-C ends it with KeyboardInterrupt."""
        try:
            # Raising from here on, before the presses are looked at: a
            # press landing between the two is raised by the handler, not
            # counted for the next question.
            self._raising = True
            self.lines += 1
            if self.take():
                raise KeyboardInterrupt  # pressed just before the question came
            return terminal.read_line(prompt)
        finally:
            self._raising = False
