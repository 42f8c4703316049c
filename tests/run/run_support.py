"""Helpers of the ``turnlog run`` tests: a scripted terminal, the key."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

import pykka

API_KEY = "sk-run-test-0123456789SECRET"
"""The key the tests configure; it must never be printed."""

PROMPT = "you> "

Line = str | BaseException
"""What the user types next: a line, or EOFError / KeyboardInterrupt."""


class ScriptedTerminal:
    """A terminal whose user types ``lines`` in order, then EOF.

    Args:
        lines: each a line, or an exception ``read_line`` raises instead.
        on_write: called with everything shown so far, after each write.
        wait_for_turns: at the ``you>`` prompt, wait for every TurnActor
            to stop first (off for a test that keeps a turn running).
    """

    def __init__(
        self,
        lines: Iterable[Line] = (),
        on_write: Callable[[str], None] | None = None,
        wait_for_turns: bool = True,
    ) -> None:
        self.lines: deque[Line] = deque(lines)
        self.prompts: list[str] = []
        self._out: list[str] = []
        self._on_write = on_write
        self._wait_for_turns = wait_for_turns

    def write(self, text: str) -> None:
        self._out.append(text)
        if self._on_write is not None:
            self._on_write(self.text)

    def read_line(self, prompt: str) -> str:
        if prompt == PROMPT and self._wait_for_turns:
            turn_actors_stopped()  # a user types after the turn is all over
        self.prompts.append(prompt)
        self.write(prompt)
        line = self.lines.popleft() if self.lines else EOFError()
        if isinstance(line, BaseException):
            raise line
        self.write(line + "\n")
        return line

    @property
    def text(self) -> str:
        """Everything shown so far, prompts and typed lines included."""
        return "".join(self._out)


def turn_actors_stopped(timeout: float = 10.0) -> None:
    """Waits until every TurnActor has stopped.

    A session tells its TurnActor to stop when a turn ends and does not
    wait; a runtime closed right then may stop the tool executor first,
    and the TurnActor fails telling it (logged, and left for the
    actors-stopped check). A real user takes longer to type than that;
    a scripted one waits here.
    """
    for ref in pykka.ActorRegistry.get_by_class_name("TurnActor"):
        ref.actor_stopped.wait(timeout)
