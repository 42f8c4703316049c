"""A Ctrl-C that lands while readline is about to wait for a key: sent again.

Python runs a signal's handler on the main thread, between two bytecodes,
or when a system call it made is interrupted by the signal. ``input()``
under GNU readline prints the prompt, then blocks in ``select()`` on the
terminal with no timeout (CPython's ``Modules/readline.c``), and runs
the handlers only when that ``select()`` is interrupted. A SIGINT that
lands after the prompt is printed and before ``select()`` has begun only
sets CPython's flag: nothing interrupts the wait, and the press is seen
once the user types something. Pressing Ctrl-C right after the prompt
shows is what a person does to quit, and what the pseudo-terminal tests
do, so on a busy machine it was seen to hang.

``PressWatch`` closes that window from outside. Every signal's number is
written to a pipe by CPython's own C handler (``signal.set_wakeup_fd``),
whichever thread it interrupted. A thread of the watch reads it; for a
SIGINT it waits ``GRACE_SECONDS``, and if the main thread is still waiting
for a line and the handler has not run since, it sends SIGINT to the main
thread again, which interrupts the ``select()`` by now. The byte that
second signal writes is skipped, so a press is never sent twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)

GRACE_SECONDS = 0.05
"""How long a press may take to reach its handler before it is sent again:
far longer than a handler takes to run on a waiting main thread."""


class Presses(Protocol):
    """What the watch reads of the Ctrl-C state (turnlog.cli.run.terminal.CtrlC)."""

    @property
    def handled(self) -> int:
        """How many times the SIGINT handler has run."""
        ...

    @property
    def waiting_for_line(self) -> bool:
        """Whether the main thread is waiting for the user to type."""
        ...

    @property
    def lines(self) -> int:
        """How many times the main thread has begun waiting for a line."""
        ...


def send_to_main_thread() -> None:
    """SIGINT to the main thread (not to the process: any thread may take that)."""
    main = threading.main_thread().ident
    if main is not None:
        signal.pthread_kill(main, signal.SIGINT)


class PressWatch:
    """Sends a press again when its handler did not run while the main thread
    waits for a line. ``start`` and ``stop`` from the main thread only."""

    def __init__(
        self,
        presses: Presses,
        *,
        resend: Callable[[], None] = send_to_main_thread,
        wait: Callable[[float], None] = time.sleep,
        grace: float = GRACE_SECONDS,
    ) -> None:
        self._presses = presses
        self._resend = resend
        self._wait = wait
        self._grace = grace
        self._thread: threading.Thread | None = None
        self._write_fd = -1
        self._previous_fd = -1
        self.resent = 0
        """Presses sent again (for tests)."""

    def start(self) -> None:
        """Has CPython write every signal to the watch's pipe, and watches it."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # set_wakeup_fd requires it
        self._previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._write_fd = write_fd
        self._thread = threading.Thread(
            target=self.watch, args=(read_fd,), name="turnlog-ctrl-c", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Gives the wake-up back to whoever had it; the watch's thread ends."""
        if self._thread is None:
            return
        signal.set_wakeup_fd(self._previous_fd)
        os.close(self._write_fd)  # the watch reads the end of its pipe
        self._thread.join()
        self._thread = None

    def watch(self, read_fd: int) -> None:
        """Reads signal numbers from ``read_fd`` until it ends (then closes it)."""
        own = 0  # SIGINTs this watch sent: their bytes are not presses
        try:
            while True:
                numbers = os.read(read_fd, 64)
                if not numbers:
                    return
                for number in numbers:
                    if number != signal.SIGINT:
                        continue
                    if own:
                        own -= 1
                        continue
                    if self._missed():
                        logger.debug("a Ctrl-C readline missed is sent again")
                        own += 1
                        self.resent += 1
                        self._resend()
        finally:
            with contextlib.suppress(OSError):
                os.close(read_fd)

    def _missed(self) -> bool:
        """Whether the press just signalled came while the main thread was
        waiting for a line, and ``grace`` seconds on it still waits for that
        same line with the handler not run since.

        A press during a turn is not the watch's: its handler runs when the
        main thread next runs Python, which may be at the prompt that
        follows the turn; sending it again there would quit.
        """
        presses = self._presses
        if not presses.waiting_for_line:
            return False
        handled, line = presses.handled, presses.lines
        self._wait(self._grace)
        return (
            presses.waiting_for_line
            and presses.lines == line
            and presses.handled == handled
        )
